import type { Query } from '../lake/duckdb.js';
import type { DatasetName } from '../lake/layout.js';
import type { Lake } from '../lake/sources.js';
import { query } from './common.js';

/**
 * The lake's aggregate figures (`/v1/stats`, src/markets/stats.ts). Counts and min/max come from Parquet metadata and
 * row-group statistics, so they stay cheap on a large lake.
 */

/** Markets, the active ones (closed unknown counts as open), the resolved ones, series and outcome tokens. */
export function marketStatsQuery(lake: Lake): Query {
  return query(
    `SELECT count(*) AS markets, count(*) FILTER (WHERE active AND NOT coalesce(closed, false)) AS active,
  count(*) FILTER (WHERE resolved) AS resolved, count(DISTINCT series_id) AS series,
  coalesce(sum(len(outcome_token_ids)), 0) AS tokens
FROM ${lake.from('markets')}`,
    {},
  );
}

/** Trades and their span, first and last as epoch milliseconds. */
export function tradeSpanQuery(lake: Lake): Query {
  return query(`SELECT count(*) AS n, epoch_ms(min(ts)) AS first, epoch_ms(max(ts)) AS last FROM ${lake.from('trades')}`, {});
}

/** Rows of a data set. */
export function rowCountQuery(lake: Lake, name: DatasetName): Query {
  return query(`SELECT count(*) AS n FROM ${lake.from(name)}`, {});
}
