import type { Query } from '../lake/duckdb.js';
import type { Lake } from '../lake/sources.js';
import type { DatasetName } from '../lake/layout.js';
import type { EstimateKind, SeriesEstimateKind } from '../catalogue/kinds.js';
import type { Timeframe } from '../timeframe.js';
import { bucketCeil, bucketFloor, timeframeOf } from '../timeframe.js';
import { boundaries } from './computed.js';
import { perToken, query, windowWhere, type Params, type Window } from './common.js';

/**
 * Row counts for size estimates, read from the lake itself. Each count filters on the sort key first (token
 * = $t, one scan per token) and on the time column, so DuckDB answers from row-group statistics and the
 * few row groups that straddle the window; a year of a busy market stays in milliseconds. The kinds each
 * estimate takes are the catalogue's (src/catalogue/kinds.ts): a series estimate also takes the anchor's
 * `greeks` (options series: one row per option trade, as the greeks download returns) and `snapshots` (market
 * series: the book snapshots of the series' tokens, as a series download of `snapshots` returns).
 */
export type EstimateDataType = EstimateKind;
export type SeriesEstimateDataType = SeriesEstimateKind;

type Spec = { dataset: DatasetName; tokenCol: string; timeCol: string; partition: 'month' | 'date' };

/** The kinds whose rows are counted rows of one data set (OHLCV counts buckets, interval books boundaries). */
type CountedKind = Exclude<Exclude<EstimateDataType, 'ohlcv'>, 'book_snapshot_interval'>;

/** raw = the market's level-2 tape (every level update); the undivided frame tape spans all markets. */
export const ESTIMATE_SOURCES: Readonly<Record<CountedKind, Spec>> = {
  trades: { dataset: 'trades', tokenCol: 'token_id', timeCol: 'ts', partition: 'month' },
  orderbook: { dataset: 'book_snapshots', tokenCol: 'asset_id', timeCol: 'ts', partition: 'date' },
  top_of_book: { dataset: 'top_of_book', tokenCol: 'asset_id', timeCol: 'ts', partition: 'date' },
  raw: { dataset: 'l2', tokenCol: 'asset_id', timeCol: 'recv_ts', partition: 'date' },
  // One row per venue trade print (the quote is joined to it).
  tbbo: { dataset: 'last_trades', tokenCol: 'asset_id', timeCol: 'ts', partition: 'date' },
};

/**
 * Rows of a book_snapshot_interval pull: every boundary of the window for each token with any stored book by the
 * window's end. An upper bound: a token's boundaries before its first book yield no row.
 */
function intervalRowsQuery(lake: Lake, tokens: readonly string[], w: Window, tf: Timeframe): Query {
  const params: Params = {};
  const ww: Window = { end: w.end };
  const where = windowWhere('ts', ww, params, { column: 'date' });
  const rows = perToken(lake.from('book_snapshots'), 'asset_id', tokens, 'asset_id', where, params);
  if (w.start === undefined || w.end === undefined) {
    return query(`SELECT 0::BIGINT AS rows, count(DISTINCT asset_id) AS tokens FROM ${rows} r`, params);
  }
  params.boundaries = boundaries(tf, { start: w.start, end: w.end }).count;
  return query(`SELECT (count(DISTINCT asset_id) * $boundaries::BIGINT)::BIGINT AS rows, count(DISTINCT asset_id) AS tokens FROM ${rows} r`, params);
}

/**
 * Rows of an options series (one venue and underlying) in a window, and how many instruments have any: the
 * rows its trades and its greeks downloads return (one greeks row per trade). The sort key (underlying, ts)
 * and the month partitions prune the scan.
 */
export function optionsRowsQuery(lake: Lake, sel: { venue: string; underlying: string }, w: Window): Query {
  const params: Params = { venue: sel.venue, underlying: sel.underlying };
  const where = ['underlying = $underlying', 'venue = $venue', ...windowWhere('ts', w, params, { column: 'month' })];
  return query(`SELECT count(*) AS rows, count(DISTINCT instrument_name) AS markets\nFROM ${lake.from('options')}\nWHERE ${where.join(' AND ')}`, params);
}

/** Rows of a data type for some tokens in a window, plus how many tokens have any. */
export function estimateRowsQuery(lake: Lake, t: EstimateDataType, tokens: readonly string[], w: Window, tf?: Timeframe): Query {
  const params: Params = {};
  if (t === 'ohlcv') {
    // Candles are not stored per timeframe: count the non-empty buckets the rollup would return.
    const step = BigInt(tf?.seconds ?? 3600) * 1_000_000n;
    const origin = BigInt(tf?.originSeconds ?? 0) * 1_000_000n;
    params.step_us = step;
    params.origin_us = origin;
    const ww: Window = {};
    if (tf && w.start !== undefined) ww.start = bucketFloor(tf, w.start);
    else if (w.start !== undefined) ww.start = w.start;
    if (tf && w.end !== undefined) ww.end = bucketCeil(tf, w.end);
    else if (w.end !== undefined) ww.end = w.end;
    const where = windowWhere('bucket', ww, params, { column: 'month' });
    const rows = perToken(lake.from('candles_1m'), 'token_id', tokens, 'token_id, bucket', where, params);
    return query(
      `SELECT count(DISTINCT (token_id, (epoch_us(bucket) - $origin_us::BIGINT) // $step_us::BIGINT)) AS rows, count(DISTINCT token_id) AS tokens
FROM ${rows} c`,
      params,
    );
  }
  if (t === 'book_snapshot_interval') return intervalRowsQuery(lake, tokens, w, tf ?? timeframeOf(60));
  const s = ESTIMATE_SOURCES[t];
  const where = windowWhere(s.timeCol, w, params, { column: s.partition });
  const rows = perToken(lake.from(s.dataset), s.tokenCol, tokens, s.tokenCol, where, params);
  return query(`SELECT count(*) AS rows, count(DISTINCT ${s.tokenCol}) AS tokens\nFROM ${rows} r`, params);
}

/**
 * Rows of a data type over every market of a series in a window, and how many of its markets have any.
 * One scan with a semi-join on the series' tokens (a series can hold thousands of tokens, too many for one
 * scan per token); the window prunes partitions and row groups.
 */
export function seriesRowsQuery(
  lake: Lake,
  dataType: Exclude<EstimateDataType, 'book_snapshot_interval'> | 'snapshots',
  seriesId: string,
  w: Window,
  tf?: Timeframe,
): Query {
  // A series' snapshots are its book snapshots (the series download of `snapshots` is the order-book file).
  const t = dataType === 'snapshots' ? 'orderbook' : dataType;
  const params: Params = { series_id: seriesId };
  const tok = `SELECT id AS market_id, unnest(outcome_token_ids) AS token_id FROM ${lake.from('markets')} WHERE series_id = $series_id`;
  let hits: string;
  if (t === 'ohlcv') {
    params.step_us = BigInt(tf?.seconds ?? 3600) * 1_000_000n;
    params.origin_us = BigInt(tf?.originSeconds ?? 0) * 1_000_000n;
    const ww: Window = {};
    if (w.start !== undefined) ww.start = tf ? bucketFloor(tf, w.start) : w.start;
    if (w.end !== undefined) ww.end = tf ? bucketCeil(tf, w.end) : w.end;
    const where = windowWhere('bucket', ww, params, { column: 'month' });
    hits = `SELECT token_id, count(DISTINCT (epoch_us(bucket) - $origin_us::BIGINT) // $step_us::BIGINT) AS n
  FROM ${lake.from('candles_1m')}
  WHERE ${['token_id IN (SELECT token_id FROM tok)', ...where].join(' AND ')}
  GROUP BY 1`;
  } else {
    const s = ESTIMATE_SOURCES[t];
    const where = windowWhere(s.timeCol, w, params, { column: s.partition });
    hits = `SELECT ${s.tokenCol} AS token_id, count(*) AS n
  FROM ${lake.from(s.dataset)}
  WHERE ${[`${s.tokenCol} IN (SELECT token_id FROM tok)`, ...where].join(' AND ')}
  GROUP BY 1`;
  }
  return query(
    `WITH tok AS (${tok}),
hits AS (
  ${hits}
)
SELECT coalesce(sum(hits.n), 0)::BIGINT AS rows, count(DISTINCT tok.market_id) AS markets
FROM hits JOIN tok USING (token_id)`,
    params,
  );
}
