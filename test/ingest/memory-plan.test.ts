import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DuckDBInstance, type DuckDBConnection } from '@duckdb/node-api';
import { jsonObjectLimit, planIngestMemory, releaseEmptyStaging, stagedTableBytes } from '../../ingest/memory.js';
import { ConfigError, loadConfig } from '../../src/config.js';
import { tempDir } from '../helpers/server.js';

/** The memory budget's shares, its variable, and the release of emptied staging tables in a real DuckDB. */

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
});
