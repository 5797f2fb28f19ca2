import { z } from 'zod';
import { defineRoute, type Route, type RouteInput } from './route.js';
import type { RequestContext } from './context.js';
import { sendJsonText } from './respond.js';
import { selectTokens } from '../markets/resolver.js';
import { tradesPage } from '../markets/trades-page.js';
import { checkWindow, isoDateTime, marketIdParam, outcomeParam, queryInt } from './params.js';
import { setNextLink } from './next-link.js';

export const TradeResponse = z
  .object({
    id: z.string(),
    market_id: z.string().describe('The outcome token id (not markets.id)'),
    timestamp: z.string().meta({ format: 'date-time', description: 'Block time, ISO 8601 UTC in whole seconds (2025-09-21T23:54:00Z), as in the files' }),
    block_number: z.number().int().nullable(),
    transaction_hash: z.string().nullable(),
    outcome: z.number().int().nullable(),
    outcome_label: z.string().nullable(),
    side: z.string().describe('buy or sell'),
    price: z.number(),
    size: z.number(),
    usd_value: z.number().nullable(),
    maker: z.string().nullable(),
    taker: z.string().nullable(),
    fee: z.number().nullable(),
    collateral: z.string().nullable(),
  })
  .meta({ id: 'TradeResponse' });

/** The anchor's pattern accepts BUY/SELL too; rows store lower case, so the value is lower-cased here. */
export const sideParam = z
  .string()
  .regex(/^(buy|sell)$/i, 'side must be buy or sell')
  .transform((v) => v.toLowerCase() as 'buy' | 'sell')
  .meta({ type: 'string', enum: ['buy', 'sell'] });

const TradesQuery = z
  .object({
    market_id: marketIdParam.optional(),
    start: isoDateTime.optional().describe('Inclusive'),
    end: isoDateTime.optional().describe('Exclusive'),
    outcome: outcomeParam.optional().describe('Outcome index (any outcome the market has); without market_id, trades of that outcome index in every market'),
    side: sideParam.optional(),
    limit: queryInt({ min: 1, max: 10_000, default: 100 }),
    offset: queryInt({ min: 0, max: 1_000_000, default: 0 }),
  })
  .superRefine((v, ctx) => checkWindow(v, ctx));

export const tradeRoutes: Route[] = [
  defineRoute({
    method: 'get',
    path: '/v1/trades',
    cost: 'query',
    admission: 'handler',
    auth: 'key',
    tag: 'trades',
    summary: 'Trades, newest first (any window length; start inclusive, end exclusive)',
    query: TradesQuery,
    response: z.array(TradeResponse),
    paged: true,
    handler: getTrades,
  }),
];

async function getTrades({ query: q, req, res }: RouteInput<{ query: typeof TradesQuery }>, ctx: RequestContext) {
  let tokens: string[] | undefined;
  if (q.market_id !== undefined) {
    const r = await ctx.markets.resolve(ctx.lake, q.market_id);
    tokens = selectTokens(r, q.outcome).map((t) => t.token_id);
  }
  // Only a page to compute takes a 'query' slot (route admission 'handler'); null: the client left meanwhile.
  const out = await tradesPage(ctx.lake, q, tokens, res.locals.admit);
  if (out?.next) setNextLink(req, res, ctx.config, out.next);
  return out ? sendJsonText(res, out) : undefined;
}
