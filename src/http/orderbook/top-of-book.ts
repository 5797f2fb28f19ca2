import { z } from 'zod';
import { defineRoute, type Route, type RouteInput } from '../route.js';
import type { RequestContext } from '../context.js';
import { topOfBookCountQuery, topOfBookPageQuery } from '../../query/orderbook.js';
import { TOP_OF_BOOK_SHAPE } from '../../query/shapes.js';
import { selectTokens } from '../../markets/resolver.js';
import { sendJsonText } from '../respond.js';
import { checkWindow, isoDateTime, marketIdParam, outcomeParam, queryInt } from '../params.js';
import { delayCap } from './delay.js';
import { setNextLink } from '../next-link.js';
import { nextByTime } from '../../query/time-cursor.js';

/** GET /v1/orderbook/top_of_book: every change of best bid/ask of one outcome in a window. */

export const TopOfBookResponse = z
  .object({
    market_id: z.string().nullable().describe('The market condition id (0x…)'),
    asset_id: z.string(),
    timestamp: z.string().meta({ format: 'date-time', description: 'Venue time, ISO 8601 UTC in milliseconds (2025-09-14T00:00:00.405Z), as in the files' }),
    seq: z.string().describe('Arrival sequence number (receive ms × 1e6 + rank), as text: it exceeds 2^53'),
    best_bid: z.number().nullable(),
    best_bid_size: z.number().nullable(),
    best_ask: z.number().nullable(),
    best_ask_size: z.number().nullable(),
    mid: z.number().nullable(),
    spread: z.number().nullable(),
  })
  .meta({ id: 'TopOfBookRow' });

const TopQuery = z
  .object({
    market_id: marketIdParam,
    outcome: outcomeParam.default(0).describe('Outcome index (any outcome the market has); ignored when market_id is a token id'),
    start: isoDateTime.optional().describe('Inclusive'),
    end: isoDateTime.optional().describe('Exclusive'),
    limit: queryInt({ min: 1, max: 10_000, default: 1000 }),
    offset: queryInt({ min: 0, max: 1_000_000, default: 0 }),
  })
  .superRefine((v, ctx) => checkWindow(v, ctx));

export const topOfBookRoutes: Route[] = [
  defineRoute({
    method: 'get',
    path: '/v1/orderbook/top_of_book',
    cost: 'query',
    auth: 'key',
    tag: 'orderbook',
    summary: 'Every change of best bid/ask of one outcome in a window, oldest first',
    query: TopQuery,
    response: z.array(TopOfBookResponse),
    paged: true,
    handler: getTopOfBook,
  }),
];

async function getTopOfBook({ query: q, req, res }: RouteInput<{ query: typeof TopQuery }>, ctx: RequestContext) {
  const r = await ctx.markets.resolve(ctx.lake, q.market_id);
  const tokens = selectTokens(r, q.outcome).map((t) => t.token_id);
  let end = q.end;
  const cap = delayCap(req.principal);
  if (cap !== null && (end === undefined || end > cap)) end = cap;
  const lake = ctx.lake.sources;
  // One row more than the page says whether later changes exist.
  const rows = await ctx.lake.jsonRows(topOfBookPageQuery(lake, tokens, { start: q.start, end }, { limit: q.limit + 1, offset: q.offset }), TOP_OF_BOOK_SHAPE);
  const shown = rows.slice(0, q.limit);
  if (rows.length > q.limit) {
    // Oldest first: the rest is at or after the last change's instant (src/query/time-cursor.ts); "beyond" it is older.
    const n = await nextByTime(shown, 'asc', { offset: q.offset, bound: q.start }, (at) =>
      ctx.lake.count(topOfBookCountQuery(lake, tokens, { start: q.start, end: at })),
    );
    setNextLink(req, res, ctx.config, { start: n.at, offset: n.offset });
  }
  return sendJsonText(res, { json: `[${shown.join(',')}]`, rows: shown.length });
}
