import type { Query } from '../lake/duckdb.js';
import type { Lake } from '../lake/sources.js';
import { monthOf, query, tsParam, type Params } from './common.js';

/**
 * Point-in-time market definitions (lake/README.md `market_definitions`): one row per change a source's poll
 * observed. The definition in force at t is, per source, the row with the latest valid_from <= t. The files are
 * sorted by condition id, so one market's rows are a few row groups.
 */

/** The definition's fields, in the data set's column order (not valid_from, not the bookkeeping columns). */
export const DEFINITION_FIELDS = [
  'market_id',
  'question',
  'slug',
  'outcomes',
  'outcome_token_ids',
  'tick_size',
  'min_order_size',
  'active',
  'closed',
  'accepting_orders',
  'neg_risk',
  'end_date',
  'resolved',
  'winning_outcome',
] as const;
export type DefinitionField = (typeof DEFINITION_FIELDS)[number];

/** Sources in priority order: a field Gamma states wins over CLOB's. */
export const DEFINITION_SOURCES = ['gamma', 'clob'] as const;
export type DefinitionSource = (typeof DEFINITION_SOURCES)[number];

const FIELDS = DEFINITION_FIELDS.join(', ');

/** Per source, the row in force at `asOf` (µs): the latest valid_from at or before it. */
export function definitionsAtQuery(lake: Lake, conditionId: string, asOf: bigint): Query {
  return query(
    `SELECT source, valid_from, ${FIELDS}
FROM ${lake.from('market_definitions')}
WHERE condition_id = $cid AND valid_from <= $as_of AND month <= $month
QUALIFY row_number() OVER (PARTITION BY source ORDER BY valid_from DESC) = 1
ORDER BY source`,
    { cid: conditionId, as_of: tsParam(asOf), month: monthOf(asOf) },
  );
}

/** The first instant any source's definition of the market was recorded (NULL: never). */
export function firstDefinitionQuery(lake: Lake, conditionId: string): Query {
  return query(`SELECT min(valid_from) AS first FROM ${lake.from('market_definitions')} WHERE condition_id = $cid`, { cid: conditionId });
}

export type ChangesWindow = {
  /** Inclusive, µs. */
  from?: bigint | undefined;
  /** Exclusive, µs. */
  to?: bigint | undefined;
  /** Continue after this row (the last one of the previous page). */
  after?: { at: bigint; source: string } | undefined;
  limit: number;
};

/**
 * The market's rows that differ from the row before them of the same source, in time order (then source), each
 * with that previous row (`prev`, NULL for a source's first row). A row repeating the one before it (possible
 * when a late poll file lands between two stored rows) is not a change and is skipped. The window applies to the
 * changes, the comparison to the whole history.
 */
export function definitionChangesQuery(lake: Lake, conditionId: string, w: ChangesWindow): Query {
  const params: Params = { cid: conditionId, limit: w.limit };
  const where = ['prev_fp IS DISTINCT FROM fingerprint'];
  if (w.from !== undefined) {
    where.push('valid_from >= $from');
    params.from = tsParam(w.from);
  }
  if (w.to !== undefined) {
    where.push('valid_from < $to');
    params.to = tsParam(w.to);
  }
  if (w.after !== undefined) {
    where.push('(valid_from > $after_at OR (valid_from = $after_at AND source > $after_source))');
    params.after_at = tsParam(w.after.at);
    params.after_source = w.after.source;
  }
  return query(
    `SELECT valid_from AS at, source, cur, prev FROM (
  SELECT valid_from, source, fingerprint, struct_pack(${FIELDS}) AS cur,
         lag(fingerprint) OVER w AS prev_fp, lag(struct_pack(${FIELDS})) OVER w AS prev
  FROM ${lake.from('market_definitions')}
  WHERE condition_id = $cid
  WINDOW w AS (PARTITION BY source ORDER BY valid_from)
)
WHERE ${where.join(' AND ')}
ORDER BY valid_from, source
LIMIT $limit`,
    params,
  );
}
