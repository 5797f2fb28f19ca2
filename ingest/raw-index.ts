import type { DuckDBConnection } from '@duckdb/node-api';
import { DuckDBTimestampValue } from '@duckdb/node-api';
import { sqlString } from '../src/lake/duckdb.js';
import { DATASETS } from '../src/lake/layout.js';
import { writeParquetFile } from './partitions.js';
import { VersionDraft } from './versions.js';

/**
 * `raw_by_market` (src/lake/layout.ts): the raw frames again, one row per frame and market, sorted by market.
 *
 * The market replay (src/replay/raw-runs.ts) reads a day from it whenever the day's partition exists, so that
 * partition must hold every frame with a market that the day's raw files hold — never a part of them. Ingest
 * keeps that true without ever re-reading stored frames (at the venue's scale a day of them is hundreds of
 * millions of rows): a batch indexes its frames of a day that is new to raw or already indexed, and leaves a day
 * whose stored raw has no index as it is (a lake from before the index). A batch may also defer the index of its
 * new days (`defer`: the public archive's bulk backfill, whose hourly batches would otherwise sort each hour's
 * frames a second time; compaction merges the hours anyway). The compaction an ingest runs indexes the raw days it
 * compacts, and `pmlake compact` every day left without one (indexMissingDays), in one sort per day.
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
 * Defines `stg_raw_by_market` as a view of the staged raw frames of the days the batch may index (above): the
 * merge reads it like a staging table, and the frames are not held twice. Returns how many of the batch's days
 * it indexes and how many it leaves without an index.
 */
export async function stageRawIndex(conn: DuckDBConnection, draft: VersionDraft, defer: boolean): Promise<{ indexed: number; left: number }> {
  const days = (await conn.runAndReadAll(`SELECT DISTINCT strftime(recv_ts, '%Y-%m-%d') FROM stg_raw`)).getRows().map((r) => String(r[0]));
  const indexed = days.filter((day) =>
    draft.partitionFiles('raw_by_market', [day]).length > 0 ? true : !defer && draft.partitionFiles('raw', [day]).length === 0,
  );
  // A view takes no parameters: the days are strftime's own output, written as literals.
  const scan =
    indexed.length === days.length
      ? 'stg_raw'
      : `(SELECT * FROM stg_raw WHERE strftime(recv_ts, '%Y-%m-%d') IN (${indexed.length > 0 ? indexed.map(sqlString).join(', ') : 'NULL'}))`;
  await conn.run(`CREATE OR REPLACE VIEW stg_raw_by_market AS ${indexRows(scan)}`);
  return { indexed: indexed.length, left: days.length - indexed.length };
}

/**
 * Every raw day without an index (of `only`, when given) gets one: its stored frames written as one sorted file
 * into `draft`. Raw never holds a natural key twice (appends de-duplicate, compaction too), so neither does the
 * index: no check needed. Returns the days indexed and the rows written.
 */
export async function indexMissingDays(conn: DuckDBConnection, draft: VersionDraft, only?: readonly string[]): Promise<{ days: number; rows: number }> {
  const def = DATASETS.raw_by_market;
  const indexed = new Set(draft.partitionValues('raw_by_market'));
  const wanted = only ? new Set(only) : null;
  let days = 0;
  let rows = 0;
  for (const day of draft.partitionValues('raw')) {
    if (indexed.has(day) || (wanted && !wanted.has(day))) continue;
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

/**
 * indexMissingDays in a version of its own (`compact`), published when it indexed a day: what `pmlake compact`,
 * the compaction after an ingest (the days it compacted) and the bench's cached lakes run.
 */
export async function publishMissingIndex(
  conn: DuckDBConnection,
  lakeDir: string,
  only?: readonly string[],
): Promise<{ days: number; rows: number; version: number | null }> {
  const draft = new VersionDraft(lakeDir);
  const r = await indexMissingDays(conn, draft, only);
  const published = r.days > 0 ? draft.publish('compact', { raw_by_market: r.rows }, []) : null;
  return { ...r, version: published?.version ?? null };
}
