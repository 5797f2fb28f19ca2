import type { Query } from '../lake/duckdb.js';
import type { DatasetName } from '../lake/layout.js';
import type { Lake } from '../lake/sources.js';
import type { Timeframe } from '../timeframe.js';
import type { Serving } from '../catalogue/kinds.js';
import { ESTIMATE_SOURCES } from './estimate.js';
import { query, windowWhere, type Params, type Window } from './common.js';

/**
 * Row counts for legacy order items (src/accounts/order-sizing.ts): the rows the item's download would return.
 * Deliberately simple, one count per item, filtered on the sort key `token IN (the item's tokens)` and the time
 * column, which Parquet row-group statistics answer quickly; the query API's estimates (./estimate.ts) are the
 * precise ones, but they share the sources: trades, book snapshots and top of book are theirs.
 */
/** The order kinds (src/catalogue/kinds.ts) but greeks, which orders refuse before sizing. */
export type OrderDataType = Exclude<Serving<'order'>, 'greeks'>;

/**
 * A market or a series. A market is named by its numeric id (every outcome) or, as the query API's market_id
 * takes it, by one outcome token id: then `tokenId` is set and the item covers that outcome only.
 */
export type ItemSelector = { marketId: string; tokenId?: string | undefined } | { seriesId: string };

type Source = { dataset: DatasetName; tokenCol: string; timeCol: string };

export const ORDER_SOURCES: Readonly<Record<OrderDataType, Source>> = {
  trades: ESTIMATE_SOURCES.trades,
  ohlcv: { dataset: 'candles_1m', tokenCol: 'token_id', timeCol: 'bucket' },
  orderbook: ESTIMATE_SOURCES.orderbook,
  snapshots: ESTIMATE_SOURCES.top_of_book,
};

/** The catalogue's condition for the selector's markets, its value bound as `$sel`. */
function selected(sel: ItemSelector, params: Params): string {
  if ('marketId' in sel && sel.tokenId !== undefined) {
    params.sel = sel.tokenId;
    return 'list_contains(outcome_token_ids, $sel)';
  }
  params.sel = 'marketId' in sel ? sel.marketId : sel.seriesId;
  return 'marketId' in sel ? 'id = $sel' : 'series_id = $sel';
}

/** The tokens an item covers: the one named token, or every token of the selected markets. */
function itemTokens(lake: Lake, sel: ItemSelector, params: Params): string {
  if ('marketId' in sel && sel.tokenId !== undefined) {
    params.tok = sel.tokenId;
    return 'SELECT $tok';
  }
  return `SELECT unnest(outcome_token_ids) FROM ${lake.from('markets')} WHERE ${selected(sel, params)}`;
}

/** Markets matching the selector in the catalogue (0 → unknown market or series). */
export function orderCatalogCountQuery(lake: Lake, sel: ItemSelector): Query {
  const params: Params = {};
  return query(`SELECT count(*) AS n FROM ${lake.from('markets')} WHERE ${selected(sel, params)}`, params);
}

/** Rows an item would deliver over [start, end). The data type and timeframe come from zod enums; values are parameters. */
export function orderItemRowsQuery(lake: Lake, t: OrderDataType, sel: ItemSelector, w: Window, tf: Timeframe): Query {
  const src = ORDER_SOURCES[t];
  const params: Params = {};
  const tokens = itemTokens(lake, sel, params);
  const where = [`${src.tokenCol} IN (${tokens})`, ...windowWhere(src.timeCol, w, params, null)].join(' AND ');
  const from = lake.from(src.dataset);
  if (t === 'ohlcv') {
    // Candles are stored per minute: meant to count the non-empty buckets of the ordered timeframe. But
    // `epoch()` is a DOUBLE and DuckDB's `//` on a DOUBLE does not floor, so this counts every minute candle
    // whatever the timeframe — the price orders have always charged, kept while this code only moves
    // (test/accounts/order-sizing.test.ts pins it; estimate.ts floors with integer microseconds).
    params.step_s = tf.seconds;
    return query(`SELECT count(DISTINCT (token_id, epoch(bucket) // $step_s)) AS n FROM ${from} WHERE ${where}`, params);
  }
  return query(`SELECT count(*) AS n FROM ${from} WHERE ${where}`, params);
}
