import type { Response } from 'express';
import { z } from 'zod';
import type { Route } from './route.js';
import { lakeSources, runCount, runJsonRows } from '../lake/runner.js';
import { sendJsonText } from './respond.js';
import { tradesCountQuery, tradesPageQuery } from '../query/trades.js';
import { TRADE_SHAPE } from '../query/shapes.js';
import { planTradePage } from '../query/trade-plan.js';
import { tradeHours, tradePartitions } from '../lake/trade-hours.js';
import type { AppContext } from './context.js';
import { PageCache } from './page-cache.js';
import { monthOf } from '../query/common.js';
import { selectTokens } from '../markets/resolver.js';
import { checkWindow, isoDateTime, marketIdParam, outcomeParam, queryInt } from './params.js';
import { setNextLink } from './next-link.js';
import { nextByTime } from './time-cursor.js';

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

/** Answered pages by request and trades file versions: 32 MB, pages of up to 2 MB (≈ 4,000 trades). */
type Page = { json: string; rows: number; next?: { end: string; offset: number } | undefined };
const pages = new PageCache<Page>(32 * 2 ** 20, 2 * 2 ** 20);

/**
 * One page of trades, and where the next one starts when more trades match (read one row beyond the page to
 * know; ./time-cursor.ts). A market's page is read from the partitions it lands in, each token from the newest
 * hours that hold the page (src/query/trade-plan.ts) — not a top-N over the whole market — and the answer is
 * kept until a trades file changes: the busiest markets' first pages are what a crowd asks for. A page still
 * deep after the plan's skipped partitions (offset ≥ DEEP_PAGE_OFFSET) takes two steps in its statement: the
 * page's keys from the narrow sort columns, then those rows in full (tradesPageQuery, src/query/trades.ts).
 */
async function tradesPage(ctx: AppContext, res: Response, q: z.infer<typeof TradesQuery>, tokens: string[] | undefined): Promise<Page | null> {
  const lakeDir = ctx.config.lakeDir;
  const parts = tradePartitions(lakeDir);
  const key = JSON.stringify([
    lakeDir,
    parts.map((p) => p.version),
    tokens ?? null,
    q.outcome ?? null,
    q.side ?? null,
    String(q.start),
    String(q.end),
    q.limit,
    q.offset,
  ]);
  const hit = pages.get(key);
  if (hit) return hit;
  // Only a page to compute takes a 'query' slot (route admission 'handler'); null: the client left meanwhile.
  if (res.locals.admit && !(await res.locals.admit())) return null;
  const page = { limit: q.limit + 1, offset: q.offset };
  const from = q.start === undefined ? undefined : monthOf(q.start);
  const to = q.end === undefined ? undefined : monthOf(q.end);
  const inWindow = parts.filter((p) => (from === undefined || p.month >= from) && (to === undefined || p.month <= to));
  const plan = tokens === undefined ? undefined : await planTradePage(tradeHours(ctx.db, lakeDir, inWindow, tokens, q.side), q, page);
  const f = { tokens, outcome: q.outcome, side: q.side, start: q.start, end: q.end, plan };
  const lake = lakeSources(lakeDir);
  const rows = await runJsonRows(ctx.db, tradesPageQuery(lake, f, page), TRADE_SHAPE);
  const shown = rows.slice(0, q.limit);
  let next: Page['next'];
  if (rows.length > q.limit) {
    // Newest first: the rest is at or before the last trade's instant (./time-cursor.ts); "beyond" it is newer.
    const n = await nextByTime(shown, 'desc', { offset: q.offset, bound: q.end }, (at) => runCount(ctx.db, tradesCountQuery(lake, { ...f, start: at })));
    next = { end: n.at, offset: n.offset };
  }
  const out: Page = { json: `[${shown.join(',')}]`, rows: shown.length, next };
  pages.set(key, out);
  return out;
}

export const tradeRoutes: Route[] = [
  {
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
    handler: async (req, res, ctx) => {
      const q = res.locals.query as z.infer<typeof TradesQuery>;
      let tokens: string[] | undefined;
      if (q.market_id !== undefined) {
        const r = await ctx.markets.resolve(q.market_id);
        tokens = selectTokens(r, q.outcome).map((t) => t.token_id);
      }
      const out = await tradesPage(ctx, res, q, tokens);
      if (out?.next) setNextLink(req, res, ctx.config, out.next);
      return out ? sendJsonText(res, out) : undefined;
    },
  },
];
