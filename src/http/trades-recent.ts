import { z } from 'zod';
import { defineRoute, type Route, type RouteInput } from './route.js';
import type { RequestContext } from './context.js';
import { sendJsonText } from './respond.js';
import { recentTradesQuery } from '../query/trades.js';
import { queryInt } from './params.js';
import { setNextLink } from './next-link.js';
import { nextByTime } from '../query/time-cursor.js';
import { TRADE_SHAPE } from '../query/shapes.js';
import { TradeResponse } from './trades.js';

/** GET /v1/trades/recent: the newest trades across all markets, the head of GET /v1/trades without market_id. */

const RecentQuery = z.object({ limit: queryInt({ min: 1, max: 100, default: 50 }) });

export const recentTradeRoutes: Route[] = [
  defineRoute({
    method: 'get',
    path: '/v1/trades/recent',
    cost: 'query',
    auth: 'key',
    tag: 'trades',
    summary: 'Newest trades across all markets (the next page continues on /v1/trades, the same list in the same order)',
    query: RecentQuery,
    response: z.array(TradeResponse),
    paged: true,
    handler: getRecentTrades,
  }),
];

async function getRecentTrades({ query: { limit }, req, res }: RouteInput<{ query: typeof RecentQuery }>, ctx: RequestContext) {
  const lake = ctx.lake.sources;
  // The newest month partition almost always holds enough rows; read older ones only when it does not. One row
  // more than the page says whether older trades exist.
  const months = ctx.lake.partitionValues('trades');
  let rows = months.length > 1 ? await ctx.lake.jsonRows(recentTradesQuery(lake, limit + 1, months[months.length - 1]), TRADE_SHAPE) : null;
  if (!rows || rows.length <= limit) rows = await ctx.lake.jsonRows(recentTradesQuery(lake, limit + 1, undefined), TRADE_SHAPE);
  const shown = rows.slice(0, limit);
  if (rows.length > limit) {
    // Recent trades are the head of /v1/trades without market_id (same rows, same order), which takes the rest.
    const n = await nextByTime(shown, 'desc', { offset: 0 }, () => Promise.resolve(0));
    setNextLink(req, res, ctx.config, { end: n.at, offset: n.offset, limit }, '/v1/trades');
  }
  return sendJsonText(res, { json: `[${shown.join(',')}]`, rows: shown.length });
}
