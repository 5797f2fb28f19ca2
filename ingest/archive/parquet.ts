import fs from 'node:fs';
import type { DuckDBConnection } from '@duckdb/node-api';
import type { InputSurvey } from '../types.js';

/** The archive's own file names: `polymarket_orderbook_YYYY-MM-DDTHH.parquet`. */
export const ARCHIVE_NAME = /(^|[/\\])polymarket_orderbook_\d{4}-\d{2}-\d{2}T\d{2}\.parquet$/i;

const MAGIC = 'PAR1';
/** A footer larger than this is not read for detection (the archive's is a few hundred kB at most). */
const MAX_FOOTER = 64 << 20;

/**
 * The Parquet footer's bytes (Thrift metadata, where column names are plain strings), or null when the file
 * is no Parquet file: it starts and ends with `PAR1`, the footer's length in the four bytes before the end.
 */
export function parquetFooter(file: string): Buffer | null {
  const fd = fs.openSync(file, 'r');
  try {
    const size = fs.fstatSync(fd).size;
    if (size < 12) return null;
    const tail = Buffer.alloc(8);
    fs.readSync(fd, tail, 0, 8, size - 8);
    if (tail.subarray(4).toString('latin1') !== MAGIC) return null;
    const len = tail.readUInt32LE(0);
    if (len <= 0 || len > MAX_FOOTER || len > size - 12) return null;
    const footer = Buffer.alloc(len);
    fs.readSync(fd, footer, 0, len, size - 8 - len);
    return footer;
  } finally {
    fs.closeSync(fd);
  }
}

/** Columns whose names, together, say a Parquet file holds the archive's market channel rows. */
const SIGNATURE = ['timestamp_received', 'event_type', 'asset_id', 'market', 'best_bid', 'new_tick_size'];

/** An archive file: its name, or any Parquet file whose footer names the v2 columns. */
export function isArchiveFile(file: string, head: string): boolean {
  if (!head.startsWith(MAGIC)) return false;
  if (ARCHIVE_NAME.test(file)) return true;
  const footer = parquetFooter(file);
  return footer !== null && SIGNATURE.every((c) => footer.includes(c, 0, 'latin1'));
}

/**
 * Rows and time span from the footer alone: the row count of every row group, and the min/max statistics of
 * timestamp_received (exact: pyarrow and DuckDB both write them). Without statistics the span is unknown.
 */
export async function surveyArchive(conn: DuckDBConnection, file: string): Promise<InputSurvey> {
  const rows = (await conn.runAndReadAll(`SELECT sum(num_rows) FROM parquet_file_metadata($f)`, { f: file })).getRows()[0]?.[0];
  const span = (
    await conn.runAndReadAll(
      // A naive timestamp (isAdjustedToUTC false) is UTC already; one with an offset is brought to UTC.
      `SELECT strftime(min(coalesce(TRY_CAST(stats_min_value AS TIMESTAMP), TRY_CAST(stats_min_value AS TIMESTAMPTZ) AT TIME ZONE 'UTC')), '%Y-%m-%dT%H:%M:%S.%gZ'),
              strftime(max(coalesce(TRY_CAST(stats_max_value AS TIMESTAMP), TRY_CAST(stats_max_value AS TIMESTAMPTZ) AT TIME ZONE 'UTC')), '%Y-%m-%dT%H:%M:%S.%gZ')
       FROM parquet_metadata($f) WHERE path_in_schema = 'timestamp_received'`,
      { f: file },
    )
  ).getRows()[0];
  const text = (v: unknown): string | null => (v === null || v === undefined ? null : String(v));
  return { from: text(span?.[0]), to: text(span?.[1]), rows: rows === null || rows === undefined ? null : Number(rows), estimated: false };
}
