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

/** Every market series id the catalogue holds (for resolving the anchor's `polymarket:` ids to them). */
export function seriesIdsQuery(lake: Lake): Query {
  return query(`SELECT series_id FROM ${lake.from('series')} ORDER BY series_id`, {});
}

/** The options series held: one per venue and underlying, with its instruments and the span of its trades. */
export function optionsSeriesQuery(lake: Lake): Query {
  return query(
    `SELECT venue, underlying, count(DISTINCT instrument_name) AS instruments, min(ts) AS earliest, max(ts) AS latest
FROM ${lake.from('options')}
GROUP BY ALL
ORDER BY venue, underlying`,
    {},
  );
}

/**
 * Markets (condition ids) each raw tape data set's frames name, one column per data set (`markets_<i>`), in one
 * scan; `datasets` gives each one's event types (empty = every frame), as the raw listing's summary does.
 */
export function rawSeriesMarketsQuery(lake: Lake, datasets: ReadonlyArray<readonly string[]>): Query {
  const params: Params = {};
  const cols = datasets.map((eventTypes, i) => {
    const cond = eventTypes.length
      ? eventTypes
          .map((t, j) => {
            params[`e${i}_${j}`] = t;
            return `list_contains(event_types, $e${i}_${j})`;
          })
          .join(' OR ')
      : 'true';
    return `count(DISTINCT cid) FILTER (WHERE ${cond}) AS markets_${i}`;
  });
  return query(`SELECT ${cols.join(',\n  ')}\nFROM (SELECT event_types, unnest(condition_ids) AS cid FROM ${lake.from('raw')})`, params);
}
