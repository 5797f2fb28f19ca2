import { z } from 'zod';
import { defineRoute, type Route, type RouteInput } from '../route.js';
import type { RequestContext } from '../context.js';
import { listMarketsQuery } from '../../query/markets.js';
import { marketTickQuery } from '../../query/charts.js';
import { queryInt } from '../params.js';
import { INTRADAY_MULTIPLIERS, resolveSymbol, SUPPORTED_RESOLUTIONS, symbolOf, symbolParam } from './symbol.js';
import { tokensOf } from '../../markets/resolver.js';

/** TradingView UDF datafeed: config, time, symbols, search (history is ./history.ts). */

const EXCHANGE = 'Polymarket';
const TYPE = 'prediction';

const UdfConfig = z.object({}).catchall(z.unknown()).meta({ id: 'UdfConfig' });
const SearchQuery = z.object({
  query: z.string().max(1000).default('').describe('Free-text query over market questions (case-insensitive substring)'),
  limit: queryInt({ min: 1, max: 50, default: 30 }),
});
const SymbolsQuery = z.object({ symbol: symbolParam });

/**
 * Price scale from the tick: 0.01 → 100, 0.001 → 1000. Without a known tick, 1000: it shows the digits of
 * either venue tick (a 0.01 market then prints one trailing zero, nothing is hidden).
 */
function priceScale(tick: number | null): number {
  if (tick === null || !(tick > 0) || tick >= 1) return 1000;
  return Math.min(1_000_000, 10 ** Math.ceil(-Math.log10(tick) - 1e-9));
}

export const udfRoutes: Route[] = [
  defineRoute({
    method: 'get',
    path: '/v1/charts/udf/config',
    cost: 'cheap',
    auth: 'public',
    tag: 'Charts',
    summary: 'UDF datafeed configuration (resolutions, search, server time)',
    response: UdfConfig,
    handler: getUdfConfig,
  }),
  defineRoute({
    method: 'get',
    path: '/v1/charts/udf/time',
    cost: 'cheap',
    auth: 'public',
    tag: 'Charts',
    summary: 'Server time in unix seconds (a bare JSON integer)',
    response: z.number().int(),
    // Seconds, not milliseconds: the library places the "now" line with it.
    handler: getUdfTime,
  }),
  defineRoute({
    method: 'get',
    path: '/v1/charts/udf/symbols',
    cost: 'cheap',
    auth: 'key',
    tag: 'Charts',
    summary: 'UDF symbol info of a market outcome; unknown market → 404',
    query: SymbolsQuery,
    response: UdfConfig,
    handler: getUdfSymbol,
  }),
  defineRoute({
    method: 'get',
    path: '/v1/charts/udf/search',
    cost: 'cheap',
    auth: 'key',
    tag: 'Charts',
    summary: 'UDF symbol search over market questions, most traded first',
    query: SearchQuery,
    response: z.array(UdfConfig),
    handler: searchUdfSymbols,
  }),
];

async function getUdfConfig() {
  return {
    supported_resolutions: SUPPORTED_RESOLUTIONS,
    supports_search: true,
    supports_group_request: false,
    supports_marks: false,
    supports_timescale_marks: false,
    supports_time: true,
    exchanges: [{ value: EXCHANGE, name: EXCHANGE, desc: 'Polymarket prediction markets' }],
    symbols_types: [{ name: 'Prediction market', value: TYPE }],
  };
}

async function getUdfTime() {
  return Math.floor(Date.now() / 1000);
}

async function getUdfSymbol({ query: q }: RouteInput<{ query: typeof SymbolsQuery }>, ctx: RequestContext) {
  const s = await resolveSymbol(ctx, q.symbol);
  const marketId = String(s.resolved.market.id);
  const tick = await ctx.lake.one(marketTickQuery(ctx.lake.sources, marketId));
  const question = String(s.resolved.market.question ?? marketId);
  return {
    name: s.symbol,
    ticker: s.symbol,
    full_name: `${EXCHANGE}:${s.symbol}`,
    description: s.token.outcome_label ? `${question} — ${s.token.outcome_label}` : question,
    type: TYPE,
    exchange: EXCHANGE,
    listed_exchange: EXCHANGE,
    session: '24x7',
    timezone: 'Etc/UTC',
    format: 'price',
    minmov: 1,
    pricescale: priceScale(typeof tick?.tick === 'number' ? tick.tick : null),
    has_intraday: true,
    has_daily: true,
    has_weekly_and_monthly: true,
    has_empty_bars: false,
    supported_resolutions: SUPPORTED_RESOLUTIONS,
    intraday_multipliers: INTRADAY_MULTIPLIERS,
    daily_multipliers: ['1', '2', '3'],
    weekly_multipliers: ['1', '2', '4'],
    volume_precision: 2,
    visible_plots_set: 'ohlcv',
    // pmlake's own keys, for a client that wants the API's ids.
    market_id: marketId,
    outcome: s.token.outcome_index,
    token_id: s.token.token_id,
  };
}

async function searchUdfSymbols({ query: q }: RouteInput<{ query: typeof SearchQuery }>, ctx: RequestContext) {
  // Most traded first (the anchor's order): the catalogue's `trades` sort, ties by id.
  const rows = await ctx.lake.rows(listMarketsQuery(ctx.lake.sources, { search: q.query, sortBy: 'trades', limit: q.limit, offset: 0 }));
  return rows.map((m) => {
    const id = String(m.id);
    const first = tokensOf(m)[0];
    const question = String(m.question ?? id);
    return {
      symbol: symbolOf(id, 0),
      full_name: `${EXCHANGE}:${symbolOf(id, 0)}`,
      description: first?.outcome_label ? `${question} — ${first.outcome_label}` : question,
      exchange: EXCHANGE,
      ticker: symbolOf(id, 0),
      type: TYPE,
      market_id: id,
    };
  });
}
