import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { DuckDBInstance } from '@duckdb/node-api';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sqlString } from '../../src/lake/duckdb.js';
import { runOne, runQuery } from '../../src/lake/runner.js';
import { activeCopies, startCopy } from '../../src/lake/stream.js';
import type { RunningServer } from '../../src/server.js';
import { startTestServer, tempDir, testConfig } from '../helpers/server.js';

/**
 * The service's DuckDB (src/compose.ts) may read the lake and write its private FIFO folder, nothing else:
 * not the state directory (the accounts database, the link secret, the local export store), not the rest of
 * the temp directory. Each refusal is checked against the same file in the lake, which reads fine, so the
 * refusal is the lockdown and not a missing or broken file.
 */
let tmp: ReturnType<typeof tempDir>;
let srv: RunningServer;
let lakeDir: string;
let stateDir: string;
let outside: string;

const count = async (fn: string, file: string) =>
  Number((await runOne(srv.ctx.db, { sql: `SELECT count(*) AS n FROM ${fn}(${sqlString(file)})`, params: {} }))!.n);

beforeAll(async () => {
  tmp = tempDir('pmlake-lockdown-');
  lakeDir = path.join(tmp.dir, 'lake');
  // A sibling whose name starts with the lake's: an allow-list matched on string prefixes would let it through.
  stateDir = path.join(tmp.dir, 'lake-state');
  srv = await startTestServer(testConfig({ PMLAKE_LAKE: lakeDir, PMLAKE_STATE: stateDir }));
  outside = fs.mkdtempSync(path.join(os.tmpdir(), 'pmlake-lockdown-outside-'));
  // Files written by an unrestricted DuckDB: the same Parquet and CSV in the lake, the state dir and elsewhere in TMPDIR.
  const free = await DuckDBInstance.create(':memory:');
  const conn = await free.connect();
  for (const dir of [lakeDir, stateDir, outside]) {
    await conn.run(`COPY (SELECT range AS x FROM range(3)) TO ${sqlString(path.join(dir, 'probe.parquet'))} (FORMAT parquet)`);
    await conn.run(`COPY (SELECT range AS x FROM range(3)) TO ${sqlString(path.join(dir, 'probe.csv'))} (FORMAT csv)`);
  }
  conn.closeSync();
  free.closeSync();
});
afterAll(async () => {
  await srv?.close();
  if (outside) fs.rmSync(outside, { recursive: true, force: true });
  tmp?.cleanup();
});

describe("the service's DuckDB lockdown", () => {
  it('reads Parquet and CSV in the lake', async () => {
    expect(await count('read_parquet', path.join(lakeDir, 'probe.parquet'))).toBe(3);
    expect(await count('read_csv', path.join(lakeDir, 'probe.csv'))).toBe(3);
  });

  it('refuses read_parquet / read_csv of files in the state directory, the accounts database included', async () => {
    expect(fs.existsSync(path.join(stateDir, 'pmlake.sqlite'))).toBe(true);
    for (const [fn, file] of [
      ['read_parquet', path.join(stateDir, 'probe.parquet')],
      ['read_csv', path.join(stateDir, 'probe.csv')],
      ['read_csv', path.join(stateDir, 'pmlake.sqlite')],
      ['read_blob', path.join(stateDir, 'pmlake.sqlite')],
      ['read_text', path.join(stateDir, 'export-link-secret')],
      // A path that walks out of the lake is judged by where it ends.
      ['read_csv', path.join(lakeDir, '..', 'lake-state', 'probe.csv')],
    ] as const) {
      await expect(count(fn, file), `${fn} ${file}`).rejects.toThrow(/Permission Error/);
    }
  });

  it('refuses the rest of the temp directory, and writing anywhere but its FIFO folder', async () => {
    await expect(count('read_parquet', path.join(outside, 'probe.parquet'))).rejects.toThrow(/Permission Error/);
    await expect(count('read_csv', path.join(outside, 'probe.csv'))).rejects.toThrow(/Permission Error/);
    for (const dir of [stateDir, outside]) {
      const target = path.join(dir, 'written.csv');
      await expect(runQuery(srv.ctx.db, { sql: `COPY (SELECT 1 AS x) TO ${sqlString(target)} (FORMAT csv)`, params: {} })).rejects.toThrow(/Permission Error/);
      expect(fs.existsSync(target)).toBe(false);
    }
    // The locked configuration cannot be loosened by a later statement.
    await expect(runQuery(srv.ctx.db, { sql: `SET allowed_directories = [${sqlString(stateDir)}]`, params: {} })).rejects.toThrow();
    await expect(runQuery(srv.ctx.db, { sql: 'SET enable_external_access = true', params: {} })).rejects.toThrow();
  });

  it('still COPYs into its FIFO folder (downloads and exports work)', async () => {
    const copy = await startCopy(srv.ctx.db, { sql: 'SELECT range AS x FROM range(5)', params: {} }, 'csv');
    const chunks: Buffer[] = [];
    copy.stream.on('data', (c: Buffer) => chunks.push(Buffer.from(c)));
    expect((await copy.done).rows).toBe(5);
    expect(Buffer.concat(chunks).toString()).toBe('x\n0\n1\n2\n3\n4\n');
    expect(activeCopies()).toBe(0);
  });
});
