import fs from 'node:fs';
import path from 'node:path';
import type { DuckDBConnection, DuckDBInstance } from '@duckdb/node-api';
import { openLakeDb } from '../src/lake/duckdb.js';
import { ingestDir } from './ledger.js';

/**
 * An ingest's scratch space: staging database, DuckDB's spill files, split chunks, book replay output. It
 * lives under the lake's own `_ingest/tmp/`, not the system temp directory: a killed ingest (kill -9 skips
 * every `finally`) left hundreds of MB in TMPDIR that nothing ever removed. Here the next ingest, once it
 * holds the lake lock (and so knows no other ingest is running), removes whatever a previous one left.
 * It is on the lake's file system too, so its size is the lake operator's to see and plan for.
 */
export function scratchRoot(lakeDir: string): string {
  return path.join(ingestDir(lakeDir), 'tmp');
}

/** A fresh directory under the scratch root, e.g. `books-AbC123`. */
export function makeScratchDir(lakeDir: string, prefix: string): string {
  const root = scratchRoot(lakeDir);
  fs.mkdirSync(root, { recursive: true });
  return fs.mkdtempSync(path.join(root, `${prefix}-`));
}

/**
 * Removes everything a previous ingest left under the scratch root; returns the bytes freed. Only call it
 * while holding the lake lock.
 */
export function sweepScratch(lakeDir: string): number {
  const root = scratchRoot(lakeDir);
  if (!fs.existsSync(root)) return 0;
  let bytes = 0;
  for (const name of fs.readdirSync(root)) {
    const full = path.join(root, name);
    bytes += treeBytes(full);
    fs.rmSync(full, { recursive: true, force: true });
  }
  return bytes;
}

function treeBytes(p: string): number {
  const st = fs.lstatSync(p, { throwIfNoEntry: false });
  if (!st) return 0;
  if (!st.isDirectory()) return st.size;
  let sum = 0;
  for (const name of fs.readdirSync(p)) sum += treeBytes(path.join(p, name));
  return sum;
}

/**
 * The DuckDB of an ingest or a compaction. Its database is in memory and spills to the scratch directory
 * (so a kill leaves nothing the next run does not sweep): the staging tables every connection must see
 * (ingest/run.ts merges some data sets on a second connection while the book replay runs on the first) are
 * plain tables, which in a file-backed database would be compressed and checkpointed into the file for
 * nothing. Insertion order is preserved: WITH ORDINALITY follows file order, and a single file read back
 * keeps its order.
 */
export async function openScratchDb(
  lakeDir: string,
  workDir: string,
  opts: { threads?: number; memoryLimit?: string | undefined; readDirs?: readonly string[] },
): Promise<{ instance: DuckDBInstance; conn: DuckDBConnection }> {
  const instance = await openLakeDb({
    allowedDirectories: [lakeDir, workDir, ...(opts.readDirs ?? [])],
    threads: opts.threads ?? 2,
    memoryLimit: opts.memoryLimit,
    tempDirectory: path.join(workDir, 'spill'),
    lock: false,
  });
  const conn = await scratchConnection(instance);
  return { instance, conn };
}

/** A connection to the scratch database with the settings every statement of an ingest assumes. */
export async function scratchConnection(instance: DuckDBInstance): Promise<DuckDBConnection> {
  const conn = await instance.connect();
  await conn.run('SET preserve_insertion_order = true');
  return conn;
}
