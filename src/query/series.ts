import type { Query } from '../lake/duckdb.js';
import type { Lake } from '../lake/sources.js';
import type { Timeframe } from '../timeframe.js';
import type { VenueSeriesKind } from '../catalogue/kinds.js';
import { bucketCeil, bucketFloor } from '../timeframe.js';
import { eventTypesCond, query, windowWhere, type Params, type Window } from './common.js';

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
    const cond = eventTypesCond(eventTypes, params, `e${i}_`) ?? 'true';
    return `count(DISTINCT cid) FILTER (WHERE ${cond}) AS markets_${i}`;
  });
  return query(`SELECT ${cols.join(',\n  ')}\nFROM (SELECT event_types, unnest(condition_ids) AS cid FROM ${lake.from('raw')})`, params);
}

/** Figures of the whole-venue catalogue series: every market, those with trades, and the span of data held. */
export function venueSpanQuery(lake: Lake): Query {
  return query(
    `SELECT count(*) AS catalogued_markets, count(*) FILTER (WHERE trade_count > 0) AS shoppable_markets,
  min(data_from) FILTER (WHERE trade_count > 0) AS earliest, max(data_to) FILTER (WHERE trade_count > 0) AS latest
FROM ${lake.from('markets')}`,
    {},
  );
}

/**
 * Rows a whole-venue catalogue series pull returns in a window (every token: trades, or non-empty candles of
 * the series' timeframe, counted as the series estimate counts them) and how many markets have any.
 */
export function venueRowsQuery(lake: Lake, dataType: VenueSeriesKind, w: Window, tf: Timeframe): Query {
  const params: Params = {};
  let hits: string;
  if (dataType === 'ohlcv') {
    params.step_us = BigInt(tf.seconds) * 1_000_000n;
    params.origin_us = BigInt(tf.originSeconds) * 1_000_000n;
    const ww: Window = {};
    if (w.start !== undefined) ww.start = bucketFloor(tf, w.start);
    if (w.end !== undefined) ww.end = bucketCeil(tf, w.end);
    const where = ['true', ...windowWhere('bucket', ww, params, { column: 'month' })];
    hits = `SELECT token_id, count(DISTINCT (epoch_us(bucket) - $origin_us::BIGINT) // $step_us::BIGINT) AS n
  FROM ${lake.from('candles_1m')} WHERE ${where.join(' AND ')} GROUP BY 1`;
  } else {
    const where = ['true', ...windowWhere('ts', w, params, { column: 'month' })];
    hits = `SELECT token_id, count(*) AS n FROM ${lake.from('trades')} WHERE ${where.join(' AND ')} GROUP BY 1`;
  }
  return query(
    `WITH hits AS (
  ${hits}
)
SELECT coalesce(sum(hits.n), 0)::BIGINT AS rows, count(DISTINCT t.market_id) AS markets
FROM hits LEFT JOIN ${lake.from('tokens')} t USING (token_id)`,
    params,
  );
}
