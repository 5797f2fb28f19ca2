import type { Query } from '../lake/duckdb.js';
import type { Lake } from '../lake/runner.js';
import { query, type Params } from './common.js';

/**
 * The series catalogue with counts computed from the markets catalogue in the same statement:
 * catalogued = markets in the series, shoppable = those with trades or book data, earliest/latest = the
 * span of data held.
 */
export function seriesQuery(lake: Lake, seriesId?: string): Query {
  const params: Params = {};
  let where = '';
  if (seriesId !== undefined) {
    where = 'WHERE s.series_id = $series_id\n';
    params.series_id = seriesId;
  }
  return query(
    `SELECT s.series_id, s.slug, s.name, s.description, s.category, s.asset_class, s.asset, s.asset_symbol, s.timeframe, s.recurrence,
  count(m.id) AS catalogued_markets,
  count(m.id) FILTER (WHERE m.trade_count > 0 OR m.orderbook_count > 0) AS shoppable_markets,
  min(m.data_from) AS earliest, max(m.data_to) AS latest
FROM ${lake.from('series')} s
LEFT JOIN (SELECT id, series_id, trade_count, orderbook_count, data_from, data_to FROM ${lake.from('markets')}) m ON m.series_id = s.series_id
${where}GROUP BY ALL
ORDER BY s.series_id`,
    params,
  );
}
