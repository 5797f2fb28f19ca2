import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DuckDBInstance, type DuckDBConnection } from '@duckdb/node-api';
import { jsonObjectLimit, planIngestMemory, releaseEmptyStaging, stagedTableBytes } from '../../ingest/memory.js';
import { ConfigError, loadConfig } from '../../src/config.js';
import { runIngest } from '../../ingest/run.js';
import { currentFiles } from '../../src/lake/versions.js';
import { tempDir } from '../helpers/server.js';

/**
 * The memory budget's shares, its variable, the release of emptied staging tables in a real DuckDB, and a fills
 * file staged in chunks.
 */

const GiB = 2 ** 30;
const MiB = 2 ** 20;
const tmp = tempDir('pmlake-memory-plan-');
let db: DuckDBInstance;
let conn: DuckDBConnection;

beforeAll(async () => {
  db = await DuckDBInstance.create(':memory:', { threads: '1' });
  conn = await db.connect();
});

afterAll(() => {
  conn?.closeSync();
  db?.closeSync();
  tmp.cleanup();
});

describe('ingest memory plan', () => {
  it('shares a budget: DuckDB below it, staging below DuckDB, chunks a fraction of staging', () => {
    for (const budget of [512 * MiB, GiB, 4 * GiB, 32 * GiB]) {
      const p = planIngestMemory(budget);
      expect(p.duckdbLimit).toBeLessThan(budget * 0.6);
      expect(p.stagedBytes).toBeLessThan(p.duckdbLimit);
      expect(p.tapeChunkBytes).toBeLessThanOrEqual(Math.max(4 * MiB, p.stagedBytes / 4));
      expect(p.tapeChunkBytes).toBeLessThanOrEqual(128 * MiB);
    }
    // An explicit DuckDB limit below the budget's share wins; one above it does not.
    expect(planIngestMemory(4 * GiB, '1GB').duckdbLimit).toBe(1e9);
    expect(planIngestMemory(4 * GiB, '12GB').duckdbLimit).toBe(planIngestMemory(4 * GiB).duckdbLimit);
  });

  it('reads PMLAKE_INGEST_MEMORY in either unit, refuses what is not a size or too small', () => {
    expect(loadConfig({}).ingestMemory).toBe(4 * GiB);
    expect(loadConfig({ PMLAKE_INGEST_MEMORY: '6GiB' }).ingestMemory).toBe(6 * GiB);
    expect(loadConfig({ PMLAKE_INGEST_MEMORY: '1.5GB' }).ingestMemory).toBe(1.5e9);
    expect(() => loadConfig({ PMLAKE_INGEST_MEMORY: 'lots' })).toThrow(ConfigError);
    expect(() => loadConfig({ PMLAKE_INGEST_MEMORY: '100MB' })).toThrow(/PMLAKE_INGEST_MEMORY/);
  });

  it('reserves for a JSON file no more than the file can hold', () => {
    const small = path.join(tmp.dir, 'small.jsonl');
    fs.writeFileSync(small, '{"a":1}\n');
    expect(jsonObjectLimit(small, 256 * MiB)).toBe(MiB);
    const big = path.join(tmp.dir, 'big.jsonl');
    fs.writeFileSync(big, Buffer.alloc(3 * MiB, 0x20));
    expect(jsonObjectLimit(big, 256 * MiB)).toBe(3 * MiB + 1);
    expect(jsonObjectLimit(big, 2 * MiB)).toBe(2 * MiB);
  });

  it('gives back the memory of emptied staging tables, keeps their kind and columns, leaves the others', async () => {
    await conn.run('CREATE TEMP TABLE stg_a (id BIGINT NOT NULL, s VARCHAR)');
    await conn.run('CREATE TABLE stg_b (id BIGINT)');
    await conn.run('CREATE TEMP TABLE other (id BIGINT)');
    await conn.run(`INSERT INTO stg_a SELECT i, repeat('x', 40) || i FROM range(2000000) r(i)`);
    await conn.run('INSERT INTO stg_b SELECT i FROM range(1000) r(i)');
    const full = await stagedTableBytes(conn);
    expect(full).toBeGreaterThan(50 * MiB);
    await conn.run('DELETE FROM stg_a');
    // DuckDB keeps the rows' memory after a DELETE: this is what the release is for.
    expect(await stagedTableBytes(conn)).toBeGreaterThan(full * 0.9);
    await releaseEmptyStaging(conn);
    expect(await stagedTableBytes(conn)).toBeLessThan(full / 10);
    const tables = (await conn.runAndReadAll(`SELECT table_name, temporary, sql FROM duckdb_tables() ORDER BY 1`)).getRowObjectsJS();
    expect(tables.map((t) => [t.table_name, t.temporary])).toEqual([
      ['other', true],
      ['stg_a', true],
      ['stg_b', false],
    ]);
    expect(String(tables[1]!.sql)).toContain('NOT NULL');
    expect(Number((await conn.runAndReadAll('SELECT count(*) FROM stg_b')).getRows()[0]![0])).toBe(1000);
    await conn.run(`INSERT INTO stg_a VALUES (1, 'again')`);
    expect(Number((await conn.runAndReadAll('SELECT count(*) FROM stg_a')).getRows()[0]![0])).toBe(1);
  });

  it('stages a fills file in chunks with batches cut between them: every fill lands once, a bad line is named by its place in the file', async () => {
    // Distinct fills: the fixture's first fill with its log index 1…n (the trade id is transaction-log index).
    const first = fs.readFileSync(path.resolve('test/fixtures/fills/order_filled_synthetic.jsonl'), 'utf8').split('\n')[0]!;
    const n = 3000;
    const bad = 2345;
    const lines = Array.from({ length: n }, (_, i) =>
      i + 1 === bad ? '{"event":"OrderFilled", oops' : first.replace('"log_index":1,', `"log_index":${i + 1},`),
    );
    const file = path.join(tmp.dir, 'fills-big.jsonl');
    fs.writeFileSync(file, `${lines.join('\n')}\n`);
    const lake = path.join(tmp.dir, 'lake-fills');
    process.env.PMLAKE_TAPE_CHUNK_BYTES = String(100_000);
    try {
      const r = await runIngest([file], { lakeDir: lake, batchRows: 500, derived: false, compactSmallFiles: 0 });
      expect(r.batches).toBeGreaterThan(3);
      expect(r.issues).toEqual([expect.objectContaining({ file, line: bad })]);
    } finally {
      delete process.env.PMLAKE_TAPE_CHUNK_BYTES;
    }
    const list = `[${currentFiles(lake, 'trades')
      .map((f) => `'${f}'`)
      .join(', ')}]`;
    const got = (
      await conn.runAndReadAll(`SELECT count(*) AS n, count(DISTINCT log_index) AS d, min(log_index) AS lo, max(log_index) AS hi FROM read_parquet(${list})`)
    ).getRowObjectsJS()[0]!;
    expect([Number(got.n), Number(got.d), Number(got.lo), Number(got.hi)]).toEqual([n - 1, n - 1, 1, n]);
  });
});
