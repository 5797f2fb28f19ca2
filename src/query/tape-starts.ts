import { sqlString, type Query } from '../lake/duckdb.js';
import { boundList, query, tsParam, type Params } from './common.js';

/**
 * Of the given tokens, those the lake holds nothing of at or before `atUs` — no trade, no stored book, no level
 * update — read from the catalogue's per-token stats (`catalog/token_stats`: `lo` the first trade or snapshot time,
 * `l2_lo` the first level update's receive time), one small file. A token absent from them has no data at all.
 * `files` are the version's token_stats files (the lake's own paths, written as literals like every file list).
 */
export function tokensStartingAfterQuery(files: readonly string[], tokens: readonly string[], atUs: bigint): Query {
  const params: Params = { at: tsParam(atUs) };
  const ids = boundList(tokens, params, 'tok');
  const sql = `SELECT t.token AS token_id FROM unnest(${ids}) t(token)
  WHERE NOT EXISTS (SELECT 1 FROM read_parquet([${files.map(sqlString).join(', ')}]) s
                    WHERE s.token_id = t.token AND (s.lo <= $at OR s.l2_lo <= $at))`;
  return query(sql, params);
}
