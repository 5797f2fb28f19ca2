import { z } from 'zod';
import { defineRoute, type Route, type RouteInput } from '../route.js';
import type { RequestContext } from '../context.js';
import type { Row } from '../../lake/values.js';
import { replayTicksQuery } from '../../query/charts.js';
import { queryInt } from '../params.js';
import { resolveSymbol, symbolParam } from './symbol.js';
import { setNextLink } from '../next-link.js';

/**
 * GET /v1/charts/replay/ticks: one outcome's trades in [from, to] (unix seconds, both inclusive), OLDEST first
 * (replay order), paged by cursor: `next_from` is the second to resume at (null when the window is done).
 *
 * The cursor counts in whole seconds while several trades can share one, so a page never ends inside a second:
 * it is cut before the first second it cannot hold whole, and `next_from` is that second, so resuming there
 * neither repeats nor skips a trade. When the page's first second alone holds more than `limit` trades, the
 * page is that whole second (the one case where a page exceeds `limit`), and `next_from` the second after it.
 */

/** Bound on one second's trades of one token (the chain cannot fit more in a block's second). */
const ONE_SECOND_MAX = 100_000;

const unixSeconds = z.coerce.number().int().min(0).max(253_402_300_799);

const TicksQuery = z
  .object({
    symbol: symbolParam,
    from: unixSeconds.describe('UNIX seconds, inclusive'),
    to: unixSeconds.describe('UNIX seconds, inclusive'),
    limit: queryInt({ min: 1, max: 5000, default: 2000 }),
  })
  .superRefine((v, ctx) => {
    if (v.from > v.to) ctx.addIssue({ code: 'custom', path: ['from'], message: 'from must not be after to' });
  });

const Tick = z.object({
  time: z.number().int().describe('Unix seconds (the cursor unit)'),
  timestamp: z.string().meta({ format: 'date-time', description: 'Exact block time, ISO 8601 UTC' }),
  price: z.number(),
  size: z.number(),
  side: z.string(),
  id: z.string(),
});

const TicksResponse = z
  .object({
    symbol: z.string(),
    market_id: z.string(),
    outcome: z.number().int(),
    token_id: z.string(),
    from: z.number().int(),
    to: z.number().int(),
    count: z.number().int(),
    ticks: z.array(Tick),
    next_from: z.number().int().nullable().describe('Pass as `from` for the next page; null when the window is done'),
  })
  .meta({ id: 'ReplayTicksResponse' });

async function page(ctx: RequestContext, token: string, from: number, to: number, limit: number): Promise<{ ticks: Row[]; next: number | null }> {
  const lake = ctx.lake.sources;
  const w = (a: number, b: number) => ({ token, start: BigInt(a) * 1_000_000n, end: (BigInt(b) + 1n) * 1_000_000n });
  const rows = await ctx.lake.rows(replayTicksQuery(lake, w(from, to), limit + 1));
  if (rows.length <= limit) return { ticks: rows, next: null };
  // rows[limit] is the first trade left out: its second cannot be held whole, so the page stops before it.
  const cut = Number(rows[limit]!.time);
  const ticks = rows.slice(0, limit).filter((r) => Number(r.time) < cut);
  if (ticks.length > 0) return { ticks, next: cut };
  // One second holds more than `limit` trades: send it whole rather than split it (the cursor could not).
  const whole = await ctx.lake.rows(replayTicksQuery(lake, w(cut, cut), ONE_SECOND_MAX));
  return { ticks: whole, next: cut < to ? cut + 1 : null };
}

export const replayRoutes: Route[] = [
  defineRoute({
    method: 'get',
    path: '/v1/charts/replay/ticks',
    cost: 'query',
    auth: 'key',
    tag: 'Charts',
    summary: 'Trade ticks of one outcome for replay, oldest first, paged by a seconds cursor (next_from)',
    query: TicksQuery,
    response: TicksResponse,
    paged: true,
    handler: getReplayTicks,
  }),
];

async function getReplayTicks({ query: q, req, res }: RouteInput<{ query: typeof TicksQuery }>, ctx: RequestContext) {
  const s = await resolveSymbol(ctx, q.symbol);
  const { ticks, next } = await page(ctx, s.token.token_id, q.from, q.to, q.limit);
  res.locals.rows = ticks.length;
  if (next !== null) setNextLink(req, res, ctx.config, { from: next });
  return {
    symbol: s.symbol,
    market_id: String(s.resolved.market.id),
    outcome: s.token.outcome_index,
    token_id: s.token.token_id,
    from: q.from,
    to: q.to,
    count: ticks.length,
    ticks,
    next_from: next,
  };
}
