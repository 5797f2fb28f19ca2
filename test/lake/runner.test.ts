import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DuckDBInstance } from '@duckdb/node-api';
import { runCount, runOne, startCopy } from '../../src/lake/runner.js';
import { LakeSession } from '../../src/lake/session.js';
import { startCopy as streamStartCopy } from '../../src/lake/stream.js';
import { currentVersion } from '../../src/lake/versions.js';
import { rowCountQuery } from '../../src/query/stats.js';
import { buildAccountsLake } from '../helpers/accounts-lake.js';

/**
 * The runner's ways that had no test of their own: a count, bytes per row of a lake from before versions (rows
 * read from the footers), the one hasFiles (the version's: a temp file an interrupted old-style ingest left is
 * not a file of the lake), and the stream side being stream.ts's own.
 */
describe('lake runner', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pmlake-runner-'));
  const lakeDir = path.join(dir, 'lake');
  let db: DuckDBInstance;
  const session = (lake: string): LakeSession => new LakeSession(db, lake);
  beforeAll(async () => {
    await buildAccountsLake(lakeDir, { trades: 500, books: 40 });
    db = await DuckDBInstance.create(':memory:', { threads: '2' });
  });
  afterAll(() => {
    db?.closeSync();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('runCount: the first cell as a number, 0 without a row', async () => {
    expect(await runCount(db, rowCountQuery(session(lakeDir).sources, 'trades'))).toBe(500);
    expect(await runCount(db, rowCountQuery(session(lakeDir).sources, 'top_of_book'))).toBe(0);
    expect(await runCount(db, { sql: 'SELECT 1 WHERE false', params: {} })).toBe(0);
    expect(await runCount(db, { sql: 'SELECT NULL::BIGINT', params: {} })).toBe(0);
  });

  it('bytes per row of an unversioned lake: file bytes over the rows in the footers', async () => {
    const file = path.join(lakeDir, 'trades', 'month=2025-01', 'part-0.parquet');
    expect(await session(lakeDir).bytesPerRow('trades')).toBe(fs.statSync(file).size / 500);
    expect(await session(lakeDir).bytesPerRow('top_of_book')).toBe(0);
  });

  it('hasFiles is the version’s: only *.parquet of a lake from before versions, nothing for an absent set', async () => {
    const other = path.join(dir, 'other');
    const part = path.join(other, 'top_of_book', 'date=2025-01-01');
    fs.mkdirSync(part, { recursive: true });
    // What the old ingest wrote before its rename: not a Parquet name, not a file of the lake.
    fs.writeFileSync(path.join(part, '.data.parquet.tmp-123'), 'partial');
    expect(session(other).hasFiles('top_of_book')).toBe(false);
    expect(currentVersion(other).hasFiles('top_of_book')).toBe(false);
    expect(await runOne(db, rowCountQuery(session(other).sources, 'top_of_book'))).toEqual({ n: 0 });
    expect(session(lakeDir).hasFiles('trades')).toBe(true);
    expect(session(lakeDir).hasFiles('l2')).toBe(false);
  });

  it('the stream side is stream.ts’s startCopy', () => {
    expect(startCopy).toBe(streamStartCopy);
  });
});
