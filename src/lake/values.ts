import {
  DuckDBArrayValue,
  DuckDBDateValue,
  DuckDBDecimalValue,
  DuckDBListValue,
  DuckDBMapValue,
  DuckDBStructValue,
  DuckDBTimestampTZValue,
  DuckDBTimestampValue,
  type DuckDBValue,
} from '@duckdb/node-api';
import { sqlIdent } from './duckdb.js';

/**
 * How the lake's values reach JSON: DuckDB values read back as row objects (DECIMAL and BIGINT → number — a
 * BIGINT beyond 2^53 → decimal text — TIMESTAMP → ISO 8601 with `Z` (isoFromMicros), lists and structs → arrays
 * and objects), and the SQL that gives a resource's columns one written form (`RowShape`) for JSON text and files.
 */
export type Json = null | boolean | number | string | Json[] | { [k: string]: Json };
export type Row = Record<string, Json>;

export function toJsonRow(r: Record<string, DuckDBValue>): Row {
  const out: Row = {};
  for (const k of Object.keys(r)) out[k] = toJson(r[k]!);
  return out;
}

const MAX_SAFE = BigInt(Number.MAX_SAFE_INTEGER);

export function toJson(v: DuckDBValue): Json {
  if (v === null || v === undefined) return null;
  switch (typeof v) {
    case 'string':
    case 'boolean':
      return v;
    case 'number':
      return Number.isFinite(v) ? v : null;
    case 'bigint':
      // Beyond 2^53 a double would silently change the value (tape seq numbers are ~1.7e18): send text.
      return v <= MAX_SAFE && v >= -MAX_SAFE ? Number(v) : v.toString();
    default:
  }
  if (v instanceof DuckDBDecimalValue) return decimalToNumber(v.value, v.scale);
  if (v instanceof DuckDBTimestampValue || v instanceof DuckDBTimestampTZValue) return isoFromMicros(v.micros);
  if (v instanceof DuckDBDateValue) return v.toString();
  if (v instanceof DuckDBListValue || v instanceof DuckDBArrayValue) return v.items.map(toJson);
  if (v instanceof DuckDBStructValue) {
    const o: Record<string, Json> = {};
    for (const [k, x] of Object.entries(v.entries)) o[k] = toJson(x);
    return o;
  }
  if (v instanceof DuckDBMapValue) return v.entries.map((e) => ({ key: toJson(e.key), value: toJson(e.value) }));
  return String(v);
}

/** Exact for the lake's decimals: an integer divided by a power of ten is correctly rounded in IEEE 754. */
export function decimalToNumber(scaled: bigint, scale: number): number {
  return Number(scaled) / 10 ** scale;
}

/** `2025-03-02T09:27:55Z`, with `.123` or `.123456` only when the instant has sub-second digits (isoSql at 's'). */
export function isoFromMicros(micros: bigint): string {
  const ms = micros / 1000n - (micros % 1000n < 0n ? 1n : 0n);
  const sub = Number(micros - ms * 1000n);
  const base = new Date(Number(ms)).toISOString(); // YYYY-MM-DDTHH:MM:SS.mmmZ
  const msPart = base.slice(20, 23);
  if (sub !== 0) return `${base.slice(0, 19)}.${msPart}${String(sub).padStart(3, '0')}Z`;
  if (msPart !== '000') return base;
  return `${base.slice(0, 19)}Z`;
}

// ---------------------------------------------------------------------------------------------------------
// Row shapes: one written form per resource (src/query/shapes.ts declares them) for JSON text and files.

/**
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

/**
 * SQL for the ISO 8601 text of a TIMESTAMP expression at `unit`: `%S` then `.%g` (ms) or `.%f` (µs) — the unit's
 * digits, or more when the instant has them. With 's' it is isoFromMicros in SQL.
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
