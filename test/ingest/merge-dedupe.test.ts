import path from 'node:path';
import { DuckDBInstance, type DuckDBConnection } from '@duckdb/node-api';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mergeIntoPartitions } from '../../ingest/partitions.js';
import { VersionDraft } from '../../ingest/versions.js';
import { columnDdl } from '../../src/lake/layout.js';
import { currentVersion } from '../../src/lake/versions.js';
import { tempDir } from './oracle.js';

/**
 * A batch whose staged rows repeat some natural keys keeps each key once: the least row by every column
 * (here: the earliest receive time, then the least seq), whether the partition is new or already holds rows
 * (then a stored key is not added again). Only the repeated keys go through the tie-break window
 * (ingest/partitions.ts onceEach); the expected rows are computed here in plain TypeScript.
 */
const tmp = tempDir('pmlake-dedupe-');
let db: DuckDBInstance;
let conn: DuckDBConnection;
beforeAll(async () => {
  db = await DuckDBInstance.create(':memory:', { threads: '2' });
  conn = await db.connect();
  await conn.run(`SET TimeZone = 'UTC'`);
});
afterAll(() => {
  conn?.closeSync();
  db?.closeSync();
  tmp.cleanup();
});

type Trade = { ts: number; recv: number; asset: string; side: string | null; price: string; size: string; seq: number };
const keyOf = (t: Trade): string => [t.asset, t.ts, t.price, t.size, t.side ?? '<null>'].join('|');
const DAY0 = Date.parse('2026-05-01T23:00:00Z');

/** `n` distinct keys over two days (a NULL side among them), each staged 1–3 times with other receive times and seqs. */
function batch(seed: number, n: number, from = 0): { rows: Trade[]; keys: Trade[] } {
  let s = seed;
  const rnd = (): number => (s = (s * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
  const keys: Trade[] = [];
  for (let i = from; i < from + n; i += 1) {
    const ts = DAY0 + (i % 97) * 60_000 + Math.floor(i / 97) * 1000;
    keys.push({
      ts,
      recv: ts,
      asset: `tok${i % 5}`,
      side: i % 11 === 0 ? null : i % 2 ? 'BUY' : 'SELL',
      price: `0.${10 + (i % 80)}`,
      size: `${1 + (i % 7)}`,
      seq: 0,
    });
  }
  const rows: Trade[] = [];
  for (const k of keys) {
    const copies = rnd() < 0.15 ? 2 + Math.floor(rnd() * 2) : 1;
    for (let c = 0; c < copies; c += 1) {
      const recv = k.ts + Math.floor(rnd() * 3) * 5;
      rows.push({ ...k, recv, seq: recv * 1_000_000 + Math.floor(rnd() * 1000) });
    }
  }
  // Staged out of order: the merge must not depend on the staging order.
  rows.sort(() => rnd() - 0.5);
  return { rows, keys };
}

function leastPerKey(rows: Trade[]): Map<string, Trade> {
  const out = new Map<string, Trade>();
  for (const r of rows) {
    const have = out.get(keyOf(r));
    if (!have || r.recv < have.recv || (r.recv === have.recv && r.seq < have.seq)) out.set(keyOf(r), r);
  }
  return out;
}

async function stage(rows: Trade[]): Promise<void> {
  await conn.run(`CREATE OR REPLACE TEMP TABLE stg_t (${columnDdl('last_trades')})`);
  const values = rows
    .map(
      (r) =>
        `(make_timestamp(${r.ts * 1000}), make_timestamp(${r.recv * 1000}), 'c', '${r.asset}', ${r.side === null ? 'NULL' : `'${r.side}'`}, ${r.price}, ${r.size}, 0, 'tx', ${r.seq})`,
    )
    .join(', ');
  await conn.run(`INSERT INTO stg_t VALUES ${values}`);
}

async function stored(lakeDir: string): Promise<Trade[]> {
  const files = currentVersion(lakeDir).files('last_trades');
  const r = await conn.runAndReadAll(
    `SELECT epoch_ms(ts) AS ts, epoch_ms(recv_ts) AS recv, asset_id AS asset, side, price::VARCHAR AS price, size::VARCHAR AS size, seq
     FROM read_parquet([${files.map((f) => `'${f}'`).join(', ')}])`,
  );
  return r.getRowObjectsJS().map((x) => ({
    ts: Number(x.ts),
    recv: Number(x.recv),
    asset: String(x.asset),
    side: x.side === null ? null : String(x.side),
    price: String(x.price),
    size: String(x.size),
    seq: Number(x.seq),
  }));
}

const norm = (t: Trade): Trade => ({ ...t, price: String(Number(t.price)), size: String(Number(t.size)) });
const sortRows = (rows: Trade[]): string[] => rows.map((r) => JSON.stringify(norm(r))).sort();

describe('a batch that repeats natural keys', () => {
  it('keeps the least row of each key, into new partitions and into partitions that hold rows', async () => {
    const lakeDir = path.join(tmp.dir, 'lake');
    const first = batch(7, 600);
    expect(first.rows.length).toBeGreaterThan(first.keys.length + 50);
    await stage(first.rows);
    const d1 = new VersionDraft(lakeDir);
    const m1 = await mergeIntoPartitions(conn, d1, 'last_trades', 'stg_t');
    d1.publish('ingest', {}, []);
    const want1 = leastPerKey(first.rows);
    expect(m1.partitions).toBe(2);
    expect(m1.rowsAdded).toBe(want1.size);
    expect(sortRows(await stored(lakeDir))).toEqual(sortRows([...want1.values()]));

    // Half of its keys are the first batch's (staged again with other receive times), half are new.
    const second = batch(11, 600, 300);
    await stage(second.rows);
    const d2 = new VersionDraft(lakeDir);
    const m2 = await mergeIntoPartitions(conn, d2, 'last_trades', 'stg_t');
    d2.publish('ingest', {}, []);
    const fresh = [...leastPerKey(second.rows).values()].filter((t) => !want1.has(keyOf(t)));
    expect(fresh.length).toBeGreaterThan(100);
    expect(m2.rowsAdded).toBe(fresh.length);
    expect(sortRows(await stored(lakeDir))).toEqual(sortRows([...want1.values(), ...fresh]));
  });
});
