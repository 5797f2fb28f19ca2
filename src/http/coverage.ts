import { z } from 'zod';
import { defineRoute, type Route, type RouteInput } from './route.js';
import type { RequestContext } from './context.js';
import { venueCoverageQuery } from '../query/coverage.js';
import { queryInt, isoDay } from './params.js';
import { Status } from './markets/coverage.js';
import { setNextLink } from './next-link.js';

const MAX_OFFSET = 1_000_000;

/**
 * GET /v1/coverage?date=: the tape's condition on one UTC day, per market — the worst status of its tokens, like
 * Databento's per-day dataset condition — and how many markets have each status (lake/README.md
 * `coverage`, `incidents`). One market's days and incidents: GET /v1/markets/{market_id}/coverage (./markets/coverage.ts).
 */

const VenueCoverageQuery = z.object({
  date: isoDay.describe('The UTC day'),
  status: Status.optional().describe('Only markets whose (worst) status is this'),
  limit: queryInt({ min: 1, max: 10_000, default: 1000, description: 'Markets per page' }),
  offset: queryInt({ min: 0, max: MAX_OFFSET, default: 0 }),
});

export const VenueCoverageResponse = z
  .object({
    date: z.string().meta({ format: 'date' }),
    markets: z.array(
      z.object({
        market_id: z.string().nullable().describe('Null for a token the catalogue does not list (then condition_id names it)'),
        condition_id: z.string().nullable(),
        status: Status.describe('The worst of its tokens: verified < unverified < degraded < missing'),
        tokens: z.number().int(),
        seconds_verified: z.number().describe('Sum over its tokens, exact to the millisecond (at most three decimals)'),
        seconds_degraded: z.number().describe('Sum over its tokens, exact to the millisecond (at most three decimals)'),
        checkpoints_passed: z.number().int(),
        checkpoints_failed: z.number().int(),
        incidents: z.number().int().describe('Incidents that began that day'),
      }),
    ),
    total_markets: z.number().int().describe('Markets with tape that day (all statuses, before status/limit/offset)'),
    summary: z.object({ verified: z.number().int(), degraded: z.number().int(), unverified: z.number().int(), missing: z.number().int() }),
  })
  .meta({ id: 'VenueCoverageResponse' });

export const coverageRoutes: Route[] = [
  defineRoute({
    method: 'get',
    path: '/v1/coverage',
    cost: 'query',
    auth: 'key',
    tag: 'coverage',
    summary: "The tape's condition on one UTC day, per market (worst status of its tokens), and how many markets have each status",
    query: VenueCoverageQuery,
    response: VenueCoverageResponse,
    paged: true,
    handler: getVenueCoverage,
  }),
];

async function getVenueCoverage({ query: q, req, res }: RouteInput<{ query: typeof VenueCoverageQuery }>, ctx: RequestContext) {
  const all = await ctx.lake.rows(venueCoverageQuery(ctx.lake.sources, q.date));
  const summary = { verified: 0, degraded: 0, unverified: 0, missing: 0 };
  for (const m of all) summary[m.status as keyof typeof summary] += 1;
  const matching = q.status === undefined ? all : all.filter((m) => m.status === q.status);
  const shown = matching.slice(q.offset, q.offset + q.limit);
  const next = q.offset + q.limit;
  if (matching.length > next && next <= MAX_OFFSET) setNextLink(req, res, ctx.config, { offset: next });
  res.locals.rows = shown.length;
  return { date: q.date, markets: shown, total_markets: all.length, summary };
}
