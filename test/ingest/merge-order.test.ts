import path from 'node:path';
import { DuckDBInstance } from '@duckdb/node-api';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runIngest } from '../../ingest/run.js';
import { DATASETS, type DatasetName } from '../../src/lake/layout.js';
import { currentVersion } from '../../src/lake/versions.js';
import { tempDir } from './oracle.js';

/**
 * Every data file the tape lands is in its data set's sort order (src/lake/layout.ts `sortBy`), whether the merge
 * sorted the staged rows or found them staged in that order already (raw, and the book replay's snapshots and
 * top of book). Checked row by row over each file's own row numbers with plain DuckDB.
 */
const FIX = path.resolve('test/fixtures/venue');
const tmp = tempDir('pmlake-order-');
let db: DuckDBInstance;
beforeAll(async () => {
  db = await DuckDBInstance.create(':memory:', { threads: '1' });
});
afterAll(() => {
  db?.closeSync();
  tmp.cleanup();
});

const SETS: DatasetName[] = ['raw', 'l2', 'last_trades', 'book_snapshots', 'top_of_book', 'checkpoints'];

describe('merged files keep their sort order', () => {
  it('raw, l2, last trades, book snapshots, top of book and checkpoints of two batches: each file sorted', async () => {
    const lake = path.join(tmp.dir, 'lake');
    // Two batches: the second lands in raw and last_trades partitions the first wrote (the merge's other path).
    await runIngest([path.join(FIX, 'ws', '2025-02-27_initial_books.json'), path.join(FIX, 'ws', '2025-03-02_last_trade_price_wrapped.json')], {
      lakeDir: lake,
    });
    await runIngest([path.join(FIX, 'ws', '2025-03-02_book_price_change_v1.json'), path.join(FIX, 'ws', '2026-08-14_frames_price_change_v2.jsonl')], {
      lakeDir: lake,
    });
    const v = currentVersion(lake);
    const conn = await db.connect();
    try {
      for (const d of SETS) {
        const files = v.files(d);
        expect(files.length, d).toBeGreaterThan(0);
        const key = `row(${DATASETS[d].sortBy.map((c) => `"${c}"`).join(', ')})`;
        for (const f of files) {
          const r = await conn.runAndReadAll(
            `SELECT count(*) AS rows, count(*) FILTER (WHERE NOT (k >= pk)) AS out_of_order
             FROM (SELECT ${key} AS k, lag(${key}) OVER (ORDER BY file_row_number) AS pk FROM read_parquet($f, file_row_number = true))`,
            { f },
          );
          const [rows, outOfOrder] = r.getRows()[0]!.map(Number);
          expect(rows, `${d} ${f}`).toBeGreaterThan(0);
          expect(outOfOrder, `${d} ${f}`).toBe(0);
        }
      }
    } finally {
      conn.closeSync();
    }
  });
});
