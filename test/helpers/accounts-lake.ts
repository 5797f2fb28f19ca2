import fs from 'node:fs';
import path from 'node:path';
import { DuckDBInstance } from '@duckdb/node-api';
import { columnDdl, DATASETS, type DatasetName } from '../../src/lake/layout.js';

/**
 * A tiny lake for the accounts tests: two markets of one series, N trades on the first market's YES token,
 * M order-book snapshots on the same token. Row counts are returned so tests can price independently.
 */
export const TOKEN_A = '1'.repeat(72);
export const TOKEN_B = '2'.repeat(72);
export const TOKEN_C = '3'.repeat(72);
export const TOKEN_D = '4'.repeat(72);

export async function buildAccountsLake(lakeDir: string, opts: { trades: number; books: number }): Promise<void> {
  const db = await DuckDBInstance.create(':memory:');
  const conn = await db.connect();
  const write = async (name: DatasetName, rel: string, select: string) => {
    const file = path.join(lakeDir, DATASETS[name].dir, rel);
    fs.mkdirSync(path.dirname(file), { recursive: true });
    await conn.run(`CREATE OR REPLACE TABLE t (${columnDdl(name)})`);
    await conn.run(`INSERT INTO t BY NAME ${select}`);
    await conn.run(`COPY t TO '${file}' (FORMAT parquet)`);
  };
  try {
    await write(
      'markets',
      'data.parquet',
      `SELECT * FROM (VALUES
        ('1001', '0xaaa', 'Will A happen?', ['Yes','No'], ['${TOKEN_A}','${TOKEN_B}'], 's1'),
        ('1002', '0xbbb', 'Will B happen?', ['Yes','No'], ['${TOKEN_C}','${TOKEN_D}'], 's1')
      ) v(id, condition_id, question, outcomes, outcome_token_ids, series_id)`,
    );
    // Trades: one a minute from 2025-01-01 on the YES token of market 1001.
    await write(
      'trades',
      'month=2025-01/part-0.parquet',
      `SELECT 'tr' || i AS id, '${TOKEN_A}' AS token_id, TIMESTAMP '2025-01-01' + INTERVAL (i) MINUTE AS ts, i AS log_index,
         0.5::DECIMAL(10,6) AS price, 10::DECIMAL(18,6) AS size, 'buy' AS side
       FROM range(${opts.trades}) r(i)`,
    );
    await write(
      'book_snapshots',
      'date=2025-01-01/part-0.parquet',
      `SELECT TIMESTAMP '2025-01-01' + INTERVAL (i) SECOND AS ts, '0xaaa' AS condition_id, '${TOKEN_A}' AS asset_id, 'periodic' AS reason, i AS seq
       FROM range(${opts.books}) r(i)`,
    );
  } finally {
    conn.closeSync();
    db.closeSync();
  }
}
