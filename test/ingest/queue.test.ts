import fs from 'node:fs';
import path from 'node:path';
import { DuckDBInstance } from '@duckdb/node-api';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generate } from '../../sim/generate/index.js';
import { lakeIdentity, readLedger } from '../../ingest/ledger.js';
import { queueItems } from '../../ingest/queue/store.js';
import { runIngest } from '../../ingest/run.js';
import { currentVersion } from '../../src/lake/versions.js';
import { StateStore } from '../../src/state/store.js';
import { lakeContent } from '../helpers/lake-content.js';
import { startTestPostgres, type TestPostgres } from '../helpers/postgres.js';
import { runCli, spawnCli, type CliRun } from './lakeutil.js';
import { tempDir } from './oracle.js';
import { manifestsOnDisk, namedPaths, parquetOnDisk } from './versions-util.js';

/**
 * `pmlake ingest --queue` / `--worker` (ingest/queue/): two worker processes over one lake and a real PostgreSQL,
 * one killed with SIGKILL while it publishes an item under the lake lock; the other takes the item over once its
 * lease ended and lands everything. The lake must equal a single-process ingest of the same inputs with one batch
 * per input (the queue's unit), data set by data set (rows and content hash), and queueing the inputs again must
 * add nothing.
 */

const tmp = tempDir('pmlake-queue-');
let pg: TestPostgres;
let state: StateStore;
let gen: string;
let inputs: string[];

beforeAll(async () => {
  pg = await startTestPostgres();
  state = await StateStore.connect({ stateDir: tmp.dir, databaseUrl: pg.url });
  gen = path.join(tmp.dir, 'gen');
  await generate({ markets: 8, days: 2, seed: 31, start: '2025-10-13', out: gen, workers: 0, rate: 0.5 });
  inputs = [path.join(gen, 'markets'), path.join(gen, 'fills'), path.join(gen, 'ws')];
}, 120_000);

afterAll(async () => {
  await state?.close();
  await pg?.close();
  tmp.cleanup();
});

/** Polls `cond` every 50 ms until it holds; fails after `ms`. */
async function until(cond: () => boolean, ms: number, what: string): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** The seq of the first tape item a worker's log says it took, if any. */
function tapeItemTaken(stderr: string): number | undefined {
  for (const line of stderr.split('\n')) {
    if (!line.startsWith('{') || !line.endsWith('}')) continue;
    const l = JSON.parse(line) as { msg?: string; file?: string; seq?: number };
    if (l.msg === 'ingest item taken' && l.file?.includes(`${path.sep}ws${path.sep}`)) return l.seq;
  }
  return undefined;
}

describe('ingest queue workers', () => {
  it('a worker killed mid-publish is taken over, and the lake equals a single ingest of the same inputs', async () => {
    const lake = path.join(tmp.dir, 'lake');
    const env = { PMLAKE_LAKE: lake, PMLAKE_DATABASE_URL: pg.url, PMLAKE_STATE: path.join(tmp.dir, 'state') };
    const queued = await runCli(['ingest', '--queue', ...inputs], env);
    expect(queued.code, queued.stderr).toBe(0);
    expect(JSON.parse(queued.stdout)).toMatchObject({ files: 5, queued: 5, already_queued: 0, already_landed: 0 });
    // The same content again (a directory and one of its files) while it waits: nothing new.
    const twice = await runCli(['ingest', '--queue', inputs[2]!, path.join(gen, 'markets', 'gamma_markets.json')], env);
    expect(JSON.parse(twice.stdout)).toMatchObject({ files: 3, queued: 0, already_queued: 3 });

    // The victim pauses after each data set it merges (the orchestrator's test hook) and says so; once it holds a
    // tape item the second worker starts, and the victim is killed when its l2 is written, before its publish.
    const victim = spawnCli(['ingest', '--worker', '--lease-seconds', '3'], { ...env, LOG_LEVEL: 'info', PMLAKE_TEST_PAUSE_BETWEEN_MERGES_MS: '150' });
    let survivor: ReturnType<typeof spawnCli> | undefined;
    victim.onStderr(() => {
      const err = victim.stderr();
      if (!survivor && tapeItemTaken(err) !== undefined) {
        survivor = spawnCli(['ingest', '--worker', '--lease-seconds', '3'], { ...env, LOG_LEVEL: 'info' });
      }
      if (survivor && err.includes('pmlake-test: merged l2')) victim.kill();
    });
    const killed: CliRun = await victim.done;
    expect(killed.signal, killed.stderr.slice(-2000)).toBe('SIGKILL');
    const victimSeq = tapeItemTaken(killed.stderr);
    expect(victimSeq).toBeGreaterThan(0);
    // The item was mid-publish: its l2 files written, no version naming them, nothing in the ledger for it.
    expect(readLedger(lake).size).toBeLessThan(5);

    const rest = await survivor!.done;
    expect(rest.code, rest.stderr.slice(-3000)).toBe(0);
    const report = JSON.parse(rest.stdout) as { landed: number; costs: { seq: number; outcome: string }[] };
    expect(report.costs.some((c) => c.seq === victimSeq && c.outcome === 'landed')).toBe(true);

    const lakeId = lakeIdentity(lake);
    const rows = await queueItems(state, lakeId);
    expect(rows.map((r) => r.status)).toEqual(Array(5).fill('done'));
    // Taken twice: by the victim, then by the survivor once the lease ran out (a give-back is not an attempt).
    expect(rows.find((r) => r.seq === victimSeq)?.attempts).toBe(2);
    const ledger = readLedger(lake);
    expect(ledger.size).toBe(5);
    // What the victim wrote and never published was swept by the worker that took its item over.
    const named = new Set(manifestsOnDisk(lake).flatMap((m) => [...namedPaths(m)]));
    expect(parquetOnDisk(lake).filter((f) => !named.has(f))).toEqual([]);
    expect(new Set([...ledger.values()].map((e) => e.sha256))).toEqual(new Set(rows.map((r) => r.sha256)));

    // The reference: one process, one batch per input (runIngest flushes after every file with batchRows 1).
    const single = path.join(tmp.dir, 'single');
    await runIngest(inputs, { lakeDir: single, threads: 1, memoryLimit: '1GB', batchRows: 1 });
    const db = await DuckDBInstance.create(':memory:');
    try {
      const want = await lakeContent(db, currentVersion(single));
      const got = await lakeContent(db, currentVersion(lake));
      for (const name of Object.keys(want)) expect(got[name], name).toBe(want[name]);
      for (const name of ['l2', 'book_snapshots', 'top_of_book', 'trades', 'raw', 'candles_1m', 'coverage', 'markets']) {
        expect(want[name], name).not.toBe('0');
      }
    } finally {
      db.closeSync();
    }

    // Queueing the same inputs again adds nothing; a worker then finds nothing to do and the lake stays as it is.
    const version = currentVersion(lake).version;
    const again = await runCli(['ingest', '--queue', ...inputs], env);
    expect(again.code, again.stderr).toBe(0);
    expect(JSON.parse(again.stdout)).toMatchObject({ files: 5, queued: 0, already_landed: 5 });
    expect(await queueItems(state, lakeId)).toHaveLength(5);
    const idle = await runCli(['ingest', '--worker'], env);
    expect(idle.code, idle.stderr).toBe(0);
    expect(JSON.parse(idle.stdout)).toMatchObject({ items: 0 });
    expect(currentVersion(lake).version).toBe(version);
    expect(fs.readdirSync(lake).some((n) => n.includes('.tmp-'))).toBe(false);
  }, 180_000);

  it('a worker with --wait lands what is queued after it started, and ends with 0 on SIGTERM', async () => {
    const lake = path.join(tmp.dir, 'waiting');
    const env = { PMLAKE_LAKE: lake, PMLAKE_DATABASE_URL: pg.url, PMLAKE_STATE: path.join(tmp.dir, 'state'), LOG_LEVEL: 'info' };
    const worker = spawnCli(['ingest', '--worker', '--wait'], env);
    await until(() => worker.stderr().includes('"msg":"ingest worker started"'), 30_000, 'the worker to start');
    const file = path.join(gen, 'markets', 'gamma_markets.json');
    const queued = await runCli(['ingest', '--queue', file], env);
    expect(queued.code, queued.stderr).toBe(0);
    await until(() => worker.stderr().includes('"msg":"ingest item finished"'), 30_000, 'the item to land');
    expect(readLedger(lake).size).toBe(1);
    expect((await queueItems(state, lakeIdentity(lake))).map((r) => r.status)).toEqual(['done']);
    process.kill(worker.pid, 'SIGTERM');
    const end = await worker.done;
    expect(end.code, end.stderr.slice(-2000)).toBe(0);
    expect(JSON.parse(end.stdout)).toMatchObject({ items: 1, landed: 1 });
  }, 60_000);
});
