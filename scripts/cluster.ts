import { execFile, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { promisify } from 'node:util';
import { REPO, spawnUntil, stopChild } from '../bench/server.js';
import { DuckDBInstance } from '@duckdb/node-api';
import { startTestRedis } from '../test/helpers/redis.js';
import { buildDemoLake, busiestMarket } from '../src/commands/demo.js';
import { LakeSession } from '../src/lake/session.js';
import { loadConfig } from '../src/config.js';
import { createLogger } from '../src/log.js';
import { startLocalS3 } from '../src/s3/local.js';
import { StateStore } from '../src/state/store.js';

/**
 * `make cluster`: pmlake as several machines would run it, on this one, with one command — PostgreSQL (state,
 * export queue, the ingest's lock), Redis (limits), the embedded S3 server (exports), two API replicas
 * (`pmlake serve`, no embedded worker), one export worker (`pmlake worker`), all over the demo lake, and a
 * tiny round-robin front on $PORT (default 8000) that alternates between the replicas. Everything lives under
 * cluster/ (git-ignored) and on loopback; Ctrl-C stops it all. PostgreSQL and Redis come from Debian
 * (scripts/ensure-system-deps.sh, which `make cluster` runs first).
 */
const execFileP = promisify(execFile);
const base = loadConfig();
const log = createLogger(base.logLevel === 'info' ? 'warn' : base.logLevel);
const out = process.stdout;
const dir = path.join(REPO, 'cluster');
const frontPort = Number(process.env.PORT ?? 8000);
const ports = { pg: 54329, replicas: [frontPort + 1, frontPort + 2] };
const children: ChildProcess[] = [];
/** The simulated venue of the cluster's live input. */
const LIVE = { markets: 20, rate: 500, seed: 20261126 };
const stops: (() => Promise<unknown>)[] = [];

async function main(): Promise<void> {
  fs.mkdirSync(dir, { recursive: true });
  await buildDemoLake(base, log, out);

  out.write('starting PostgreSQL, Redis and the S3 server on loopback ...\n');
  const pgDir = path.join(dir, 'pg');
  const databaseUrl = (await execFileP('bash', [path.join(REPO, 'scripts/postgres-local.sh'), 'start', pgDir, String(ports.pg)])).stdout.trim();
  stops.push(() => execFileP('bash', [path.join(REPO, 'scripts/postgres-local.sh'), 'stop', pgDir, String(ports.pg)]));
  // The same throwaway Redis the tests and benches use (loopback, a free port, no persistence).
  const redis = await startTestRedis();
  stops.push(() => redis.close());
  const redisUrl = redis.url;
  const s3 = await startLocalS3({ directory: path.join(dir, 's3'), buckets: ['pmlake-exports'] });
  stops.push(() => s3.close());

  // Keys in the shared database, visible to every replica.
  const store = await StateStore.connect({ stateDir: dir, databaseUrl });
  const pro = await store.upsertUser('demo-pro@pmlake.local', 'professional');
  const proKey = (await store.createApiKey({ userId: pro.id, name: 'cluster demo', prefix: base.keyPrefix })).plaintext;
  await store.close();

  const shared = {
    PMLAKE_LAKE: base.lakeDir,
    PMLAKE_DATABASE_URL: databaseUrl,
    PMLAKE_REDIS_URL: redisUrl,
    PMLAKE_S3_ENDPOINT: s3.endpoint,
    PMLAKE_PAYMENT_PROVIDER: process.env.PMLAKE_PAYMENT_PROVIDER ?? 'local',
    PMLAKE_PUBLIC_URL: `http://127.0.0.1:${frontPort}`,
    LOG_LEVEL: process.env.LOG_LEVEL ?? 'warn',
  };
  const replicas: string[] = [];
  for (const [i, port] of ports.replicas.entries()) {
    const name = `replica-${i + 1}`;
    const env = {
      ...process.env,
      ...shared,
      PORT: String(port),
      HOST: '127.0.0.1',
      PMLAKE_STATE: path.join(dir, name),
      PMLAKE_REPLICA_ID: name,
      PMLAKE_EMBEDDED_WORKER: 'off',
    };
    const { child, match } = await spawnUntil(path.join(REPO, 'src/cli.ts'), ['serve'], env, /listening on (http:\/\/[^\s]+)/, path.join(dir, `${name}.log`));
    children.push(child);
    replicas.push(match[1]!);
  }
  const workerEnv = { ...process.env, ...shared, PMLAKE_STATE: path.join(dir, 'worker-1') };
  const worker = await spawnUntil(path.join(REPO, 'src/cli.ts'), ['worker'], workerEnv, /building exports/, path.join(dir, 'worker-1.log'));
  children.push(worker.child);
  // The input side as five more processes: a simulated venue (market channel, catalogue pages, JSON-RPC node), a
  // recorder, a catalogue poller and a chain indexer of it, and a following ingest of their three directories into
  // the lake the replicas serve (its lock in PostgreSQL, as across machines). The simulated venue trades its own
  // synthetic markets: the poller lists them in the lake's catalogue, where the recorder finds their tokens.
  const sim = await spawnUntil(
    path.join(REPO, 'src/cli.ts'),
    ['simulate', '--port', '0', '--markets', String(LIVE.markets), '--rate', String(LIVE.rate), '--seed', String(LIVE.seed)],
    { ...process.env, ...shared },
    /(ws:\/\/[^\s"]+)[^]*PMLAKE_GAMMA_URL=(\S+) PMLAKE_CLOB_URL=(\S+) PMLAKE_POLYGON_RPC_URL=(\S+)/,
    path.join(dir, 'simulate.log'),
  );
  children.push(sim.child);
  const captureDir = path.join(dir, 'capture');
  const catalogueDir = path.join(dir, 'catalogue');
  // A new simulated chain each run (block numbers from the wall clock): the last run's files are another chain's cursor.
  const chainDir = path.join(dir, 'chain');
  fs.rmSync(chainDir, { recursive: true, force: true });
  const liveEnv = {
    ...process.env,
    ...shared,
    PMLAKE_STATE: path.join(dir, 'live'),
    PMLAKE_VENUE_WS_URL: sim.match[1]!,
    PMLAKE_GAMMA_URL: sim.match[2]!,
    PMLAKE_CLOB_URL: sim.match[3]!,
    PMLAKE_POLYGON_RPC_URL: sim.match[4]!,
    PMLAKE_CATALOGUE_SECONDS: process.env.PMLAKE_CATALOGUE_SECONDS ?? '20',
    PMLAKE_CHAIN_CONFIRMATIONS: process.env.PMLAKE_CHAIN_CONFIRMATIONS ?? '2',
    PMLAKE_RECORD_ROTATE_SECONDS: process.env.PMLAKE_RECORD_ROTATE_SECONDS ?? '10',
    PMLAKE_FOLLOW_SECONDS: process.env.PMLAKE_FOLLOW_SECONDS ?? '10',
    PMLAKE_RECORDER_ID: 'cluster-1',
  };
  const recorder = await spawnUntil(path.join(REPO, 'src/cli.ts'), ['record', '--out', captureDir], liveEnv, /pmlake record /, path.join(dir, 'record.log'));
  children.push(recorder.child);
  const poller = await spawnUntil(
    path.join(REPO, 'src/cli.ts'),
    ['catalogue', '--out', catalogueDir],
    liveEnv,
    /pmlake catalogue: /,
    path.join(dir, 'catalogue.log'),
  );
  children.push(poller.child);
  const indexer = await spawnUntil(path.join(REPO, 'src/cli.ts'), ['chain', '--out', chainDir], liveEnv, /pmlake chain: /, path.join(dir, 'chain.log'));
  children.push(indexer.child);
  const follow = await spawnUntil(
    path.join(REPO, 'src/cli.ts'),
    ['ingest', '--follow', captureDir, catalogueDir, chainDir],
    liveEnv,
    /pmlake ingest --follow/,
    path.join(dir, 'follow.log'),
  );
  children.push(follow.child);
  const front = await roundRobin(replicas, frontPort);
  stops.push(() => new Promise((r) => front.close(r)));

  const url = `http://127.0.0.1:${frontPort}`;
  const duck = await DuckDBInstance.create(':memory:');
  const market = (await busiestMarket(new LakeSession(duck, base.lakeDir))) ?? '<market id>';
  duck.closeSync();
  out.write(`\npmlake cluster: front ${url} → replicas ${replicas.join(', ')}; one export worker; logs in ${dir}/\n`);
  const rel = (d: string): string => `${path.relative(REPO, d)}/`;
  out.write(
    `  live input:     pmlake simulate (${sim.match[1]}) → pmlake record → ${rel(captureDir)}, pmlake catalogue → ${rel(catalogueDir)},\n` +
      `                  pmlake chain → ${rel(chainDir)} → pmlake ingest --follow\n`,
  );
  out.write(`  freshness:      curl -s ${url}/v1/status   (tape, catalogue, chain)\n`);
  out.write(`  PMLAKE_DATABASE_URL=${databaseUrl.replace(/:[^:@/]+@/, ':***@')}\n  PMLAKE_REDIS_URL=${redisUrl}\n  PMLAKE_S3_ENDPOINT=${s3.endpoint}\n`);
  out.write(`  key:            ${proKey}\n`);
  out.write(`  which replica:  curl -s -D - -o /dev/null -H 'X-API-Key: ${proKey}' ${url}/v1/markets?limit=1 | grep -i x-pmlake-replica\n`);
  out.write(`  rate limit:     the 61st request of a minute is refused whichever replica serves it (limits in Redis)\n`);
  out.write(
    `  an export:      curl -s -X POST -H 'X-API-Key: ${proKey}' -H 'content-type: application/json' ${url}/v1/exports -d '{"kind":"trades","market_id":"${market}","idempotency_key":"demo-1"}'\n`,
  );
}

/** The tiny front: each request to the next replica in turn, streamed both ways; 502 with a JSON detail when one is down. */
function roundRobin(upstreams: string[], port: number): Promise<http.Server> {
  let next = 0;
  const server = http.createServer((req, res) => {
    const target = new URL(req.url ?? '/', upstreams[next++ % upstreams.length]);
    const up = http.request(target, { method: req.method, headers: req.headers }, (r) => {
      res.writeHead(r.statusCode ?? 502, { ...r.headers, 'x-pmlake-replica': target.host });
      r.pipe(res);
    });
    up.once('error', () => {
      if (!res.headersSent) res.writeHead(502, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ detail: 'replica unavailable' }));
    });
    req.pipe(up);
  });
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => resolve(server));
  });
}

async function shutdown(code: number): Promise<never> {
  await Promise.allSettled(children.map((c) => stopChild(c)));
  for (const stop of stops.reverse()) await stop().catch(() => {});
  process.exit(code);
}

process.once('SIGINT', () => void shutdown(0));
process.once('SIGTERM', () => void shutdown(0));
main().catch(async (err: unknown) => {
  process.stderr.write(`cluster failed: ${err instanceof Error ? err.message : String(err)}\n`);
  await shutdown(1);
});
