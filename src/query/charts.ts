import type { Query } from '../lake/duckdb.js';
import type { Lake } from '../lake/sources.js';
import { ohlcvSelect, type OhlcvRequest } from './ohlcv.js';
import { query, windowWhere, type Params } from './common.js';

/**
 * Builders for the chart endpoints (/v1/charts/udf/*, /v1/charts/replay/ticks). The bars are the OHLCV
 * builder's candles (any timeframe, same buckets and sources as /v1/trades/ohlcv), reshaped for UDF: time in
 * unix seconds, prices and volume as doubles (the numbers a client parses from the exact decimal text).
 */

/**
 * The newest `limit` bars of the request's window, newest first (the caller reverses them: UDF wants oldest
 * first). Newest first so that a capped answer keeps the bars nearest `to`, as a countback asks.
 */
export function udfBarsQuery(lake: Lake, r: OhlcvRequest, limit: number): Query {
  const base = ohlcvSelect(lake, r, 'desc');
  return query(
    `SELECT (epoch_us(b."timestamp") // 1000000)::BIGINT AS t, b.open::DOUBLE AS o, b.high::DOUBLE AS h, b.low::DOUBLE AS l,
  b.close::DOUBLE AS c, b.volume::DOUBLE AS v
FROM (${base.sql}) b
ORDER BY t DESC
LIMIT $bars_limit`,
    { ...base.params, bars_limit: limit },
  );
}

/** The market's price tick (for the chart's pricescale); null when the catalogue does not know it. */
export function marketTickQuery(lake: Lake, marketId: string): Query {
  return query(`SELECT tick_size::DOUBLE AS tick FROM ${lake.from('markets')} WHERE id = $id LIMIT 1`, { id: marketId });
}

export type ReplayWindow = { token: string; start: bigint; end: bigint };

/**
 * One token's trades in [start, end) in replay order: oldest first by block time, then the chain's own order
 * (block, log index), then id. `time` is the unix second the cursor counts in; `us` the exact instant.
 */
export function replayTicksQuery(lake: Lake, w: ReplayWindow, limit: number): Query {
  const params: Params = { token: w.token, ticks_limit: limit };
  const where = ['token_id = $token', ...windowWhere('ts', { start: w.start, end: w.end }, params, { column: 'month' })];
  return query(
    `SELECT (epoch_us(ts) // 1000000)::BIGINT AS "time", ts AS "timestamp", price::DOUBLE AS price, size::DOUBLE AS size, side, id
FROM ${lake.from('trades')}
WHERE ${where.join(' AND ')}
ORDER BY ts, block_number, log_index, id
LIMIT $ticks_limit`,
    params,
  );
}
