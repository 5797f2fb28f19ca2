import { timeframeOf } from '../../timeframe.js';
import { defineRoute, type Route, type RouteInput } from '../route.js';
import type { RequestContext } from '../context.js';
import { estimateRowsQuery } from '../../query/estimate.js';
import { MarketPath } from '../params.js';
import { bytesFor, EstimateBody, estimateCoverage, MarketEstimateResponse, pricingFor } from '../estimates.js';

/** OHLCV estimates without a timeframe size the default candles: one hour. */
const defaultTf = timeframeOf(3600);

/** POST /v1/markets/{market_id}/estimate: rows counted in the lake over the window, priced by src/http/estimates.ts. */
export const marketEstimateRoutes: Route[] = [
  defineRoute({
    method: 'post',
    path: '/v1/markets/:market_id/estimate',
    cost: 'query',
    auth: 'key',
    tag: 'markets',
    summary: 'Size of a market pull (rows and bytes counted in the lake) and what it means on your plan',
    params: MarketPath,
    body: EstimateBody.meta({ id: 'MarketEstimateRequest' }),
    response: MarketEstimateResponse,
    handler: estimateMarket,
  }),
];

async function estimateMarket({ params, body: b, req }: RouteInput<{ params: typeof MarketPath; body: typeof EstimateBody }>, ctx: RequestContext) {
  const r = await ctx.markets.resolve(ctx.lake, params.market_id);
  const tokens = (r.token ? [r.token] : r.tokens).map((t) => t.token_id);
  const w = { start: b.start ?? undefined, end: b.end ?? undefined };
  const lake = ctx.lake.sources;
  const tf = b.data_type === 'ohlcv' ? (b.timeframe ?? defaultTf) : b.data_type === 'book_snapshot_interval' ? (b.interval ?? timeframeOf(60)) : undefined;
  const row = await ctx.lake.one(estimateRowsQuery(lake, b.data_type, tokens, w, tf));
  const rows = Number(row?.rows ?? 0);
  const bytes = await bytesFor(ctx, b.data_type, rows);
  return {
    market_id: String(r.market.id),
    data_type: b.data_type,
    estimated_rows: rows,
    in_range: rows > 0,
    ...(await pricingFor(ctx, b.data_type, bytes, req.principal)),
    coverage: await estimateCoverage(ctx, b.data_type, { tokens }, w),
  };
}
