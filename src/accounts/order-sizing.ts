import type { DuckDBInstance, DuckDBValue } from '@duckdb/node-api';
import type { DatasetName } from '../lake/layout.js';
import { withConnection, type Query } from '../lake/duckdb.js';
import { datasetSource, hasFiles } from '../lake/runner.js';

/**
 * Row counts for legacy order items, read from the lake: the rows the item's download would return, times
 * the per-type bytes-per-row of the legacy size model, price the item. Deliberately simple (one count per
 * item, filtered on the sort key `token IN (market's tokens)` and the time column, which Parquet row-group
 * statistics answer quickly); the query API's estimates (src/query/estimate.ts) are the precise ones.
 */
export type OrderDataType = 'trades' | 'ohlcv' | 'orderbook' | 'snapshots';

const SOURCES: Record<OrderDataType, { dataset: DatasetName; token: string; time: string }> = {
  trades: { dataset: 'trades', token: 'token_id', time: 'ts' },
  ohlcv: { dataset: 'candles_1m', token: 'token_id', time: 'bucket' },
  orderbook: { dataset: 'book_snapshots', token: 'asset_id', time: 'ts' },
  snapshots: { dataset: 'top_of_book', token: 'asset_id', time: 'ts' },
};

const TIMEFRAME_SECONDS = { '1m': 60, '1h': 3600, '1d': 86_400 } as const;
export type OrderTimeframe = keyof typeof TIMEFRAME_SECONDS;

export type ItemSelector = { marketId: string } | { seriesId: string };

/** A lake timestamp parameter: the columns are naive UTC TIMESTAMPs, so drop the zone after normalising. */
function ts(iso: string): string {
  return new Date(iso).toISOString().slice(0, 23);
}

/** Markets matching the selector in the catalogue (0 → unknown market or series). */
export function catalogCountQuery(lakeDir: string, sel: ItemSelector): Query {
  const where = 'marketId' in sel ? 'id = $sel' : 'series_id = $sel';
  return {
    sql: `SELECT count(*) AS n FROM ${datasetSource(lakeDir, 'markets')} WHERE ${where}`,
    params: { sel: 'marketId' in sel ? sel.marketId : sel.seriesId },
  };
}

/** Rows an item would deliver. The dataset and timeframe come from zod enums; values are parameters. */
export function itemRowsQuery(
  lakeDir: string,
  t: OrderDataType,
  sel: ItemSelector,
  w: { start?: string | null | undefined; end?: string | null | undefined },
  timeframe: OrderTimeframe = '1h',
): Query {
  const src = SOURCES[t];
  const params: Record<string, DuckDBValue> = { sel: 'marketId' in sel ? sel.marketId : sel.seriesId };
  const tokens = `SELECT unnest(outcome_token_ids) FROM ${datasetSource(lakeDir, 'markets')} WHERE ${'marketId' in sel ? 'id' : 'series_id'} = $sel`;
  const where = [`${src.token} IN (${tokens})`];
  if (w.start) {
    where.push(`${src.time} >= CAST($start AS TIMESTAMP)`);
    params.start = ts(w.start);
  }
  if (w.end) {
    where.push(`${src.time} < CAST($end AS TIMESTAMP)`);
    params.end = ts(w.end);
  }
  const from = datasetSource(lakeDir, src.dataset);
  if (t === 'ohlcv') {
    // Candles are stored per minute: count the non-empty buckets of the ordered timeframe.
    params.step_s = TIMEFRAME_SECONDS[timeframe];
    return { sql: `SELECT count(DISTINCT (token_id, epoch(bucket) // $step_s)) AS n FROM ${from} WHERE ${where.join(' AND ')}`, params };
  }
  return { sql: `SELECT count(*) AS n FROM ${from} WHERE ${where.join(' AND ')}`, params };
}

export async function countRows(db: DuckDBInstance, q: Query): Promise<number> {
  return withConnection(db, async (conn) => {
    const reader = await conn.runAndReadAll(q.sql, q.params as Record<string, DuckDBValue>);
    return Number(reader.getRows()[0]?.[0] ?? 0);
  });
}

/** Rows for an item, or null when the market/series is not in the catalogue. */
export async function sizeItem(
  db: DuckDBInstance,
  lakeDir: string,
  t: OrderDataType,
  sel: ItemSelector,
  w: { start?: string | null | undefined; end?: string | null | undefined },
  timeframe?: OrderTimeframe,
): Promise<number | null> {
  if (!hasFiles(lakeDir, 'markets')) return null;
  if ((await countRows(db, catalogCountQuery(lakeDir, sel))) === 0) return null;
  if (!hasFiles(lakeDir, SOURCES[t].dataset)) return 0;
  return countRows(db, itemRowsQuery(lakeDir, t, sel, w, timeframe));
}

export function datasetOf(t: OrderDataType): string {
  return t === 'snapshots' ? 'top_of_book' : t;
}
