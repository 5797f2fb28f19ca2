import type { Query } from '../lake/duckdb.js';
import type { Lake } from '../lake/sources.js';
import { dateOf, perToken, query, tsParam, windowWhere, type Params, type Window } from './common.js';

/**
 * Order-book builders. Rows carry the condition id in market_id and the token id in asset_id (the spec's
 * third meaning of market_id). The l2 tape's `side` is normalised to 'bid'/'ask' whatever spelling ingest
 * stored (the venue says BUY/SELL in price_change and bids/asks in book messages).
 */
const SIDE = `CASE WHEN lower(side) IN ('buy', 'bid', 'bids') THEN 'bid' WHEN lower(side) IN ('sell', 'ask', 'asks') THEN 'ask' END`;

/**
 * The newest stored snapshot at or before `at`. `fromDate` limits the scan to recent date partitions; the
 * handler retries without it for a book that has been quiet for longer.
 */
export function snapshotAtQuery(lake: Lake, assetId: string, at: bigint, fromDate: string | undefined): Query {
  const params: Params = { asset: assetId, at: tsParam(at), to_date: dateOf(at) };
  let extra = '';
  let source = lake.from('book_snapshots');
  if (fromDate !== undefined) {
    extra = ' AND date >= $from_date';
    params.from_date = fromDate;
    const days = datesBetween(fromDate, params.to_date as string, MAX_LISTED_PARTITIONS);
    if (days && lake.partitions) source = lake.partitions('book_snapshots', days);
  }
  return query(
    `SELECT ts, epoch_us(ts) AS ts_us, seq, condition_id, bids, asks
FROM ${source}
WHERE asset_id = $asset AND ts <= $at AND date <= $to_date${extra}
ORDER BY ts DESC, seq DESC
LIMIT 1`,
    params,
  );
}

/**
 * The tape after a snapshot, folded to one row per touched level: the last size written at each (side,
 * price) since the last full `book` message in the window (is_snapshot rows replace the whole book, so a
 * level not re-sent by that message is gone; an empty book is one marker row with side NULL). `reset_seq`
 * says whether such a message occurred: then the stored snapshot is discarded and these levels alone are
 * the book. Size 0 means the level was removed. The book's clock is the receive time: seq orders arrival
 * and snapshots are stamped with receive time, so "the book at T" is everything received at or before T.
 * The final row (side NULL) counts the rows replayed and carries the newest receive time.
 * A tape row's seq is its receive ms × 1e6 + rank and its partition is its receive date (ingest/books.ts),
 * so rows after `afterSeq` lie in partitions from afterSeq's receive date on: reading from there, not from a
 * day before the snapshot's stamp, usually opens one l2 file instead of two.
 */
export function tapeAfterQuery(lake: Lake, assetId: string, afterSeq: bigint | null, at: bigint): Query {
  const params: Params = { asset: assetId, at: tsParam(at), to_date: dateOf(at) };
  const where = ['asset_id = $asset', 'recv_ts <= $at', 'date <= $to_date'];
  let source = lake.from('l2');
  if (afterSeq !== null) {
    where.push('seq > $after_seq', 'date >= $from_date');
    params.after_seq = afterSeq;
    params.from_date = dateOf(seqReceiveMicros(afterSeq));
    const days = datesBetween(params.from_date as string, params.to_date as string, MAX_LISTED_PARTITIONS);
    if (days && lake.partitions) source = lake.partitions('l2', days);
  }
  return query(
    `WITH tape AS (
  SELECT ${SIDE} AS side, price, size, is_snapshot, seq, level_idx, recv_ts
  FROM ${source}
  WHERE ${where.join(' AND ')}
),
${RESET_CTE}
${FOLD_SELECT}`,
    params,
  );
}

/** The last full `book` message of a `tape` CTE: a CTE to put after it. */
const RESET_CTE = 'reset AS (SELECT max(seq) AS reset_seq FROM tape WHERE is_snapshot)';

/** The fold of a `tape` CTE (see tapeAfterQuery): one row per touched level, then the summary row. */
const FOLD_SELECT = `SELECT (SELECT reset_seq FROM reset) AS reset_seq, side, price,
  arg_max(size, (seq, level_idx)) AS size, max(recv_ts) AS last_ts, count(*) AS updates
FROM tape
WHERE side IS NOT NULL AND seq >= coalesce((SELECT reset_seq FROM reset), -9223372036854775807)
GROUP BY side, price
UNION ALL
SELECT (SELECT reset_seq FROM reset), NULL, NULL, NULL, max(recv_ts), count(*) FROM tape`;

/**
 * The common case of the book at `at` in one statement: the newest stored snapshot of the day of `at` (one row,
 * `kind` 's': ts, seq, condition_id, and its levels as JSON text in bids_json / asks_json — decimals as their exact
 * text — because the client library's conversion of a LIST of STRUCTs is slow even for one snapshot) and the raw tape of that day after it (rows of `kind` 't':
 * side, price, size, seq, level_idx, is_snapshot, recv_us), at most `maxTapeRows` of them, unordered. The caller
 * folds them (foldTape); it takes the general path (snapshotAtQuery, tapeAfterQuery) when the day has no snapshot,
 * when the snapshot's seq was received on an earlier day (the tape after it then starts there), or when the limit
 * is reached. Both sources are that one day's file, named explicitly; the snapshot's seq reaches the tape scan as
 * a dynamic filter (DuckDB pushes `seq > (SELECT seq FROM snap)` into the Parquet reader), so the tape columns
 * are decoded only for rows after the snapshot.
 * Why raw rows: between two stored snapshots there are a minute's updates or so, and a plan without the SQL
 * fold (materialised CTEs, a union of aggregates, a join) has far fewer pipelines: folding them in JavaScript
 * costs less CPU per request than folding in SQL or running two statements.
 */
export function bookOnDayQuery(lake: Lake, assetId: string, at: bigint, maxTapeRows = MAX_RAW_TAPE_ROWS): Query {
  const day = dateOf(at);
  const params: Params = { asset: assetId, at: tsParam(at), day, max_rows: maxTapeRows };
  const snapshots = lake.partitions ? lake.partitions('book_snapshots', [day]) : lake.from('book_snapshots');
  const l2 = lake.partitions ? lake.partitions('l2', [day]) : lake.from('l2');
  return query(
    `WITH snap AS (
  SELECT ts, seq, condition_id, bids, asks
  FROM ${snapshots}
  WHERE asset_id = $asset AND ts <= $at AND date = $day
  ORDER BY ts DESC, seq DESC
  LIMIT 1
)
SELECT 's' AS kind, NULL AS side, NULL AS price, NULL AS size, seq, NULL AS level_idx, NULL AS is_snapshot, NULL AS recv_us,
  ts, condition_id, to_json(bids)::VARCHAR AS bids_json, to_json(asks)::VARCHAR AS asks_json
FROM snap
UNION ALL
SELECT 't', side, price, size, seq, level_idx, is_snapshot, recv_us, NULL, NULL, NULL, NULL
FROM (
  SELECT ${SIDE} AS side, price, size, seq, level_idx, is_snapshot, epoch_us(recv_ts) AS recv_us
  FROM ${l2}
  WHERE asset_id = $asset AND recv_ts <= $at AND date = $day AND seq > (SELECT seq FROM snap)
  LIMIT $max_rows
)`,
    params,
  );
}

/** Beyond this many tape rows after the snapshot, folding in SQL (tapeAfterQuery) beats moving rows to JavaScript. */
export const MAX_RAW_TAPE_ROWS = 5000;

/** A raw tape row as bookOnDayQuery returns it (values as the runner converts them). */
export type RawTapeRow = {
  side: string | null;
  price: number | null;
  size: number | null;
  seq: bigint;
  level_idx: number;
  is_snapshot: boolean;
  recv_us: number;
};

/**
 * The fold tapeAfterQuery does in SQL, over raw rows: the last size per (side, price) since the last full `book`
 * message (reset_seq, null when none), in seq then level_idx order; the number of rows and the newest receive
 * instant. Rows with side NULL (an empty book) count but are no level.
 */
export function foldTape(rows: readonly RawTapeRow[]): {
  levels: { side: string; price: number; size: number }[];
  resetSeq: bigint | null;
  updates: number;
  lastUs: number | null;
} {
  let resetSeq: bigint | null = null;
  let lastUs: number | null = null;
  for (const r of rows) {
    if (r.is_snapshot && (resetSeq === null || r.seq > resetSeq)) resetSeq = r.seq;
    if (lastUs === null || r.recv_us > lastUs) lastUs = r.recv_us;
  }
  const ordered = rows
    .filter((r) => r.side !== null && (resetSeq === null || r.seq >= resetSeq))
    .sort((a, b) => (a.seq === b.seq ? a.level_idx - b.level_idx : a.seq < b.seq ? -1 : 1));
  const last = new Map<string, { side: string; price: number; size: number }>();
  for (const r of ordered) last.set(`${r.side}|${r.price}`, { side: r.side!, price: r.price!, size: r.size! });
  return { levels: [...last.values()], resetSeq, updates: rows.length, lastUs };
}

/** Partitions named explicitly up to this many; a longer range reads the glob (the listing would cost more). */
const MAX_LISTED_PARTITIONS = 31;

/** Every YYYY-MM-DD from `from` to `to` inclusive, or null when there are more than `max`. */
export function datesBetween(from: string, to: string, max: number): string[] | null {
  const out: string[] = [];
  let t = Date.parse(`${from}T00:00:00Z`);
  const end = Date.parse(`${to}T00:00:00Z`);
  if (!Number.isFinite(t) || !Number.isFinite(end)) return null;
  for (; t <= end; t += 86_400_000) {
    if (out.length >= max) return null;
    out.push(new Date(t).toISOString().slice(0, 10));
  }
  return out;
}

/** The receive instant (µs) encoded in a tape seq (receive ms × 1e6 + rank); 0 for a seq before 1970. */
export function seqReceiveMicros(seq: bigint): bigint {
  return seq > 0n ? (seq / 1_000_000n) * 1000n : 0n;
}

/** Stored snapshots in a window, oldest first, no LIMIT (downloads wrap it in COPY). */
export function bookSnapshotsSelect(lake: Lake, tokens: readonly string[], w: Window): Query {
  const params: Params = {};
  const where = windowWhere('ts', w, params, { column: 'date' });
  const rows = perToken(
    lake.from('book_snapshots'),
    'asset_id',
    tokens,
    'ts, condition_id, asset_id, reason, seq, best_bid, best_ask, bid_levels, ask_levels, bids, asks',
    where,
    params,
  );
  return query(
    `SELECT condition_id AS market_id, asset_id, ts AS "timestamp", reason, seq, best_bid, best_ask, bid_levels, ask_levels, bids, asks
FROM ${rows} b
ORDER BY ts, asset_id, seq`,
    params,
  );
}

/** Every change of best bid/ask in a window, oldest first, no LIMIT (downloads wrap it in COPY). */
export function topOfBookSelect(lake: Lake, tokens: readonly string[], w: Window): Query {
  const params: Params = {};
  const where = windowWhere('ts', w, params, { column: 'date' });
  const rows = perToken(
    lake.from('top_of_book'),
    'asset_id',
    tokens,
    'ts, condition_id, asset_id, seq, best_bid, best_bid_size, best_ask, best_ask_size, mid, spread',
    where,
    params,
  );
  return query(
    `SELECT condition_id AS market_id, asset_id, ts AS "timestamp", seq, best_bid, best_bid_size, best_ask, best_ask_size, mid, spread
FROM ${rows} b
ORDER BY ts, asset_id, seq`,
    params,
  );
}

export function topOfBookPageQuery(lake: Lake, tokens: readonly string[], w: Window, page: { limit: number; offset: number }): Query {
  const base = topOfBookSelect(lake, tokens, w);
  return query(`${base.sql}\nLIMIT $limit OFFSET $offset`, { ...base.params, limit: page.limit, offset: page.offset });
}

/** How many top-of-book changes a window holds (what topOfBookSelect would return). */
export function topOfBookCountQuery(lake: Lake, tokens: readonly string[], w: Window): Query {
  const params: Params = {};
  const where = windowWhere('ts', w, params, { column: 'date' });
  const rows = perToken(lake.from('top_of_book'), 'asset_id', tokens, 'ts', where, params);
  return query(`SELECT count(*) AS n FROM ${rows} b`, params);
}
