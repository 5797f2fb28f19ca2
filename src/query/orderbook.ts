import type { Query } from '../lake/duckdb.js';
import type { Lake } from '../lake/runner.js';
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
  if (fromDate !== undefined) {
    extra = ' AND date >= $from_date';
    params.from_date = fromDate;
  }
  return query(
    `SELECT ts, epoch_us(ts) AS ts_us, seq, condition_id, bids, asks
FROM ${lake.from('book_snapshots')}
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
  if (afterSeq !== null) {
    where.push('seq > $after_seq', 'date >= $from_date');
    params.after_seq = afterSeq;
    params.from_date = dateOf(seqReceiveMicros(afterSeq));
  }
  return query(
    `WITH tape AS (
  SELECT ${SIDE} AS side, price, size, is_snapshot, seq, level_idx, recv_ts
  FROM ${lake.from('l2')}
  WHERE ${where.join(' AND ')}
),
reset AS (SELECT max(seq) AS reset_seq FROM tape WHERE is_snapshot)
SELECT (SELECT reset_seq FROM reset) AS reset_seq, side, price,
  arg_max(size, (seq, level_idx)) AS size, max(recv_ts) AS last_ts, count(*) AS updates
FROM tape
WHERE side IS NOT NULL AND seq >= coalesce((SELECT reset_seq FROM reset), -9223372036854775807)
GROUP BY side, price
UNION ALL
SELECT (SELECT reset_seq FROM reset), NULL, NULL, NULL, max(recv_ts), count(*) FROM tape`,
    params,
  );
}

/** The receive instant (µs) encoded in a tape seq (receive ms × 1e6 + rank); 0 for a seq before 1970. */
function seqReceiveMicros(seq: bigint): bigint {
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
