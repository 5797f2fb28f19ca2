import fs from 'node:fs';
import type { DuckDBConnection } from '@duckdb/node-api';
import { parseByteSize } from '../src/config.js';
import { sqlIdent } from '../src/lake/duckdb.js';

/**
 * What one ingest process may hold resident, and how that budget is shared (PMLAKE_INGEST_MEMORY). The bulk of
 * an ingest's memory is DuckDB's: the staging tables of the batch (the in-memory scratch database), then the
 * replay input and the sorts of the merges, all proportional to the rows staged. So a batch is written out once
 * its staged tables hold a share of the budget (bytes as DuckDB accounts them, not a row count: a row of raw
 * tape weighs a hundred of l2), DuckDB's memory_limit keeps what the derived steps add within another share
 * (beyond it they spill to the scratch directory), and the rest is left for what DuckDB does not account —
 * Node itself, the replay's JavaScript, the allocator's slack. Where a batch is cut changes no row of the lake:
 * books carry over batches from the stored snapshots and tails (ingest/books.ts), merges de-duplicate on
 * natural keys (ingest/partitions.ts).
 */

export const DEFAULT_INGEST_MEMORY = 4 * 2 ** 30;

/** The largest JSON element (a frame, a page, a record) the JSON formats accept. */
export const JSON_CAP = 256 * 2 ** 20;

/**
 * Node with its modules and the replay's JavaScript take about this much whatever the batch; of the rest DuckDB
 * gets a share, its allocations outside the buffer pool (and the allocator's slack) growing with it.
 */
const FIXED = 384 * 2 ** 20;
const DUCKDB_SHARE = 0.55;
const STAGED_SHARE = 0.2;
/** A JSON lines chunk stages several times its size (frames kept as text, messages, level rows, temporaries). */
const CHUNK_OF_STAGED = 1 / 8;
const MAX_CHUNK = 128 * 2 ** 20;
const MIN_CHUNK = 4 * 2 ** 20;

export type IngestMemoryPlan = {
  /** The process's budget, bytes. */
  budget: number;
  /** DuckDB's memory_limit, bytes: its share of the budget, never above an explicit PMLAKE_DUCKDB_MEMORY. */
  duckdbLimit: number;
  /** Write the batch out once its staging tables hold this many bytes. */
  stagedBytes: number;
  /** JSON lines files are staged in chunks of about this size, a flush possible between two. */
  tapeChunkBytes: number;
};

export function planIngestMemory(budget: number = DEFAULT_INGEST_MEMORY, duckdbMemory?: string): IngestMemoryPlan {
  const share = Math.max(64 * 2 ** 20, Math.floor((budget - FIXED) * DUCKDB_SHARE));
  const duckdbLimit = duckdbMemory === undefined ? share : Math.min(share, parseByteSize(duckdbMemory));
  const stagedBytes = Math.floor(Math.min(budget * STAGED_SHARE, duckdbLimit * 0.6));
  const tapeChunkBytes = Math.max(MIN_CHUNK, Math.min(MAX_CHUNK, Math.floor(stagedBytes * CHUNK_OF_STAGED)));
  return { budget, duckdbLimit, stagedBytes, tapeChunkBytes };
}

/** memory_limit as DuckDB reads it (whole KiB). */
export function duckdbMemorySetting(bytes: number): string {
  return `${Math.max(1, Math.floor(bytes / 1024))}KiB`;
}

/**
 * Bytes the scratch database's tables hold — the staging tables between batches — in memory or spilled, as
 * DuckDB's buffer manager accounts them.
 */
export async function stagedTableBytes(conn: DuckDBConnection): Promise<number> {
  const r = await conn.runAndReadAll(
    `SELECT coalesce(sum(memory_usage_bytes + temporary_storage_bytes), 0) FROM duckdb_memory()
     WHERE tag IN ('IN_MEMORY_TABLE', 'OVERFLOW_STRINGS', 'BASE_TABLE')`,
  );
  return Number(r.getRows()[0]?.[0] ?? 0);
}

/**
 * Gives the memory of emptied staging tables back. DuckDB keeps a table's row groups after a DELETE of every
 * row (the space is reused by nothing but a drop), so staging emptied batch after batch would grow with the
 * whole run instead of one batch; each empty `stg_…` table is dropped and created again from its own DDL.
 */
export async function releaseEmptyStaging(conn: DuckDBConnection): Promise<void> {
  const tables = (
    await conn.runAndReadAll(
      `SELECT database_name, schema_name, table_name, sql FROM duckdb_tables()
       WHERE (temporary OR schema_name = 'main') AND table_name LIKE 'stg\\_%' ESCAPE '\\'`,
    )
  ).getRowObjectsJS();
  for (const t of tables) {
    const name = [t.database_name, t.schema_name, t.table_name].map((x) => sqlIdent(String(x))).join('.');
    const rows = Number((await conn.runAndReadAll(`SELECT count(*) FROM ${name}`)).getRows()[0]?.[0] ?? 0);
    if (rows > 0) continue;
    await conn.run(`DROP TABLE ${name}`);
    await conn.run(String(t.sql));
  }
}

/**
 * maximum_object_size for reading one JSON file: the format's own cap, or less when the file is smaller (no
 * element can outgrow its file). DuckDB reserves twice this per reading thread whatever the file holds, so the
 * format's cap (hundreds of MB) would take most of a small memory limit for a file of a few MB.
 */
export function jsonObjectLimit(file: string, cap: number): number {
  const size = fs.statSync(file, { throwIfNoEntry: false })?.size ?? cap;
  return Math.min(cap, Math.max(2 ** 20, size + 1));
}
