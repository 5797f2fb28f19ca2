import path from 'node:path';
import { DuckDBInstance } from '@duckdb/node-api';
import { generate } from '../../sim/generate/index.js';
import { runIngest } from '../../ingest/run.js';
import { createTestKey, startTestServer, tempDir, testConfig } from '../helpers/server.js';
import { glob } from '../helpers/query-lake.js';
import type { RunningServer } from '../../src/server.js';

/**
 * The normalized replay tests' lake: a generated two-day history with capture faults (a 30-minute silence of the
 * whole capture and dropped price_change lines, so the integrity layer records disconnects and gaps) through the
 * real ingest, a real server over it, a pool of professional keys (the per-key request limit), a free key, and a
 * plain DuckDB for the tests' independent reads of the Parquet files.
 */
export const DAY0 = '2025-09-20';
export const SILENCE_FROM = Date.parse(`${DAY0}T12:00:00Z`);

export type ReplayLake = {
  lakeDir: string;
  srv: RunningServer;
  /** A DuckDB of the test's own (for a LakeSession over the lake, or plain reads). */
  db: DuckDBInstance;
  freeKey: string;
  key(): string;
  rows(sql: string): Promise<Record<string, unknown>[]>;
  files(dir: string): string;
  close(): Promise<void>;
};

export async function buildReplayLake(): Promise<ReplayLake> {
  const tmp = tempDir('pmlake-replay-');
  const lakeDir = path.join(tmp.dir, 'lake');
  const gen = path.join(tmp.dir, 'gen');
  await generate({
    markets: 6,
    days: 2,
    seed: 11,
    start: DAY0,
    out: gen,
    workers: 0,
    rate: 3,
    faults: { dropRate: 0.003, silences: [{ fromMs: SILENCE_FROM, seconds: 1800 }], duplicates: 0, crossed: 0 },
  });
  await runIngest([gen], { lakeDir, threads: 2 });
  const srv = await startTestServer(testConfig({ PMLAKE_LAKE: lakeDir, PMLAKE_STATE: path.join(tmp.dir, 'state') }));
  const pool: string[] = [];
  for (let i = 0; i < 20; i += 1) pool.push(await createTestKey(srv, { email: 'pro@example.com', plan: 'professional', name: `pool${i}` }));
  const freeKey = await createTestKey(srv, { email: 'free@example.com', plan: 'free' });
  let next = 0;
  const db = await DuckDBInstance.create(':memory:', { threads: '2' });
  const conn = await db.connect();
  await conn.run(`SET TimeZone = 'UTC'`);
  return {
    lakeDir,
    srv,
    db,
    freeKey,
    key: () => pool[next++ % pool.length]!,
    async rows(sql) {
      return (await conn.runAndReadAll(sql)).getRowObjectsJS() as Record<string, unknown>[];
    },
    files: (dir) => glob(lakeDir, dir),
    async close() {
      conn.closeSync();
      db.closeSync();
      await srv.close();
      tmp.cleanup();
    },
  };
}

/** A GET of NDJSON: status, the parsed lines (or the JSON error body), the content type. */
export async function getNdjson(
  L: ReplayLake,
  p: string,
  key: string | null = L.key(),
): Promise<{ status: number; lines: any[]; body: any; type: string | null }> {
  const res = await fetch(`${L.srv.url}${p}`, { headers: key === null ? {} : { 'x-api-key': key } });
  const text = await res.text();
  const type = res.headers.get('content-type');
  if (res.status !== 200) return { status: res.status, lines: [], body: JSON.parse(text), type };
  const lines = text
    .split('\n')
    .filter((l) => l.length > 0)
    .map((l) => JSON.parse(l));
  return { status: res.status, lines, body: null, type };
}

/** µs of an ISO text with up to 6 fractional digits. */
export function micros(iso: string): bigint {
  const frac = /\.(\d{1,6})Z$/.exec(iso)?.[1] ?? '';
  return BigInt(Date.parse(`${iso.slice(0, 19)}Z`)) * 1000n + BigInt(frac.padEnd(6, '0') || '0');
}

/** ISO text of µs, as the lake writes it (µs digits only when present). */
export function iso(us: bigint): string {
  const ms = us / 1000n;
  const sub = us % 1000n;
  const base = new Date(Number(ms)).toISOString();
  if (sub !== 0n) return `${base.slice(0, 23)}${String(sub).padStart(3, '0')}Z`;
  return base.endsWith('.000Z') ? `${base.slice(0, 19)}Z` : base;
}
