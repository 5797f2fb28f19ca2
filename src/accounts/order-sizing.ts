import type { LakeSession } from '../lake/session.js';
import { orderCatalogCountQuery, orderItemRowsQuery, ORDER_SOURCES, type ItemSelector, type OrderDataType } from '../query/order-sizing.js';
import type { Window } from '../query/common.js';
import { parseTimeframe, type Timeframe } from '../timeframe.js';

/**
 * Row counts for legacy order items, read from the lake: the rows the item's download would return, times
 * the per-type bytes-per-row of the legacy size model, price the item. The counts are the builders'
 * (src/query/order-sizing.ts), run in the request's lake session.
 */
export type { ItemSelector, OrderDataType } from '../query/order-sizing.js';

/**
 * The timeframe of an ohlcv item: a label (`1m`, `7m`, `1h`, …: any timeframe, as every pmlake candle route
 * takes) or one already parsed at the edge; 1h when none is given.
 */
export type OrderTimeframe = string | Timeframe;

/** Rows for an item, or null when the market/series is not in the catalogue. */
export async function sizeItem(
  lake: LakeSession,
  t: OrderDataType,
  sel: ItemSelector,
  w: { start?: string | null | undefined; end?: string | null | undefined },
  timeframe: OrderTimeframe = '1h',
): Promise<number | null> {
  if (!lake.hasFiles('markets')) return null;
  if ((await lake.count(orderCatalogCountQuery(lake.sources, sel))) === 0) return null;
  if (!lake.hasFiles(ORDER_SOURCES[t].dataset)) return 0;
  return lake.count(orderItemRowsQuery(lake.sources, t, sel, windowOf(w), orderTimeframe(timeframe)));
}

/** The window in microseconds, at the millisecond precision of the ISO texts orders carry. */
function windowOf(w: { start?: string | null | undefined; end?: string | null | undefined }): Window {
  const out: Window = {};
  if (w.start) out.start = BigInt(new Date(w.start).getTime()) * 1000n;
  if (w.end) out.end = BigInt(new Date(w.end).getTime()) * 1000n;
  return out;
}

function orderTimeframe(label: OrderTimeframe): Timeframe {
  if (typeof label !== 'string') return label;
  const tf = parseTimeframe(label);
  if (!tf.ok) throw new Error(tf.message);
  return tf.value;
}

export function datasetOf(t: OrderDataType): string {
  return t === 'snapshots' ? 'top_of_book' : t;
}
