import type { DuckDBConnection } from '@duckdb/node-api';
import { DuckDBTimestampValue } from '@duckdb/node-api';
import { sqlString } from '../src/lake/duckdb.js';
import { DATASETS } from '../src/lake/layout.js';
import { writeParquetFile } from './partitions.js';
import type { VersionDraft } from './versions.js';

/**
 * `raw_by_market` (src/lake/layout.ts): the raw frames again, one row per frame and market, sorted by market.
 *
 * The market replay (src/replay/raw-runs.ts) reads a day from it whenever the day's partition exists, so that
 * partition must hold every frame with a market that the day's raw files hold — never a part of them. Ingest
 * keeps that true: a batch indexes its own frames, and a day whose raw files exist without an index (a lake
 * from before the index, or written by an older pmlake) gets the stored frames indexed too, the first time a
 * batch touches it. `pmlake compact` indexes the days no batch touches again (indexMissingDays).
 */

/** The index rows of a relation with raw's columns: one per distinct non-NULL market of each frame. */
function indexRows(source: string): string {
  return `SELECT cid AS condition_id, recv_ts, seq, event_types, condition_ids, frame
  FROM (SELECT unnest(list_distinct(list_filter(condition_ids, c -> c IS NOT NULL))) AS cid, recv_ts, seq, event_types, condition_ids, frame FROM ${source})`;
}

function dayBounds(day: string): { lo: DuckDBTimestampValue; hi: DuckDBTimestampValue } {
  const lo = BigInt(Date.parse(`${day}T00:00:00Z`)) * 1000n;
  return { lo: new DuckDBTimestampValue(lo), hi: new DuckDBTimestampValue(lo + 86_400_000_000n) };
}

/**
 * Fills `stg_raw_by_market` from the staged raw frames, and from the stored frames of every day the batch
 * touches whose raw files have no index yet. Returns the number of such days.
 */
export async function stageRawIndex(conn: DuckDBConnection, draft: VersionDraft): Promise<number> {
  await conn.run(`INSERT INTO stg_raw_by_market ${indexRows('stg_raw')}`);
  const days = (await conn.runAndReadAll(`SELECT DISTINCT strftime(recv_ts, '%Y-%m-%d') FROM stg_raw`)).getRows().map((r) => String(r[0]));
  let backfilled = 0;
  for (const day of days.sort()) {
    const stored = draft.partitionFiles('raw', [day]);
    if (stored.length === 0 || draft.partitionFiles('raw_by_market', [day]).length > 0) continue;
    // The lake's own file names (its manifest), never request text: a table function's file list is literal.
    const scan = `(SELECT * FROM read_parquet([${stored.map(sqlString).join(', ')}]) WHERE recv_ts >= $lo AND recv_ts < $hi)`;
    await conn.run(`INSERT INTO stg_raw_by_market ${indexRows(scan)}`, dayBounds(day));
    backfilled += 1;
  }
  return backfilled;
}

/**
 * Every raw day without an index gets one: its stored frames written as one sorted file into `draft`. Raw never
 * holds a natural key twice (appends de-duplicate, compaction too), so neither does the index: no check needed.
 * Returns the days indexed and the rows written.
 */
export async function indexMissingDays(conn: DuckDBConnection, draft: VersionDraft): Promise<{ days: number; rows: number }> {
  const def = DATASETS.raw_by_market;
  const indexed = new Set(draft.partitionValues('raw_by_market'));
  let days = 0;
  let rows = 0;
  for (const day of draft.partitionValues('raw')) {
    if (indexed.has(day)) continue;
    const stored = draft.partitionFiles('raw', [day]);
    const scan = `(SELECT * FROM read_parquet([${stored.map(sqlString).join(', ')}]) WHERE recv_ts >= $lo AND recv_ts < $hi)`;
    const file = draft.newFile('raw_by_market', day);
    const n = await writeParquetFile(conn, `${indexRows(scan)} ORDER BY ${def.sortBy.join(', ')}`, file, dayBounds(day), def.rowGroupSize);
    // A day of frames none of which names a market: an empty file still marks the day as indexed.
    draft.add('raw_by_market', day, file, n);
    days += 1;
    rows += n;
  }
  return { days, rows };
}
