import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DuckDBInstance } from '@duckdb/node-api';
import { runJsonArray, runQuery } from '../../src/lake/runner.js';
import { LakeSession } from '../../src/lake/session.js';
import { partitionDir } from '../../src/lake/layout.js';

/**
 * runJsonArray's shape options (DECIMAL written from DOUBLE, constant columns written by JavaScript) against
 * numbers a JSON parser reads from the exact decimal text, and partitionSource against the files on disk.
 */
describe('runJsonArray shape options', () => {
  let db: DuckDBInstance;
  beforeAll(async () => {
    db = await DuckDBInstance.create(':memory:', { threads: '2' });
  });
  afterAll(() => db.closeSync());

  // Exact decimal texts, including the extremes of DECIMAL(10,6), and sums that need a HUGEINT-backed DECIMAL(38,6).
  const prices = ['0.000001', '0.148000', '0.999999', '1.000000', '9999.999999', '0.100000', '0.333333'];
  const sizes = ['27956.270000', '0.000001', '123456789.123456', '9007199254.740991', '5.5'];

  it('doubles and constants give the same values as the exact decimal text, in the same key order', async () => {
    const rows = prices.map((p, i) => `(${i}, '${p}'::DECIMAL(10,6), '${sizes[i % sizes.length]}'::DECIMAL(18,6))`).join(', ');
    const q = {
      sql: `SELECT $tok::VARCHAR AS market_id, $o::INTEGER AS outcome, i, p AS price, sum(s) AS volume
            FROM (VALUES ${rows}) v(i, p, s) GROUP BY i, p ORDER BY i DESC`,
      params: { tok: '5571131876582681065165524844390382108474906999292081106412203814552153081221', o: 1 },
    };
    const plain = await runJsonArray(db, q);
    const fast = await runJsonArray(db, q, {
      decimals: ['price', 'volume'],
      constants: [
        ['market_id', q.params.tok],
        ['outcome', 1],
      ],
    });
    expect(fast.rows).toBe(prices.length);
    const got = JSON.parse(fast.json) as Record<string, unknown>[];
    expect(got).toEqual(JSON.parse(plain.json));
    // Independent expectation: what a JSON parser makes of the exact text.
    expect(got.map((r) => r.price)).toEqual(prices.map((_, i) => parseFloat(prices[prices.length - 1 - i]!)));
    expect(got.map((r) => r.volume)).toEqual(prices.map((_, i) => parseFloat(sizes[(prices.length - 1 - i) % sizes.length]!)));
    expect(Object.keys(got[0]!)).toEqual(['market_id', 'outcome', 'i', 'price', 'volume']);
    expect(got.every((r) => r.market_id === q.params.tok && r.outcome === 1)).toBe(true);
  });

  it('an empty result is []; constants are JSON-escaped', async () => {
    const none = await runJsonArray(db, { sql: `SELECT 'x' AS a, 1 AS b WHERE false`, params: {} }, { constants: [['a', 'x']] });
    expect(none).toEqual({ json: '[]', rows: 0 });
    const two = await runJsonArray(db, { sql: `SELECT 'x' AS a, range AS b FROM range(2)`, params: {} }, { constants: [['a', 'q"uo\\te']] });
    expect(JSON.parse(two.json)).toEqual([
      { a: 'q"uo\\te', b: 0 },
      { a: 'q"uo\\te', b: 1 },
    ]);
  });
});

describe('partitionSource', () => {
  let db: DuckDBInstance;
  let lakeDir: string;
  beforeAll(async () => {
    lakeDir = fs.mkdtempSync(path.join(os.tmpdir(), 'pmlake-parts-'));
    db = await DuckDBInstance.create(':memory:', { threads: '2' });
    const conn = await db.connect();
    for (const [day, n] of [
      ['2025-09-14', 2],
      ['2025-09-16', 3],
    ] as const) {
      const dir = partitionDir(lakeDir, 'top_of_book', day);
      fs.mkdirSync(dir, { recursive: true });
      await conn.run(`COPY (SELECT range AS seq, 'a' AS asset_id FROM range(${n})) TO '${path.join(dir, 'data.parquet')}' (FORMAT parquet)`);
    }
    conn.closeSync();
  });
  afterAll(() => {
    db.closeSync();
    fs.rmSync(lakeDir, { recursive: true, force: true });
  });

  it('reads only the named partitions that exist, with the Hive column; none is an empty relation', async () => {
    const count = async (src: string): Promise<unknown> =>
      runQuery(db, { sql: `SELECT count(*) AS n, string_agg(DISTINCT date, ',' ORDER BY date) AS days FROM ${src}`, params: {} });
    expect(await count(new LakeSession(db, lakeDir).partition('top_of_book', ['2025-09-16', '2025-09-15', '2025-09-14', '2025-09-16']))).toEqual([
      { n: 5, days: '2025-09-14,2025-09-16' },
    ]);
    expect(await count(new LakeSession(db, lakeDir).partition('top_of_book', ['2025-09-16']))).toEqual([{ n: 3, days: '2025-09-16' }]);
    expect(await count(new LakeSession(db, lakeDir).partition('top_of_book', ['2025-09-15']))).toEqual([{ n: 0, days: null }]);
    // Only partition names this code computes are looked up; anything else names no file.
    expect(await count(new LakeSession(db, lakeDir).partition('top_of_book', ['../2025-09-16', "2025-09-16' OR 1=1"]))).toEqual([{ n: 0, days: null }]);
  });
});
