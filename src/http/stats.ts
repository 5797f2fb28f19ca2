import { StampedCache } from '../lake/stamp.js';
import { computeStats, type LakeStats } from '../markets/stats.js';
import { defineRoute, type Route, type RouteInput } from './route.js';
import type { RequestContext } from './context.js';

/**
 * GET /v1/stats: public aggregate statistics of the lake (src/markets/stats.ts), cached per lake stamp
 * (src/lake/stamp.ts: a new ingest shows at once) and for at most a minute; concurrent misses share one
 * computation. Exempt from rate limiting, like /health.
 */
const TTL_MS = 60_000;

const cache = new StampedCache<LakeStats>({ maxEntries: 16, maxAgeMs: TTL_MS });

export const statsRoutes: Route[] = [
  defineRoute({
    method: 'get',
    path: '/v1/stats',
    cost: 'cheap',
    auth: 'public',
    limit: 'none',
    tag: 'System',
    summary: 'Public aggregate statistics: markets, trades, tokens, data span (cached for a minute)',
    handler: getStats,
  }),
];

async function getStats({ res }: RouteInput, ctx: RequestContext) {
  const now = Date.now();
  const { value: stats, at } = await cache.get(ctx.lake, 'stats', () => computeStats(ctx.lake));
  res.setHeader('Cache-Control', `public, max-age=${Math.max(0, Math.ceil((at + TTL_MS - now) / 1000))}`);
  return { ...stats, generated_at: new Date(at).toISOString(), cached_until: new Date(at + TTL_MS).toISOString() };
}
