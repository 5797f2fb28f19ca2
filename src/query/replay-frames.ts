import type { Query } from '../lake/duckdb.js';
import { sqlString } from '../lake/duckdb.js';
import { boundList, boundValues, query, tsParam, type Params } from './common.js';

/**
 * The raw frames of a run of `raw` files for a replay (files of successive days, which never overlap in time): received in [start, end), after the cursor (the last frame
 * already sent: receive time, then seq). `conditionIds` narrows to frames holding a message of those markets
 * (null: every frame); `announcements` keeps `new_market` frames whatever their market, as the venue sends them
 * to every custom-feature connection.
 *
 * No ORDER BY: a raw file is written sorted by (recv_ts, seq) and DuckDB keeps a scan's order (the files in list
 * order, each in its own order) through a filter and a projection (preserve_insertion_order), so the rows stream
 * in receive order without a sort, which would hold every matching row before giving the first. The reader
 * checks the order as it goes.
 */
export type ReplayFileRead = {
  start: bigint;
  end: bigint;
  after: { recvUs: bigint; seq: bigint } | null;
  conditionIds: readonly string[] | null;
  announcements: boolean;
  /**
   * Frames the connection receives whole, told by the row's lists instead of a parse of its text: every message
   * names a market (`condition_ids`, no NULL) of which every outcome token is subscribed, and every message type
   * (`event_types`) is one the connection receives for a subscribed asset. Absent: no frame is known whole.
   */
  whole?: { conditionIds: readonly string[]; eventTypes: readonly string[] } | null;
};

/** The window and the cursor, shared by both reads. */
function windowWhere(p: ReplayFileRead, params: Params): string[] {
  params.start = tsParam(p.start);
  params.end = tsParam(p.end);
  const where = ['recv_ts >= $start', 'recv_ts < $end'];
  if (p.after) {
    params.after_ts = tsParam(p.after.recvUs);
    params.after_seq = p.after.seq;
    where.push('(recv_ts > $after_ts OR (recv_ts = $after_ts AND seq > $after_seq))');
  }
  return where;
}

/** Columns, in select order: recv_us (BIGINT), seq (BIGINT), frame (VARCHAR), whole (BOOLEAN, see `whole`). */
export function replayFilesQuery(files: readonly string[], p: ReplayFileRead): Query {
  const params: Params = {};
  const where = windowWhere(p, params);
  if (p.conditionIds) {
    const markets = `list_has_any(condition_ids, ${boundList(p.conditionIds, params, 'cid')})`;
    where.push(p.announcements ? `(${markets} OR list_contains(event_types, 'new_market'))` : markets);
  }
  return selectFrames(files, where, params, p, '');
}

/**
 * The same frames read from the market index (`raw_by_market` files of successive days; src/lake/layout.ts), for
 * a read narrowed to markets and without announcements. An `IN` on the sort column lets DuckDB skip every row
 * group of other markets. A frame of two subscribed markets is there twice: the row of the first of them in the
 * frame's own list is the one kept. A file is sorted by market first, so the frames of one market come in
 * receive order as stored; those of several need `sorted` (the caller then reads one file per statement, which
 * bounds the sort to a day).
 */
export function replayIndexQuery(files: readonly string[], p: ReplayFileRead & { conditionIds: readonly string[] }, sorted: boolean): Query {
  const params: Params = {};
  const where = windowWhere(p, params);
  const markets = boundValues(p.conditionIds, params, 'cid');
  where.push(`condition_id IN (${markets.join(', ')})`);
  if (markets.length > 1) where.push(`condition_id = list_filter(condition_ids, c -> c IN (${markets.join(', ')}))[1]`);
  return selectFrames(files, where, params, p, sorted ? 'ORDER BY recv_ts, seq' : '');
}

function selectFrames(files: readonly string[], where: string[], params: Params, p: ReplayFileRead, orderBy: string): Query {
  let whole = 'false';
  if (p.whole && p.whole.conditionIds.length > 0 && p.whole.eventTypes.length > 0) {
    // list_count skips NULLs: a message without a market (or type) makes the frame a parse's to judge.
    whole = `(len(condition_ids) > 0 AND list_count(condition_ids) = len(condition_ids) AND list_count(event_types) = len(event_types)
    AND len(event_types) > 0 AND list_has_all(${boundList(p.whole.conditionIds, params, 'whole_cid')}, condition_ids)
    AND list_has_all(${boundList(p.whole.eventTypes, params, 'whole_type')}, event_types))`;
  }
  // The paths are the lake's own file names from its manifest, never request text; a table function's file list
  // is bound at plan time, so it is written as literals.
  const sql = `SELECT epoch_us(recv_ts)::BIGINT AS recv_us, seq::BIGINT AS seq, frame, ${whole} AS whole
  FROM read_parquet([${files.map(sqlString).join(', ')}]) WHERE ${where.join(' AND ')} ${orderBy}`;
  return query(sql, params);
}
