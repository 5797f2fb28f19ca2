import type { Query } from '../lake/duckdb.js';
import type { Lake } from '../lake/sources.js';
import { query } from './common.js';

/**
 * The tokens the recorder subscribes to: every token of a market that is neither closed nor resolved, from the
 * market's own token list and from the tokens data set (a catalogue may fill either). A market whose flags are
 * unknown (NULL) counts as live: recording a quiet token costs little, missing a live one loses its history.
 */
export function liveTokensQuery(lake: Lake): Query {
  const live = 'coalesce(m.closed, false) = false AND coalesce(m.resolved, false) = false';
  return query(
    `SELECT DISTINCT token_id FROM (
  SELECT unnest(m.outcome_token_ids) AS token_id FROM ${lake.from('markets')} m WHERE ${live}
  UNION ALL
  SELECT t.token_id FROM ${lake.from('tokens')} t JOIN ${lake.from('markets')} m ON m.id = t.market_id WHERE ${live}
) WHERE token_id IS NOT NULL AND token_id <> ''
ORDER BY token_id`,
    {},
  );
}

/**
 * The live two-outcome markets with their tokens, tick and catalogue names, most traded first: what the demo's simulated venue keeps
 * trading so the demo lake goes on growing for the markets it already shows.
 */
export function liveMarketsQuery(lake: Lake, limit: number): Query {
  return query(
    `SELECT condition_id, outcome_token_ids AS tokens, coalesce(tick_size, 0.01)::VARCHAR AS tick,
  CASE WHEN NOT id_derived THEN id END AS id, question, slug, event_id, series_id, category
FROM ${lake.from('markets')} m
WHERE coalesce(m.closed, false) = false AND coalesce(m.resolved, false) = false
  AND len(m.outcome_token_ids) = 2 AND condition_id IS NOT NULL
ORDER BY trade_count DESC NULLS LAST, id
LIMIT $limit`,
    { limit },
  );
}
