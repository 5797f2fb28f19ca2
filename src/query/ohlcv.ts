import type { Query } from '../lake/duckdb.js';
import type { Lake } from '../lake/sources.js';
import { bucketCeil, bucketFloor, isHourMultiple, isMinuteMultiple, type Timeframe } from '../timeframe.js';
import { query, windowWhere, type Params } from './common.js';

export type OhlcvRequest = {
  token: string;
  outcome: number;
  timeframe: Timeframe;
  start?: bigint | undefined;
  end?: bigint | undefined;
};

/**
 * Which rows feed the candles. A candle always covers its whole bucket, so the requested [start, end) is
 * widened to bucket boundaries: the buckets returned are every bucket that overlaps the window, complete.
 * Both sources then see the same rows, because bucket boundaries of a minute multiple are minute boundaries.
 */
export function ohlcvWindow(r: OhlcvRequest): { start?: bigint; end?: bigint } {
  const w: { start?: bigint; end?: bigint } = {};
  if (r.start !== undefined) w.start = bucketFloor(r.timeframe, r.start);
  if (r.end !== undefined) w.end = bucketCeil(r.timeframe, r.end);
  return w;
}

/**
 * Bucket start of `col` in integer microseconds, so no floating or time-zone arithmetic is involved. The
 * step and origin are written as integer literals: they are numbers the timeframe parser produced (never
 * request text), and as literals DuckDB folds them instead of casting a parameter per row.
 */
export function bucketExpr(col: string, tf: Timeframe): string {
  const step = (BigInt(tf.seconds) * 1_000_000n).toString();
  const origin = (BigInt(tf.originSeconds) * 1_000_000n).toString();
  const shifted = origin === '0' ? `epoch_us(${col})` : `(epoch_us(${col}) - ${origin})`;
  return `make_timestamp((${shifted} // ${step}) * ${step}${origin === '0' ? '' : ` + ${origin}`})`;
}

/**
 * Plain SELECT of candles, no LIMIT (downloads wrap it in COPY). A whole-minute timeframe rolls up
 * candles_1m; anything finer (30s, 15s, …) buckets the trades themselves. Empty buckets are omitted.
 * open/close are the first/last trade by block time then log index. From trades that is an arg_min/arg_max
 * over (ts, block_number, log_index): ingest/candles.ts's rule without its last resort, the trade id — no two
 * fills share a block and a log index, and a VARCHAR in the sort key doubled the query time. From candles_1m
 * it is the first minute's open and the last minute's close, which ingest built by the same rule.
 */
export function ohlcvSelect(lake: Lake, r: OhlcvRequest, order: 'asc' | 'desc' = 'desc'): Query {
  const params: Params = { token: r.token, outcome: r.outcome };
  const dir = order === 'desc' ? 'DESC' : 'ASC';
  if (isMinuteMultiple(r.timeframe)) {
    // Whole hours (bucket origins are whole hours too: the epoch, or a Monday for weeks) roll up candles_1h,
    // one row an hour instead of sixty, when the lake has it for every month.
    const source = isHourMultiple(r.timeframe) && lake.hourlyCandles?.() === true ? 'candles_1h' : 'candles_1m';
    const where = ['token_id = $token', ...windowWhere('bucket', ohlcvWindow(r), params, { column: 'month' })];
    if (r.timeframe.seconds === STORED_SECONDS[source] && r.timeframe.originSeconds % r.timeframe.seconds === 0) {
      // The stored candles are already these buckets (one row per token and bucket, the natural key): no
      // rollup: a hash aggregate over one-row groups would be a large share of the query for nothing.
      // Same columns and types as the rollup below (sum() widens volume to DECIMAL(38,6)).
      return query(
        `SELECT $token::VARCHAR AS market_id, $outcome::INTEGER AS outcome, bucket AS "timestamp",
  open, high, low, close, volume::DECIMAL(38,6) AS volume, trade_count::BIGINT AS trade_count
FROM ${lake.from(source)}
WHERE ${where.join(' AND ')}
ORDER BY "timestamp" ${dir}`,
        params,
      );
    }
    return query(
      `SELECT $token::VARCHAR AS market_id, $outcome::INTEGER AS outcome, ${bucketExpr('bucket', r.timeframe)} AS "timestamp",
  arg_min(open, bucket) AS open, max(high) AS high, min(low) AS low, arg_max(close, bucket) AS close,
  sum(volume) AS volume, sum(trade_count)::BIGINT AS trade_count
FROM ${lake.from(source)}
WHERE ${where.join(' AND ')}
GROUP BY "timestamp"
ORDER BY "timestamp" ${dir}`,
      params,
    );
  }
  const where = ['token_id = $token', ...windowWhere('ts', ohlcvWindow(r), params, { column: 'month' })];
  return query(
    `SELECT $token::VARCHAR AS market_id, $outcome::INTEGER AS outcome, ${bucketExpr('ts', r.timeframe)} AS "timestamp",
  arg_min(price, (ts, coalesce(block_number, -1), log_index)) AS open, max(price) AS high, min(price) AS low,
  arg_max(price, (ts, coalesce(block_number, -1), log_index)) AS close, sum(size) AS volume, count(*) AS trade_count
FROM ${lake.from('trades')}
WHERE ${where.join(' AND ')}
GROUP BY "timestamp"
ORDER BY "timestamp" ${dir}`,
    params,
  );
}

/** Bucket length of the stored candle data sets. */
const STORED_SECONDS = { candles_1m: 60, candles_1h: 3600 } as const;

/** The API page: newest bucket first (as the anchor serves it), at most `limit` bars. */
export function ohlcvPageQuery(lake: Lake, r: OhlcvRequest, limit: number): Query {
  const base = ohlcvSelect(lake, r, 'desc');
  return query(`${base.sql}\nLIMIT $limit`, { ...base.params, limit });
}
