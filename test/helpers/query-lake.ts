import { currentFiles, SET_NAMES, setDir } from '../../src/lake/versions.js';
import path from 'node:path';
import { DuckDBInstance } from '@duckdb/node-api';
import { generate } from '../../sim/generate/index.js';
import { runIngest } from '../../ingest/run.js';
import { createTestKey, startTestServer, tempDir, testConfig } from './server.js';
import type { RunningServer } from '../../src/server.js';

/**
 * A real lake for the query-API tests: the venue fixtures plus a small generated history, both through the
 * real ingest. Returns a running server over it, a professional and a free key, and a read-only DuckDB for
 * the tests' own independent reads of the Parquet files.
 */
export type QueryLake = {
  lakeDir: string;
  srv: RunningServer;
  key: string;
  freeKey: string;
  db: DuckDBInstance;
  get(pathAndQuery: string, init?: RequestInit & { key?: string | null }): Promise<{ status: number; body: any; headers: Headers }>;
  /** Plain rows read straight from the lake with DuckDB, values as JS (for independent computations). */
  rows(sql: string): Promise<Record<string, unknown>[]>;
  close(): Promise<void>;
};

export const FIXTURES = path.resolve('test/fixtures/venue');

/** `extra`: more input files or directories ingested with the generated history and the fixtures (a test's own markets). */
export async function buildQueryLake(opts: { markets?: number; days?: number; seed?: number; extra?: readonly string[] } = {}): Promise<QueryLake> {
  const tmp = tempDir('pmlake-qlake-');
  const lakeDir = path.join(tmp.dir, 'lake');
  const gen = path.join(tmp.dir, 'gen');
  await generate({ markets: opts.markets ?? 6, days: opts.days ?? 3, seed: opts.seed ?? 7, out: gen, workers: 0, rate: 0.3 });
  await runIngest([gen, FIXTURES, ...(opts.extra ?? [])], { lakeDir, threads: 2 });
  const srv = await startTestServer(testConfig({ PMLAKE_LAKE: lakeDir, PMLAKE_STATE: path.join(tmp.dir, 'state') }));
  const key = await createTestKey(srv, { email: 'pro@example.com', plan: 'professional' });
  // The service limits each key to 60 requests a minute; the tests spread their requests over a pool of the
  // same user's keys rather than weakening the limiter.
  const pool: string[] = [];
  for (let i = 0; i < 40; i += 1) pool.push(await createTestKey(srv, { email: 'pro@example.com', plan: 'professional', name: `pool${i}` }));
  let next = 0;
  const freeKey = await createTestKey(srv, { email: 'free@example.com', plan: 'free' });
  const db = await DuckDBInstance.create(':memory:', { threads: '2' });
  const conn = await db.connect();
  await conn.run(`SET TimeZone = 'UTC'`);
  return {
    lakeDir,
    srv,
    key,
    freeKey,
    db,
    async get(p, init = {}) {
      const { key: k, ...rest } = init;
      const headers: Record<string, string> = { 'content-type': 'application/json', ...((rest.headers as Record<string, string>) ?? {}) };
      const useKey = k === undefined ? pool[next++ % pool.length]! : k;
      if (useKey !== null) headers['x-api-key'] = useKey;
      const res = await fetch(`${srv.url}${p}`, { ...rest, headers });
      const text = await res.text();
      let body: unknown = text;
      try {
        body = JSON.parse(text);
      } catch {
        /* not JSON (HTML page) */
      }
      return { status: res.status, body, headers: res.headers };
    },
    async rows(sql) {
      return (await conn.runAndReadAll(sql)).getRowObjectsJS() as Record<string, unknown>[];
    },
    async close() {
      conn.closeSync();
      db.closeSync();
      await srv.close();
      tmp.cleanup();
    },
  };
}

/** The current lake version's files of a data set (by directory), as a list for the tests' own read_parquet. */
export function glob(lakeDir: string, dir: string): string {
  const name = SET_NAMES.find((n) => setDir(n) === dir);
  if (!name) throw new Error(`no data set in ${dir}`);
  return `[${currentFiles(lakeDir, name)
    .map((f) => `'${f}'`)
    .join(', ')}]`;
}
export function catalog(lakeDir: string, name: string): string {
  return glob(lakeDir, `catalog/${name}`);
}

/** One trade with exact integers (micro-units): what the OHLCV and chart tests bucket independently. */
export type ExactTrade = { us: bigint; block: bigint; log: number; id: string; price: bigint; size: bigint };

/** The token with the most trades and its trades read straight from the Parquet files, exact. */
export async function busiestTokenTrades(L: QueryLake): Promise<{ token: string; trades: ExactTrade[] }> {
  const busiest = await L.rows(`SELECT token_id, count(*) AS n FROM read_parquet(${glob(L.lakeDir, 'trades')}) GROUP BY 1 ORDER BY n DESC, token_id LIMIT 1`);
  const token = String(busiest[0]!.token_id);
  const raw = await L.rows(
    `SELECT epoch_us(ts) AS us, coalesce(block_number, -1) AS block, log_index, id, (price * 1000000)::BIGINT AS price, (size * 1000000)::BIGINT AS size
     FROM read_parquet(${glob(L.lakeDir, 'trades')}) WHERE token_id = '${token}'`,
  );
  const trades = raw.map((r) => ({
    us: BigInt(r.us as bigint),
    block: BigInt(r.block as bigint),
    log: Number(r.log_index),
    id: String(r.id),
    price: BigInt(r.price as bigint),
    size: BigInt(r.size as bigint),
  }));
  return { token, trades };
}
