import { z } from 'zod';
import { defineRoute, type Route, type RouteInput } from '../route.js';
import type { RequestContext } from '../context.js';
import type { Row } from '../../lake/values.js';
import { NotFound } from '../../errors.js';
import { publicMarketsQuery } from '../../query/public-markets.js';
import { MarketPath, queryBool, queryInt } from '../params.js';
import { marketOut } from '../markets/view.js';

/**
 * GET /v1/public/markets and /v1/public/markets/{market_id}: the anchor's crawlable, price-free market metadata,
 * without a key. The spec reserves keyless access to the series catalogue and statistics (lines 13, 173); issue
 * 16 adds these two routes, and they keep the spec's rule for anonymous callers: the default request limit, per IP
 * (per key when one is sent), like every other public route.
 */

const dt = z.string().nullable();

export const PublicMarketSummary = z
  .object({
    id: z.string(),
    question: z.string(),
    category: z.string().nullable(),
    // The anchor's defaults, as it states them (every field is always sent, so they never apply).
    resolved: z.boolean().meta({ default: false }),
    trade_count: z.number().int().meta({ default: 0 }),
    orderbook_count: z.number().int().meta({ default: 0 }),
  })
  .meta({ id: 'PublicMarketSummary', description: 'One row of the curated index: enough to build a link and a title.' });

export const PublicMarket = z
  .object({
    id: z.string(),
    question: z.string(),
    category: z.string().nullable(),
    outcomes: z.array(z.string()).meta({ default: ['Yes', 'No'] }),
    resolved: z.boolean().meta({ default: false }),
    winning_outcome: z.number().int().nullable(),
    winning_outcome_label: z.string().nullable().describe('outcomes[winning_outcome], when both are known'),
    resolution_date: dt,
    start_date: dt,
    end_date: dt,
    trade_count: z.number().int().meta({ default: 0 }),
    orderbook_count: z.number().int().meta({ default: 0 }),
    data_from: dt,
    data_to: dt,
  })
  .meta({ id: 'PublicMarket', description: "A single market's crawlable metadata. Deliberately price-free." });

const PublicMarketsQuery = z.object({
  limit: queryInt({ min: 1, max: 5000, default: 500 }),
  offset: queryInt({ min: 0, max: Number.MAX_SAFE_INTEGER, default: 0 }),
  resolved: queryBool.optional().describe('true = the resolution archive; false = still open'),
});

/** Both views are cut from the keyed Market object (src/http/markets/view.ts), so they cannot disagree with it. */
export function publicSummaryOut(m: Row): Row {
  const v = marketOut(m);
  return { id: v.id, question: v.question, category: v.category, resolved: v.resolved, trade_count: v.trade_count, orderbook_count: v.orderbook_count };
}

export function publicMarketOut(m: Row): Row {
  const v = marketOut(m);
  const outcomes = v.outcomes as string[];
  const w = v.winning_outcome as number | null;
  return {
    id: v.id,
    question: v.question,
    category: v.category,
    outcomes,
    resolved: v.resolved,
    winning_outcome: w,
    winning_outcome_label: w !== null && w >= 0 && w < outcomes.length ? outcomes[w]! : null,
    resolution_date: v.resolution_date,
    start_date: v.start_date,
    end_date: v.end_date,
    trade_count: v.trade_count,
    orderbook_count: v.orderbook_count,
    data_from: v.data_from,
    data_to: v.data_to,
  };
}

export const publicMarketRoutes: Route[] = [
  defineRoute({
    method: 'get',
    path: '/v1/public/markets',
    cost: 'cheap',
    auth: 'public',
    tag: 'Public',
    summary: 'The curated public index: markets with volume and data, by volume (no key needed)',
    query: PublicMarketsQuery,
    response: z.array(PublicMarketSummary),
    handler: listPublicMarkets,
  }),
  defineRoute({
    method: 'get',
    path: '/v1/public/markets/:market_id',
    cost: 'cheap',
    auth: 'public',
    tag: 'Public',
    summary: "One market's crawlable metadata (numeric id or an outcome token id; no key needed)",
    params: MarketPath,
    response: PublicMarket,
    handler: getPublicMarket,
  }),
];

async function listPublicMarkets({ query: q, res }: RouteInput<{ query: typeof PublicMarketsQuery }>, ctx: RequestContext) {
  const rows = (await ctx.lake.rows(publicMarketsQuery(ctx.lake.sources, q))).map(publicSummaryOut);
  res.locals.rows = rows.length;
  return rows;
}

async function getPublicMarket({ params, res }: RouteInput<{ params: typeof MarketPath }>, ctx: RequestContext) {
  const { market } = await ctx.markets.resolve(ctx.lake, params.market_id);
  // As the anchor: a market holding no data has no public page (its client documents the 404).
  if (Number(market.trade_count ?? 0) === 0 && Number(market.orderbook_count ?? 0) === 0) throw new NotFound('Market not found');
  res.locals.rows = 1;
  return publicMarketOut(market);
}
