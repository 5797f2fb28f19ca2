import type { Query } from '../lake/duckdb.js';
import type { Lake } from '../lake/sources.js';
import type { MarketFilterKind } from '../catalogue/kinds.js';
import { containsPattern, eventTypesCond, perToken, query, tsParam, type Params } from './common.js';

/** The Market object's columns, in the seed's field order (plus condition_id, to link order-book rows). */
export const MARKET_COLUMNS = `id, event_id, question, description, outcomes, outcome_prices, outcome_token_ids, active, closed, resolved,
  winning_outcome, resolution_date, volume, volume_24h, liquidity, start_date, end_date, trade_count, orderbook_count,
  data_from, data_to, category, condition_id, series_id`;

/** The anchor's sort_by values; every sort is descending, ties broken by id so pages are stable. */
export const SORT_BY = ['top', 'newest_data', 'volume', 'trades', 'orderbook', 'created', 'end_date'] as const;
export type SortBy = (typeof SORT_BY)[number];

const ORDER: Readonly<Record<SortBy, string>> = {
  top: 'coalesce(trade_count, 0) + coalesce(orderbook_count, 0) DESC, volume DESC NULLS LAST',
  newest_data: 'data_to DESC NULLS LAST',
  volume: 'volume DESC NULLS LAST',
  trades: 'trade_count DESC NULLS LAST',
  orderbook: 'orderbook_count DESC NULLS LAST',
  created: 'created_at DESC NULLS LAST',
  end_date: 'end_date DESC NULLS LAST',
};

/**
 * The markets a series id names on GET /v1/markets: a stored market series (its slug), every market (the
 * anchor's venue-wide catalogue series, which count every market), the markets whose condition ids a raw tape
 * data set's frames carry (as its catalogued_markets counts them), or none (options series, whose markets are
 * instruments, and the catalogue series pmlake does not serve).
 */
export type MarketSeriesScope = { seriesId: string } | { all: true } | { rawEventTypes: readonly string[] } | { none: true };

export type MarketListFilter = {
  active?: boolean | undefined;
  closed?: boolean | undefined;
  resolved?: boolean | undefined;
  search?: string | undefined;
  category?: string | undefined;
  series?: MarketSeriesScope | undefined;
  /** true: only markets with trades or book data. false / unset: no filter (as the anchor's clients expect). */
  hasData?: boolean | undefined;
  dataType?: MarketFilterKind | undefined;
  endingAfter?: bigint | undefined;
  endingBefore?: bigint | undefined;
  sortBy?: SortBy | undefined;
  limit: number;
  offset: number;
};

export function listMarketsQuery(lake: Lake, f: MarketListFilter): Query {
  const where: string[] = [];
  const params: Params = {};
  for (const k of ['active', 'closed', 'resolved'] as const) {
    if (f[k] !== undefined) {
      where.push(`${k} = $${k}`);
      params[k] = f[k]!;
    }
  }
  if (f.search !== undefined && f.search !== '') {
    where.push(`question ILIKE $search ESCAPE '\\'`);
    params.search = containsPattern(f.search);
  }
  if (f.category !== undefined) {
    where.push('lower(category) = lower($category)');
    params.category = f.category;
  }
  const series = f.series;
  if (series && 'seriesId' in series) {
    where.push('series_id = $series_id');
    params.series_id = series.seriesId;
  } else if (series && 'rawEventTypes' in series) {
    const types = eventTypesCond(series.rawEventTypes, params, 'raw_e');
    where.push(`condition_id IN (SELECT unnest(condition_ids) FROM ${lake.from('raw')}${types ? ` WHERE ${types}` : ''})`);
  } else if (series && 'none' in series) {
    where.push('false');
  }
  if (f.dataType === 'trades' || f.dataType === 'ohlcv') where.push('trade_count > 0');
  else if (f.dataType === 'orderbook') where.push('orderbook_count > 0');
  else if (f.hasData === true) where.push('(trade_count > 0 OR orderbook_count > 0)');
  if (f.endingAfter !== undefined) {
    where.push('end_date >= $ending_after');
    params.ending_after = tsParam(f.endingAfter);
  }
  if (f.endingBefore !== undefined) {
    where.push('end_date <= $ending_before');
    params.ending_before = tsParam(f.endingBefore);
  }
  const sort = listSort(f);
  params.limit = f.limit;
  params.offset = f.offset;
  const sql = `SELECT ${MARKET_COLUMNS}
FROM ${lake.from('markets')}
${where.length ? `WHERE ${where.join('\n  AND ')}\n` : ''}ORDER BY ${ORDER[sort]}, id
LIMIT $limit OFFSET $offset`;
  return query(sql, params);
}

/** A list's order: its sort_by, else end_date within a series, else top. */
export function listSort(f: Pick<MarketListFilter, 'sortBy' | 'series'>): SortBy {
  return f.sortBy ?? (f.series !== undefined ? 'end_date' : 'top');
}

/**
 * The whole catalogue, for the market list answered from memory (src/markets/catalogue.ts): the Market columns,
 * end_date as exact microseconds (text: a far date exceeds 2^53) and each row's place under every sort_by,
 * ranked by DuckDB with listMarketsQuery's own ORDER BY — so a page from memory is the page that query returns.
 */
export function marketCatalogueQuery(lake: Lake): Query {
  const ranks = SORT_BY.map((s) => `row_number() OVER (ORDER BY ${ORDER[s]}, id) AS rank_${s}`);
  return query(`SELECT ${MARKET_COLUMNS}, epoch_us(end_date)::VARCHAR AS end_us,\n  ${ranks.join(',\n  ')}\nFROM ${lake.from('markets')}`, {});
}

/** The condition ids a raw tape data set's frames name (listMarketsQuery's raw series scope, as a set). */
export function rawConditionIdsQuery(lake: Lake, eventTypes: readonly string[]): Query {
  const params: Params = {};
  const types = eventTypesCond(eventTypes, params, 'raw_e');
  return query(
    `SELECT DISTINCT cid FROM (SELECT unnest(condition_ids) AS cid FROM ${lake.from('raw')}${types ? ` WHERE ${types}` : ''}) WHERE cid IS NOT NULL`,
    params,
  );
}

export function marketByIdQuery(lake: Lake, id: string): Query {
  return query(`SELECT ${MARKET_COLUMNS} FROM ${lake.from('markets')} WHERE id = $id LIMIT 1`, { id });
}

/** A token's market through catalog/tokens (sorted by token_id, so this reads one row group). */
export function marketByTokenQuery(lake: Lake, tokenId: string): Query {
  return query(
    `SELECT ${MARKET_COLUMNS} FROM ${lake.from('markets')}
WHERE id = (SELECT market_id FROM ${lake.from('tokens')} WHERE token_id = $token LIMIT 1)
LIMIT 1`,
    { token: tokenId },
  );
}

/** Fallback when catalog/tokens lacks the token: search the markets' own outcome_token_ids lists. */
export function marketByTokenListQuery(lake: Lake, tokenId: string): Query {
  return query(`SELECT ${MARKET_COLUMNS} FROM ${lake.from('markets')} WHERE list_contains(outcome_token_ids, $token) LIMIT 1`, {
    token: tokenId,
  });
}

export function seriesExistsQuery(lake: Lake, seriesId: string): Query {
  return query(`SELECT count(*) AS n FROM ${lake.from('series')} WHERE series_id = $series_id`, { series_id: seriesId });
}

/** Per-token trade figures of a market for /stats, all time (no sampling). */
export function marketTradeStatsQuery(lake: Lake, tokens: readonly string[]): Query {
  const params: Params = {};
  const rows = perToken(lake.from('trades'), 'token_id', tokens, 'token_id, ts, price, size, usd_value', [], params);
  return query(
    `SELECT token_id, count(*) AS trade_count, sum(size) AS volume, sum(usd_value) AS usd_volume,
  min(price) AS min_price, max(price) AS max_price, min(ts) AS first_trade, max(ts) AS last_trade
FROM ${rows} t
GROUP BY token_id`,
    params,
  );
}

export function marketBookStatsQuery(lake: Lake, tokens: readonly string[]): Query {
  const params: Params = {};
  const rows = perToken(lake.from('book_snapshots'), 'asset_id', tokens, 'asset_id, ts', [], params);
  return query(
    `SELECT asset_id, count(*) AS snapshot_count, min(ts) AS first_snapshot, max(ts) AS last_snapshot
FROM ${rows} b
GROUP BY asset_id`,
    params,
  );
}

/** The market with the most trades (ties by id): the demo's printed example call returns candles for it. */
export function busiestMarketQuery(lake: Lake): Query {
  return query(`SELECT id FROM ${lake.from('markets')} WHERE trade_count > 0 ORDER BY trade_count DESC, id LIMIT 1`, {});
}
