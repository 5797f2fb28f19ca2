import fs from 'node:fs';
import path from 'node:path';
import { DuckDBInstance, timestampValue, type DuckDBValue } from '@duckdb/node-api';
import type { DatasetName } from '../../src/lake/layout.js';
import { sqlString } from '../../src/lake/duckdb.js';
import { currentFiles } from '../../src/lake/versions.js';
import { peakTracker } from '../proc.js';
import type { Sample } from '../runner.js';

/**
 * Baseline helpers: plain DuckDB (a fresh in-memory instance, 2 threads, the server's 4 GB memory limit) over
 * the same Parquet files, written the way a competent DuckDB user would query the lake directly.
 */

export async function freshDuckDb(): Promise<DuckDBInstance> {
  return DuckDBInstance.create(':memory:', { threads: '2', memory_limit: '4GB' });
}

/** A SQL list literal of file paths, for `read_parquet([...])`. */
export function fileList(files: readonly string[]): string {
  return `[${files.map(sqlString).join(', ')}]`;
}

/**
 * `read_parquet` over a data set's files with its Hive partition column, as a user would open the lake: the
 * current version's file list (`_versions/current.json`, src/lake/versions.ts), which on a lake written before
 * versions is every Parquet file of its partition directories. A partition may hold several files.
 */
export function src(lakeDir: string, name: DatasetName): string {
  const files = currentFiles(lakeDir, name);
  if (files.length === 0) throw new Error(`the lake's current version has no ${name} files`);
  return `read_parquet(${fileList(files)}, hive_partitioning = true)`;
}

export function ts(iso: string): DuckDBValue {
  return timestampValue(BigInt(Date.parse(iso)) * 1000n);
}

/** Runs a SELECT and materialises every row in JS (as the server must, to answer JSON). */
export async function baselineQuery(db: DuckDBInstance, sql: string, params: Record<string, DuckDBValue> = {}): Promise<Sample> {
  const conn = await db.connect();
  try {
    const peak = peakTracker('self');
    const t0 = process.hrtime.bigint();
    const reader = await conn.runAndReadAll(sql, params);
    const rows = reader.getRows().length;
    const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
    return { seconds, rows, peakRss: peak.stop() };
  } finally {
    conn.closeSync();
  }
}

/** DuckDB `COPY (sql) TO file`: rows, bytes and time of writing a local file. The file is removed after. */
export async function baselineCopy(db: DuckDBInstance, sql: string, params: Record<string, DuckDBValue>, file: string, options: string): Promise<Sample> {
  fs.mkdirSync(path.dirname(file), { recursive: true });
  const conn = await db.connect();
  try {
    const peak = peakTracker('self');
    const t0 = process.hrtime.bigint();
    const res = await conn.run(`COPY (${sql}) TO ${sqlString(file)} (${options})`, params);
    const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
    return { seconds, rows: Number(res.rowsChanged), bytes: fs.statSync(file).size, peakRss: peak.stop() };
  } finally {
    conn.closeSync();
    fs.rmSync(file, { force: true });
  }
}

/** Runs `fn` with a fresh baseline instance and closes it. */
export async function withBaselineDb<T>(fn: (db: DuckDBInstance) => Promise<T>): Promise<T> {
  const db = await freshDuckDb();
  try {
    return await fn(db);
  } finally {
    db.closeSync();
  }
}

export function addDays(iso: string, days: number): string {
  return new Date(Date.parse(iso) + days * 86_400_000).toISOString();
}

/** Floors an ISO instant to its UTC day. */
export function dayStart(iso: string): string {
  return `${iso.slice(0, 10)}T00:00:00.000Z`;
}

export function fmtIso(ms: number): string {
  return new Date(ms).toISOString();
}
