import type { Query } from '../lake/duckdb.js';
import type { Lake } from '../lake/sources.js';
import { boundValues, DAY_MICROS, dateOf, monthOf, query, tsParam, type Params } from './common.js';
import { seqReceiveMicros } from './orderbook.js';

/**
 * Pages of one token's rows in time order, for the normalized replay (src/replay/): each builder returns the rows
 * of [start, end) after a keyset cursor (the last row of the previous page, compared as a tuple on the page's own
 * ORDER BY, so rows that share a time are neither skipped nor repeated), at most `limit` of them. The time column
 * comes back as epoch microseconds (`*_us`) and decimals as DOUBLE: the nearest double to the exact decimal, the
 * number the runner would make of it, without building a decimal value per cell (the replay's hot path).
 */

export type PageWindow = { start: bigint; end: bigint };

/** The l2 tape's side in the API's words, whatever spelling ingest stored (as src/query/orderbook.ts). */
const SIDE = `CASE WHEN lower(side) IN ('buy', 'bid', 'bids') THEN 'bid' WHEN lower(side) IN ('sell', 'ask', 'asks') THEN 'ask' END`;

/** Level changes of one token by receive time, in arrival order (seq, level_idx). Cursor: [seq, level_idx]. */
export function l2PageQuery(lake: Lake, asset: string, w: PageWindow, after: { seq: bigint; idx: number } | null, limit: number): Query {
  const params: Params = { asset, start: tsParam(w.start), end: tsParam(w.end), limit };
  // A tape seq is its receive ms × 1e6 + rank and its partition is its receive day: the cursor prunes days too.
  params.d0 = dateOf(after ? seqReceiveMicros(after.seq) : w.start);
  params.d1 = dateOf(w.end - 1n);
  const where = ['asset_id = $asset', 'recv_ts >= $start', 'recv_ts < $end', 'date >= $d0', 'date <= $d1'];
  if (after) {
    params.seq = after.seq;
    params.idx = after.idx;
    where.push('seq >= $seq', '(seq, level_idx) > ($seq, $idx)');
  }
  return query(
    `SELECT epoch_us(recv_ts) AS recv_us, epoch_us(ts) AS ts_us, ${SIDE} AS side, price::DOUBLE AS price, size::DOUBLE AS size, is_snapshot, seq, level_idx
FROM ${lake.from('l2')}
WHERE ${where.join(' AND ')}
ORDER BY seq, level_idx
LIMIT $limit`,
    params,
  );
}

/**
 * The venue's trade prints (last_trades) of one token by receive time, in arrival order. The files are partitioned
 * by the venue's `ts`, a little before the receive time: a day of slack either side. Cursor: the ORDER BY tuple.
 */
export function venueTradesPageQuery(lake: Lake, asset: string, w: PageWindow, after: VenueTradeCursor | null, limit: number): Query {
  const params: Params = { asset, start: tsParam(w.start), end: tsParam(w.end), limit, d0: dateOf(w.start - DAY_MICROS), d1: dateOf(w.end + DAY_MICROS) };
  const where = ['asset_id = $asset', 'recv_ts >= $start', 'recv_ts < $end', 'date >= $d0', 'date <= $d1'];
  if (after) {
    Object.assign(params, { seq: after.seq, ts: after.ts_us, price: after.price, size: after.size, side: after.side });
    where.push('seq >= $seq', `(${VENUE_KEY}) > ($seq, $ts, $price, $size, $side)`);
  }
  return query(
    `SELECT epoch_us(recv_ts) AS recv_us, epoch_us(ts) AS ts_us, side, price::DOUBLE AS price, size::DOUBLE AS size, price::VARCHAR AS price_text,
  size::VARCHAR AS size_text, coalesce(side, '') AS side_text, fee_rate_bps, transaction_hash, seq
FROM ${lake.from('last_trades')}
WHERE ${where.join(' AND ')}
ORDER BY ${VENUE_KEY}
LIMIT $limit`,
    params,
  );
}

/** The natural key in arrival order: NULL-free, so the tuple comparison of the cursor never yields NULL. */
const VENUE_KEY = "seq, epoch_us(ts), price::VARCHAR, size::VARCHAR, coalesce(side, '')";

export type VenueTradeCursor = { seq: bigint; ts_us: bigint; price: string; size: string; side: string };

/** On-chain fills (trades) of one token by block time, in the OHLCV's order (ts, block, log index, id). */
export function chainTradesPageQuery(lake: Lake, token: string, w: PageWindow, after: ChainTradeCursor | null, limit: number): Query {
  const params: Params = { token, start: tsParam(w.start), end: tsParam(w.end), limit, m0: monthOf(w.start), m1: monthOf(w.end - 1n) };
  const where = ['token_id = $token', 'ts >= $start', 'ts < $end', 'month >= $m0', 'month <= $m1'];
  if (after) {
    Object.assign(params, { ts: tsParam(after.ts_us), block: after.block, log: after.log, id: after.id });
    where.push('ts >= $ts', '(ts, coalesce(block_number, -1), coalesce(log_index, -1), id) > ($ts, $block, $log, $id)');
  }
  return query(
    `SELECT epoch_us(ts) AS ts_us, id, side, price::DOUBLE AS price, size::DOUBLE AS size, transaction_hash, coalesce(block_number, -1) AS block,
  coalesce(log_index, -1) AS log_index
FROM ${lake.from('trades')}
WHERE ${where.join(' AND ')}
ORDER BY ts, coalesce(block_number, -1), coalesce(log_index, -1), id
LIMIT $limit`,
    params,
  );
}

export type ChainTradeCursor = { ts_us: bigint; block: number; log: number; id: string };

/** Best bid/ask changes of one token (top_of_book, stamped with the receive time), in arrival order. Cursor: seq. */
export function quotesPageQuery(lake: Lake, asset: string, w: PageWindow, afterSeq: bigint | null, limit: number): Query {
  const params: Params = { asset, start: tsParam(w.start), end: tsParam(w.end), limit, d0: dateOf(w.start), d1: dateOf(w.end - 1n) };
  const where = ['asset_id = $asset', 'ts >= $start', 'ts < $end', 'date >= $d0', 'date <= $d1'];
  if (afterSeq !== null) {
    params.seq = afterSeq;
    where.push('seq > $seq');
  }
  return query(
    `SELECT epoch_us(ts) AS ts_us, seq, best_bid::DOUBLE AS best_bid, best_bid_size::DOUBLE AS best_bid_size, best_ask::DOUBLE AS best_ask,
  best_ask_size::DOUBLE AS best_ask_size
FROM ${lake.from('top_of_book')}
WHERE ${where.join(' AND ')}
ORDER BY seq
LIMIT $limit`,
    params,
  );
}

/**
 * Incidents of the given kinds whose stretch [from_ts, to_ts] meets [start, end), by from_ts (the files are
 * partitioned by from_ts's day, so only the upper bound prunes). Cursor: (from_ts, seq, kind).
 */
export function incidentsPageQuery(
  lake: Lake,
  asset: string,
  kinds: readonly string[],
  w: PageWindow,
  after: { from_us: bigint; seq: bigint; kind: string } | null,
  limit: number,
): Query {
  const params: Params = { asset, start: tsParam(w.start), end: tsParam(w.end), limit, d1: dateOf(w.end - 1n) };
  const kindList = boundValues(kinds, params, 'kind');
  const where = ['asset_id = $asset', `kind IN (${kindList.join(', ')})`, 'from_ts < $end', 'to_ts >= $start', 'date <= $d1'];
  if (after) {
    Object.assign(params, { f: tsParam(after.from_us), seq: after.seq, k: after.kind });
    where.push('(from_ts, coalesce(seq, -1), kind) > ($f, $seq, $k)');
  }
  return query(
    `SELECT epoch_us(from_ts) AS from_us, epoch_us(to_ts) AS to_us, kind, coalesce(seq, -1) AS seq, detail
FROM ${lake.from('incidents')}
WHERE ${where.join(' AND ')}
ORDER BY from_ts, coalesce(seq, -1), kind
LIMIT $limit`,
    params,
  );
}
