import { z } from 'zod';
import { entitlementOf } from '../../accounts/entitlements.js';
import { fairUseStatus } from '../../accounts/fairuse.js';
import { REFERENCE_RATE_PER_MB } from '../../accounts/plans.js';
import { requestCounterFor } from '../../accounts/requests.js';
import { dailyPullTotals } from '../../state/pulls.js';
import { dailyRequestCounts, requestCountsByKey } from '../../state/usage.js';
import { Unauthorized } from '../../errors.js';
import { defineRoute, type Route, type RouteInput } from '../route.js';
import type { AppContext } from '../context.js';
import { UsageResponse } from '../account-schemas.js';

/** GET /v1/user/usage: requests, bytes and downloads per day over a period, with their reference cost. */

const MB = 1024 * 1024;
const DAY_MS = 86_400_000;

const UsageQuery = z.object({
  start_date: z.iso.date().nullish(),
  end_date: z.iso.date().nullish(),
});

type Day = { date: string; requests: number; bytes: number; mb: number; downloads: number; estimated_cost: number };

export const userUsageRoutes: Route[] = [
  defineRoute({
    method: 'get',
    path: '/v1/user/usage',
    cost: 'cheap',
    auth: 'key',
    tag: 'User',
    summary: 'Usage: requests, bytes and MB over a period (default: the current fair-use month), per day',
    query: UsageQuery,
    response: UsageResponse,
    handler: getUsage,
  }),
];

async function getUsage({ query: q, req }: RouteInput<{ query: typeof UsageQuery }>, ctx: AppContext) {
  const p = req.principal!;
  const user = await ctx.state.getUser(p.userId);
  if (!user) throw new Unauthorized();
  const ent = await entitlementOf(ctx.state, user);
  const start = q.start_date ? new Date(`${q.start_date}T00:00:00Z`) : ent.period.start;
  // end_date is inclusive (a whole day); the default ends with the fair-use period.
  const end = q.end_date ? new Date(Date.parse(`${q.end_date}T00:00:00Z`) + DAY_MS) : ent.period.end;
  // Include this very minute's requests, not only the last flushed batch.
  requestCounterFor(ctx.state).flush();
  const [fromDay, toDay] = [start.toISOString().slice(0, 10), new Date(end.getTime() - 1).toISOString().slice(0, 10)];
  const reqs = await dailyRequestCounts(ctx.state, user.id, fromDay, toDay);
  const pulls = await dailyPullTotals(ctx.state, user.id, start, end);
  const days = new Map<string, Day>();
  const day = (d: string) => {
    let e = days.get(d);
    if (!e) days.set(d, (e = { date: d, requests: 0, bytes: 0, mb: 0, downloads: 0, estimated_cost: 0 }));
    return e;
  };
  for (const r of reqs) day(r.day).requests = r.requests;
  for (const r of pulls) {
    const e = day(r.day);
    e.bytes = r.bytes;
    e.mb = round(r.bytes / MB, 6);
    e.downloads = r.downloads;
    // Reference cost at the per-MB rates: reported, not charged (pulls are included in the plan).
    const perSet = JSON.parse(r.dataset_bytes) as Record<string, number>;
    e.estimated_cost = round(
      Object.entries(perSet).reduce((s, [ds, b]) => s + (b / MB) * (REFERENCE_RATE_PER_MB[ds] ?? 1), 0),
      2,
    );
  }
  const daily = [...days.values()].sort((a, b) => a.date.localeCompare(b.date));
  const totalBytes = daily.reduce((s, d) => s + d.bytes, 0);
  return {
    user_id: user.id,
    period: {
      start: start.toISOString(),
      end: end.toISOString(),
      plan: ent.plan.id,
      fair_use: await fairUseStatus(ctx.state, user.id),
    },
    total_requests: daily.reduce((s, d) => s + d.requests, 0),
    total_bytes: totalBytes,
    total_mb: round(totalBytes / MB, 6),
    total_downloads: daily.reduce((s, d) => s + d.downloads, 0),
    estimated_cost: round(
      daily.reduce((s, d) => s + d.estimated_cost, 0),
      2,
    ),
    daily,
    requests_by_key: (await requestCountsByKey(ctx.state, user.id, fromDay, toDay)).map((r) => ({ key_id: r.key_id || null, requests: r.requests })),
  };
}

function round(x: number, digits: number): number {
  const f = 10 ** digits;
  return Math.round(x * f) / f;
}
