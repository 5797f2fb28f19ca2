import { timestampValue, type DuckDBValue } from '@duckdb/node-api';
import type { Query } from '../lake/duckdb.js';

/** Pieces shared by the builders. Everything here returns text built from constants; values become params. */
export type Params = Record<string, DuckDBValue>;

export function query(sql: string, params: Params): Query {
  return Object.freeze({ sql, params: Object.freeze({ ...params }) });
}

export function tsParam(micros: bigint): DuckDBValue {
  return timestampValue(micros);
}

/** YYYY-MM of an instant: the `month=` partition it lives in. */
export function monthOf(micros: bigint): string {
  return new Date(Number(micros / 1000n)).toISOString().slice(0, 7);
}

/** YYYY-MM-DD of an instant: the `date=` partition it lives in. */
export function dateOf(micros: bigint): string {
  return new Date(Number(micros / 1000n)).toISOString().slice(0, 10);
}

export const DAY_MICROS = 86_400_000_000n;

/** A time window on a column, pruned by Hive partition too (`month`/`date` compare as text). */
export type Window = { start?: bigint | undefined; end?: bigint | undefined };

export function windowWhere(col: string, w: Window, params: Params, partition: { column: 'month' | 'date'; slackDays?: number } | null): string[] {
  const where: string[] = [];
  if (w.start !== undefined) {
    where.push(`${col} >= $start`);
    params.start = tsParam(w.start);
    if (partition) {
      const p = partitionOf(partition.column, w.start - BigInt(partition.slackDays ?? 0) * DAY_MICROS);
      where.push(`${partition.column} >= $part_from`);
      params.part_from = p;
    }
  }
  if (w.end !== undefined) {
    where.push(`${col} < $end`);
    params.end = tsParam(w.end);
    if (partition) {
      const p = partitionOf(partition.column, w.end + BigInt(partition.slackDays ?? 0) * DAY_MICROS);
      where.push(`${partition.column} <= $part_to`);
      params.part_to = p;
    }
  }
  return where;
}

function partitionOf(column: 'month' | 'date', micros: bigint): string {
  return column === 'month' ? monthOf(micros) : dateOf(micros);
}

/**
 * Rows of several tokens as a UNION ALL of one scan per token. The files are sorted by token, so each
 * `token = $t` scan reads only that token's row groups; DuckDB does not prune row groups for an IN list.
 */
export function perToken(source: string, tokenCol: string, tokens: readonly string[], select: string, where: readonly string[], params: Params): string {
  if (tokens.length === 0) return `(SELECT ${select} FROM ${source} WHERE false)`;
  const parts = tokens.map((t, i) => {
    params[`token${i}`] = t;
    return `SELECT ${select} FROM ${source} WHERE ${[`${tokenCol} = $token${i}`, ...where].join(' AND ')}`;
  });
  return parts.length === 1 ? `(${parts[0]})` : `(${parts.join(' UNION ALL ')})`;
}

/** LIKE pattern matching `text` literally anywhere: the user's % and _ (and the escape) lose their meaning. */
export function containsPattern(text: string): string {
  return `%${text.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
}

/**
 * A list of bound values as a list expression (`[$<prefix>0, $<prefix>1, …]`): constant for the statement, so it
 * is built once, where `string_split` of one bound text would split it again for every row.
 */
export function boundList(values: readonly string[], params: Params, prefix: string): string {
  return `[${boundValues(values, params, prefix).join(', ')}]::VARCHAR[]`;
}

/** Each value bound as `$<prefix>0`, `$<prefix>1`, …: the placeholders, for an `IN (…)` or a list. */
export function boundValues(values: readonly string[], params: Params, prefix: string): string[] {
  return values.map((v, i) => {
    params[`${prefix}${i}`] = v;
    return `$${prefix}${i}`;
  });
}

/**
 * The raw tape's frames carrying any of `eventTypes`, as one bound condition (`$<prefix>0`, `$<prefix>1`, …);
 * null when the list is empty (every frame). The raw listing, its series figures, raw pulls and their
 * estimates all select frames this way.
 */
export function eventTypesCond(eventTypes: readonly string[], params: Params, prefix: string): string | null {
  if (eventTypes.length === 0) return null;
  const ors = eventTypes.map((t, i) => {
    params[`${prefix}${i}`] = t;
    return `list_contains(event_types, $${prefix}${i})`;
  });
  return `(${ors.join(' OR ')})`;
}
