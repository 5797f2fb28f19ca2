import { z } from 'zod';
import { defineRoute, type Route, type RouteInput } from '../route.js';
import type { RequestContext } from '../context.js';
import { udfBarsQuery } from '../../query/charts.js';
import { ServiceError } from '../../errors.js';
import { bucketCeil } from '../../timeframe.js';
import { parseResolution, resolveSymbol, symbolParam } from './symbol.js';

/**
 * GET /v1/charts/udf/history: UDF bars, oldest first.
 *
 * Bars are the ones whose start lies in [from, to] (both inclusive, as the anchor documents them). With
 * `countback` (it takes priority over `from`, as in the anchor and the UDF spec) the newest `countback` bars
 * starting at or before `to`. With no bar, `{s:"no_data", nextTime}`: nextTime is the start of the newest bar
 * before the window, absent when there is none. Failures past parameter parsing (unknown symbol, a resolution
 * pmlake cannot bucket, from after to) are answered UDF-style, 200 with `{s:"error", errmsg}`, as the anchor
 * does: the charting library ignores HTTP statuses. A parameter of the wrong type is still a 422.
 */

/** Bars per answer at most (the OHLCV limit's maximum); the library pages back with an earlier `to`. */
export const MAX_BARS = 10_000;

// Unix seconds; bounded so that microseconds stay exact in a JS number and inside DuckDB's timestamp range.
const unixSeconds = z.coerce.number().int().min(-62_135_596_800).max(253_402_300_799);

const HistoryQuery = z.object({
  symbol: symbolParam,
  resolution: z.string().min(1).max(16).describe('UDF resolution: N minutes (1, 5, 60, 240, …), NS seconds, ND / D days, NW / W weeks'),
  from: unixSeconds.describe('UNIX seconds, inclusive'),
  to: unixSeconds.describe('UNIX seconds, inclusive'),
  countback: z.coerce.number().int().min(1).optional().describe(`Bars requested, takes priority over \`from\` (at most ${MAX_BARS} are returned)`),
});

type Bar = { t: number; o: number; h: number; l: number; c: number; v: number };

export const historyRoutes: Route[] = [
  defineRoute({
    method: 'get',
    path: '/v1/charts/udf/history',
    cost: 'query',
    auth: 'key',
    tag: 'Charts',
    summary: 'UDF bars at any resolution, oldest first: {s:"ok",t,o,h,l,c,v} | {s:"no_data",nextTime} | {s:"error",errmsg}',
    query: HistoryQuery,
    response: z.object({ s: z.enum(['ok', 'no_data', 'error']) }).catchall(z.unknown()),
    handler: getHistory,
  }),
];

async function getHistory({ query: q, res }: RouteInput<{ query: typeof HistoryQuery }>, ctx: RequestContext) {
  const tf = parseResolution(q.resolution);
  if (!tf) return { s: 'error', errmsg: `unsupported resolution ${q.resolution}: use N (minutes), NS, ND or NW between 1S and 4W` };
  if (q.countback === undefined && q.from > q.to) return { s: 'error', errmsg: 'from is after to' };
  let token;
  try {
    token = (await resolveSymbol(ctx, q.symbol)).token;
  } catch (e) {
    if (e instanceof ServiceError) return { s: 'error', errmsg: typeof e.detail === 'string' ? e.detail : e.message };
    throw e;
  }
  const lake = ctx.lake.sources;
  const req = { token: token.token_id, outcome: token.outcome_index, timeframe: tf };
  const toUs = BigInt(q.to) * 1_000_000n;
  // end just past `to`: the OHLCV window widens it to the end of the bar holding `to`, so a bar starting at
  // `to` is in; start rounded up to a bar boundary: a bar starting before `from` is out.
  const end = toUs + 1n;
  const start = q.countback === undefined ? bucketCeil(tf, BigInt(q.from) * 1_000_000n) : undefined;
  const limit = Math.min(q.countback ?? MAX_BARS, MAX_BARS);
  const rows = (await ctx.lake.rows(udfBarsQuery(lake, { ...req, start, end }, limit))) as Bar[];
  res.locals.rows = rows.length;
  if (rows.length === 0) {
    if (start === undefined) return { s: 'no_data' };
    const before = (await ctx.lake.rows(udfBarsQuery(lake, { ...req, end: start }, 1))) as Bar[];
    return before[0] ? { s: 'no_data', nextTime: before[0].t } : { s: 'no_data' };
  }
  rows.reverse();
  return {
    s: 'ok',
    t: rows.map((b) => b.t),
    o: rows.map((b) => b.o),
    h: rows.map((b) => b.h),
    l: rows.map((b) => b.l),
    c: rows.map((b) => b.c),
    v: rows.map((b) => b.v),
  };
}
