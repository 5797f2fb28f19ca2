import { z } from 'zod';
import { defineRoute, type Route, type RouteInput } from '../route.js';
import type { RequestContext } from '../context.js';
import type { Json, Row } from '../../lake/values.js';
import { COVERAGE_STATUSES, coverageDaysQuery, coverageSpanQuery, incidentsQuery } from '../../query/coverage.js';
import { DAY_MICROS } from '../../query/common.js';
import { isoDay, MarketPath } from '../params.js';
import { setNextLink } from '../next-link.js';
import { coverageWindow, dayNumber } from './coverage-window.js';

/**
 * GET /v1/markets/{market_id}/coverage: the tape's coverage of one market per UTC day and outcome — how
 * much of the replayed book the venue's own `book` checkpoints proved (lake/README.md `coverage`) — and the
 * incidents of the window (`incidents`). The venue's day per market is GET /v1/coverage (../coverage.ts).
 */

/** At most a year and a day per request: coverage is one row per token and day, incidents are capped apart. */
export const MAX_COVERAGE_DAYS = 366;
const MAX_INCIDENTS = 1000;

export const Status = z.enum(COVERAGE_STATUSES);

const MarketCoverageQuery = z
  .object({
    start: isoDay
      .optional()
      .describe(
        'First UTC day (inclusive; a date-time names its UTC day); default: the last day minus 365, or the first day of the tape. Omitted, pages go back in time from the last day (Link rel="next": the days before); given without end, forward',
      ),
    end: isoDay
      .optional()
      .describe(`Last UTC day (inclusive; a date-time names its UTC day); default: the tape's last day. At most ${MAX_COVERAGE_DAYS} days from start`),
  })
  .superRefine((v, ctx) => {
    if (v.start === undefined || v.end === undefined) return;
    if (v.start > v.end) ctx.addIssue({ code: 'custom', path: ['start'], message: 'start must not be after end', input: undefined });
    else if (dayNumber(v.end) - dayNumber(v.start) >= MAX_COVERAGE_DAYS)
      ctx.addIssue({ code: 'custom', path: ['end'], message: `at most ${MAX_COVERAGE_DAYS} days from start to end`, input: undefined });
  });

const Day = z.object({
  date: z.string().meta({ format: 'date' }),
  outcome: z.number().int(),
  outcome_label: z.string().nullable(),
  token_id: z.string(),
  status: Status,
  seconds_verified: z.number(),
  seconds_degraded: z.number(),
  seconds_unverified: z.number(),
  checkpoints_passed: z.number().int(),
  checkpoints_failed: z.number().int(),
  messages: z.number().int(),
  first_recv_ts: z.string().meta({ format: 'date-time' }).nullable(),
  last_recv_ts: z.string().meta({ format: 'date-time' }).nullable(),
});

const Incident = z.object({
  token_id: z.string(),
  outcome: z.number().int(),
  kind: z.string().describe('gap, top_mismatch, off_tick, crossed, silence, disconnect, duplicate, recv_backwards, capture_disconnect'),
  from: z.string().meta({ format: 'date-time' }),
  to: z.string().meta({ format: 'date-time' }),
  seq: z.union([z.number(), z.string()]).nullable().describe('The message that revealed it (text beyond 2^53)'),
  detail: z.record(z.string(), z.unknown()).describe('Levels that differed, expected vs replayed best bid/ask, silence length (lake/README.md)'),
});

export const MarketCoverageResponse = z
  .object({
    market_id: z.string(),
    start: z.string().meta({ format: 'date' }).nullable(),
    end: z.string().meta({ format: 'date' }).nullable(),
    days: z.array(Day),
    incidents: z.array(Incident),
    incidents_truncated: z.boolean().describe(`More than ${MAX_INCIDENTS} incidents in the window: the first ones, oldest first`),
  })
  .meta({ id: 'MarketCoverageResponse' });

export const marketCoverageRoutes: Route[] = [
  defineRoute({
    method: 'get',
    path: '/v1/markets/:market_id/coverage',
    cost: 'query',
    auth: 'key',
    tag: 'coverage',
    summary: "The tape's coverage of a market per UTC day and outcome (verified / degraded / unverified / missing), with its incidents",
    params: MarketPath,
    query: MarketCoverageQuery,
    response: MarketCoverageResponse,
    paged: true,
    handler: getMarketCoverage,
  }),
];

async function getMarketCoverage(
  { query: q, params, req, res }: RouteInput<{ query: typeof MarketCoverageQuery; params: typeof MarketPath }>,
  ctx: RequestContext,
) {
  const r = await ctx.markets.resolve(ctx.lake, params.market_id);
  const tokens = r.token ? [r.token] : r.tokens;
  const byId = new Map(tokens.map((t) => [t.token_id, t]));
  const ids = tokens.map((t) => t.token_id);
  const lake = ctx.lake.sources;
  // Open ends need the tape's own first and last day.
  const span = q.start === undefined || q.end === undefined ? await ctx.lake.one(coverageSpanQuery(lake, ids)) : undefined;
  const tape = { first: (span?.first_day as string | null) ?? null, last: (span?.last_day as string | null) ?? null };
  const { start, end, next } = coverageWindow(q, tape, MAX_COVERAGE_DAYS);
  if (next) setNextLink(req, res, ctx.config, next);
  const days: Row[] = [];
  const incidents: Row[] = [];
  let truncated = false;
  if (start !== null && end !== null && start <= end) {
    for (const d of await ctx.lake.rows(coverageDaysQuery(lake, ids, start, end))) {
      const t = byId.get(d.asset_id as string)!;
      const { asset_id: _a, ...rest } = d;
      days.push({ date: rest.date!, outcome: t.outcome_index, outcome_label: t.outcome_label, token_id: t.token_id, ...rest });
    }
    const from = BigInt(Date.parse(`${start}T00:00:00Z`)) * 1000n;
    const to = BigInt(Date.parse(`${end}T00:00:00Z`)) * 1000n + DAY_MICROS;
    const rows = await ctx.lake.rows(incidentsQuery(lake, ids, from, to, MAX_INCIDENTS + 1));
    truncated = rows.length > MAX_INCIDENTS;
    for (const i of rows.slice(0, MAX_INCIDENTS)) {
      const t = byId.get(i.asset_id as string)!;
      incidents.push({
        token_id: t.token_id,
        outcome: t.outcome_index,
        kind: i.kind!,
        from: i.from_ts!,
        to: i.to_ts!,
        seq: i.seq!,
        detail: detailOf(i.detail),
      });
    }
  }
  res.locals.rows = days.length + incidents.length;
  return { market_id: String(r.market.id), start, end, days, incidents, incidents_truncated: truncated };
}

/** The incident's detail JSON text as an object; text that is not a JSON object is kept under `text`. */
function detailOf(v: Json | undefined): Json {
  if (typeof v !== 'string') return {};
  try {
    const o = JSON.parse(v) as Json;
    return o !== null && typeof o === 'object' && !Array.isArray(o) ? o : { text: v };
  } catch {
    return { text: v };
  }
}
