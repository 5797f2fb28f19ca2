import type { RowShape } from '../lake/values.js';

/**
 * How a resource's rows are written, one definition per resource for the JSON API (src/lake/session.ts
 * jsonArray) and for its files (./downloads.ts asFile: CSV, JSON, Parquet), so an instant or a price reads the
 * same wherever the row is fetched. What each part of a shape means, and the SQL that applies it, is the lake's
 * value conversion (src/lake/values.ts RowShape).
 */
export const TRADE_SHAPE: RowShape = { timestamps: ['timestamp'], timeUnit: 's', decimals: ['price', 'size', 'usd_value', 'fee'] };
export const CANDLE_SHAPE: RowShape = { timestamps: ['timestamp'], timeUnit: 's', decimals: ['open', 'high', 'low', 'close', 'volume'] };
export const BOOK_SHAPE: RowShape = { timestamps: ['timestamp'], timeUnit: 'ms', decimals: ['best_bid', 'best_ask'], levels: ['bids', 'asks'], text: ['seq'] };
export const TOP_OF_BOOK_SHAPE: RowShape = {
  timestamps: ['timestamp'],
  timeUnit: 'ms',
  decimals: ['best_bid', 'best_bid_size', 'best_ask', 'best_ask_size', 'mid', 'spread'],
  text: ['seq'],
};
