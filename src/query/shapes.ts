import { sqlIdent } from '../lake/duckdb.js';

/**
 * How a resource's rows are written, one definition per resource for the JSON API (src/lake/runner.ts
 * runJsonArray) and for its files (./downloads.ts asFile: CSV, JSON, Parquet), so an instant or a price reads the
 * same wherever the row is fetched.
 *
 * Timestamps: ISO 8601 in UTC with `Z`, at the resource's precision — whole seconds for trades and candles (block
 * times, bucket starts: `2025-09-21T23:54:00Z`, the anchor's JSON form), milliseconds for the venue's book data
 * (`2025-09-14T00:00:00.405Z`). Every value of a column has the same width, so a parser that infers one format
 * from the first value (pandas' to_datetime) reads the whole column; a finer instant would still be written whole
 * (more digits), never cut. Parquet keeps TIMESTAMP.
 *
 * Numbers: DECIMAL columns are written from their DOUBLE value, the number a JSON parser reads from the exact
 * decimal text anyway (exact for the lake's DECIMAL(10,6)/(18,6): a scaled integer below 2^53 over a power of ten
 * is correctly rounded), without the scale's padding DuckDB gives a wide DECIMAL (`68.280000`). Columns in `text`
 * are BIGINTs beyond 2^53 (tape sequence numbers): text in JSON, where a double would change them.
 */
export type TimeUnit = 's' | 'ms';

export type RowShape = {
  /** TIMESTAMP columns: ISO 8601 text at `timeUnit` in JSON and CSV. */
  timestamps?: readonly string[];
  /** Precision of `timestamps` (default 's'). */
  timeUnit?: TimeUnit;
  /** DECIMAL columns (and DECIMAL sums): written as DOUBLE. */
  decimals?: readonly string[];
  /** Lists of {price, size} book levels: their decimals as DOUBLE too. */
  levels?: readonly string[];
  /** BIGINT columns that may exceed 2^53: text in JSON. */
  text?: readonly string[];
};

export const TRADE_SHAPE: RowShape = { timestamps: ['timestamp'], timeUnit: 's', decimals: ['price', 'size', 'usd_value', 'fee'] };
export const CANDLE_SHAPE: RowShape = { timestamps: ['timestamp'], timeUnit: 's', decimals: ['open', 'high', 'low', 'close', 'volume'] };
export const BOOK_SHAPE: RowShape = { timestamps: ['timestamp'], timeUnit: 'ms', decimals: ['best_bid', 'best_ask'], levels: ['bids', 'asks'], text: ['seq'] };
export const TOP_OF_BOOK_SHAPE: RowShape = {
  timestamps: ['timestamp'],
  timeUnit: 'ms',
  decimals: ['best_bid', 'best_bid_size', 'best_ask', 'best_ask_size', 'mid', 'spread'],
  text: ['seq'],
};

/**
 * SQL for the ISO 8601 text of a TIMESTAMP expression at `unit`: `%S` then `.%g` (ms) or `.%f` (µs) — the unit's
 * digits, or more when the instant has them. With 's' it is isoFromMicros (src/lake/runner.ts) in SQL.
 */
export function isoSql(col: string, unit: TimeUnit = 's'): string {
  const us = `strftime(${col}, '%Y-%m-%dT%H:%M:%S.%fZ')`;
  const ms = `WHEN epoch_us(${col}) % 1000 = 0 THEN strftime(${col}, '%Y-%m-%dT%H:%M:%S.%gZ')`;
  if (unit === 'ms') return `CASE ${ms} ELSE ${us} END`;
  return `CASE WHEN epoch_us(${col}) % 1000000 = 0 THEN strftime(${col}, '%Y-%m-%dT%H:%M:%SZ') ${ms} ELSE ${us} END`;
}

/** A list of book levels with DOUBLE prices and sizes. */
export function levelsSql(col: string): string {
  return `list_transform(${col}, l -> {'price': CAST(l.price AS DOUBLE), 'size': CAST(l.size AS DOUBLE)})`;
}

export type ShapeTarget = 'json' | 'csv' | 'parquet';

/**
 * The `* REPLACE (…)` items that give a SELECT's columns the shape's form for one target: timestamps as text
 * (not in Parquet), decimals and levels as DOUBLE, `text` columns as VARCHAR (JSON only), levels as JSON text in
 * CSV (DuckDB's CSV rendering of a list of structs is not JSON and no CSV reader could parse it back).
 */
export function shapeReplacements(shape: RowShape, target: ShapeTarget): string[] {
  const col = sqlIdent;
  return [
    ...(target === 'parquet' ? [] : (shape.timestamps ?? []).map((c) => `${isoSql(col(c), shape.timeUnit)} AS ${col(c)}`)),
    ...(shape.decimals ?? []).map((c) => `CAST(${col(c)} AS DOUBLE) AS ${col(c)}`),
    ...(shape.levels ?? []).map((c) => `${target === 'csv' ? `CAST(to_json(${levelsSql(col(c))}) AS VARCHAR)` : levelsSql(col(c))} AS ${col(c)}`),
    ...(target === 'json' ? (shape.text ?? []).map((c) => `CAST(${col(c)} AS VARCHAR) AS ${col(c)}`) : []),
  ];
}
