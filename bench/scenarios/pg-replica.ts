import fs from 'node:fs';
import path from 'node:path';
import { startTestPostgres, type TestPostgres } from '../../test/helpers/postgres.js';
import { startTestRedis, type TestRedis } from '../../test/helpers/redis.js';
import { StateStore } from '../../src/state/store.js';
import { NotAvailable, type BenchContext } from '../runner.js';
import { createBenchKeys, startPmlakeServer, type ChildServer } from '../server.js';
import { cpuMs, treeCpuMs } from './http-rounds.js';

/**
 * A replica as a deployment of several machines runs it (docs/operations.md), for the *-pg scenarios: a second
 * `pmlake serve` over the bench lake with its
 * state in a throwaway loopback PostgreSQL (PMLAKE_DATABASE_URL, migrated on start: accounts, keys, usage, the
 * export queue) and its limits in a throwaway loopback redis-server (PMLAKE_REDIS_URL). Its keys are created in
 * that PostgreSQL through the bench's own StateStore connection. The throwaway PostgreSQL runs with fsync and
 * synchronous_commit off (scripts/postgres-local.sh): a commit costs a round trip, not a disk flush.
 */
export type PgReplica = {
  server: ChildServer;
  /** Fresh keys of one new user in the replica's PostgreSQL state. */
  newKeys(label: string, n: number): Promise<string[]>;
  /** CPU ms so far of the PostgreSQL server (postmaster and every backend) and of redis-server; NaN when unreadable. */
  postgresCpuMs(): number;
  redisCpuMs(): number;
  describe: string;
  close(): Promise<void>;
};

export async function startPgReplica(ctx: BenchContext, name: string): Promise<PgReplica> {
  let pg: TestPostgres | null = null;
  let redis: TestRedis | null = null;
  let store: StateStore | null = null;
  let server: ChildServer | null = null;
  const close = async (): Promise<void> => {
    await server?.stop();
    await store?.close();
    await redis?.close();
    await pg?.close();
  };
  try {
    try {
      pg = await startTestPostgres();
    } catch (err) {
      throw new NotAvailable(`no PostgreSQL server (bash scripts/ensure-system-deps.sh installs it): ${(err as Error).message.split('\n')[0]}`);
    }
    try {
      redis = await startTestRedis();
    } catch (err) {
      throw new NotAvailable(`no redis-server (bash scripts/ensure-system-deps.sh installs it): ${(err as Error).message}`);
    }
    const stateDir = path.join(ctx.workDir, `state-${name}`);
    // The server migrates on start; the bench's connection then only adds users and keys.
    server = await startPmlakeServer({
      lakeDir: ctx.lake.lakeDir,
      stateDir,
      env: { PMLAKE_DATABASE_URL: pg.url, PMLAKE_REDIS_URL: redis.url },
      logFile: path.join(ctx.workDir, `${name}-pmlake.log`),
    });
    store = await StateStore.connect({ stateDir, databaseUrl: pg.url, role: 'bench' });
    const keyStore = store;
    const pgPid = postmasterPid(pg.port);
    const redisRef = redis;
    let users = 0;
    return {
      server,
      newKeys: (label, n) => createBenchKeys(keyStore, `${name}-${label}-${++users}`, n),
      postgresCpuMs: () => treeCpuMs(pgPid),
      redisCpuMs: () => cpuMs(redisRef.pid),
      describe: `pmlake pid ${server.pid} at ${server.url}, PostgreSQL port ${pg.port} (postmaster pid ${pgPid ?? '?'}), redis-server pid ${redis.pid} port ${redis.port}`,
      close,
    };
  } catch (err) {
    await close().catch(() => undefined);
    throw err;
  }
}

/** The postmaster listening on `port`: the `postgres` process whose command line has `-p <port>` (undefined if none). */
function postmasterPid(port: number): number | undefined {
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    let argv: string[];
    try {
      argv = fs.readFileSync(`/proc/${entry}/cmdline`, 'utf8').split('\0');
    } catch {
      continue;
    }
    const p = argv.indexOf('-p');
    if (path.basename(argv[0] ?? '') === 'postgres' && p > 0 && argv[p + 1] === String(port)) return Number(entry);
  }
  return undefined;
}
