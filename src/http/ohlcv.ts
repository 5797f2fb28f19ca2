import { z } from 'zod';
import { defineRoute, type Route, type RouteInput } from './route.js';
import type { RequestContext } from './context.js';
import { sendJsonText } from './respond.js';
import { ohlcvPageQuery } from '../query/ohlcv.js';
import { CANDLE_SHAPE } from '../query/shapes.js';
import { selectTokens } from '../markets/resolver.js';
import { checkWindow, isoDateTime, marketIdParam, outcomeParam, queryInt, timeframeParam } from './params.js';
import { NotFound } from '../errors.js';
import { setNextLink } from './next-link.js';

export const OHLCVResponse = z
  .object({
    market_id: z.string().describe('The outcome token id'),
    outcome: z.number().int().nullable(),
    timestamp: z.string().meta({ format: 'date-time', description: 'Bucket start, ISO 8601 UTC in whole seconds (2025-09-21T23:54:00Z), as in the files' }),
    open: z.number(),
    high: z.number(),
    low: z.number(),
    close: z.number(),
    volume: z.number(),
    trade_count: z.number().int(),
  })
  .meta({ id: 'OHLCVResponse' });

const OhlcvQuery = z
  .object({
    market_id: marketIdParam,
    outcome: outcomeParam.default(0).describe('Outcome index (0 = first, e.g. Yes/Up; any outcome the market has); ignored when market_id is a token id'),
    timeframe: timeframeParam
      .prefault('1h')
      .describe(
        'Any whole number of s, m, h, d or w up to 4w (30s, 1m, 7m, 2h, 12h, 1d, 1w, …). Buckets are aligned to UTC multiples of the interval since 1970-01-01; weeks start Monday 00:00 UTC.',
      ),
    start: isoDateTime.optional().describe('Buckets overlapping [start, end) are returned whole'),
    end: isoDateTime.optional(),
    limit: queryInt({ min: 1, max: 10_000, default: 500, description: 'Max bars to return (newest first)' }),
  })
  .superRefine((v, ctx) => checkWindow(v, ctx));

export const ohlcvRoutes: Route[] = [
  defineRoute({
    method: 'get',
    path: '/v1/trades/ohlcv',
    cost: 'query',
    auth: 'key',
    tag: 'trades',
    summary: 'OHLCV candles of one outcome at any timeframe, newest first; empty buckets omitted',
    query: OhlcvQuery,
    response: z.array(OHLCVResponse),
    paged: true,
    handler: getOhlcv,
  }),
];

async function getOhlcv({ query: q, req, res }: RouteInput<{ query: typeof OhlcvQuery }>, ctx: RequestContext) {
  const r = await ctx.markets.resolve(ctx.lake, q.market_id);
  const [token] = selectTokens(r, q.outcome);
  if (!token) throw new NotFound('Market has no outcome tokens');
  // One bar more than the page says whether older bars exist.
  const rows = await ctx.lake.jsonRows(
    ohlcvPageQuery(ctx.lake.sources, { token: token.token_id, outcome: token.outcome_index, timeframe: q.timeframe, start: q.start, end: q.end }, q.limit + 1),
    {
      ...CANDLE_SHAPE,
      // The builder selects these two bound values first; every row carries the same ones.
      constants: [
        ['market_id', token.token_id],
        ['outcome', token.outcome_index],
      ],
    },
  );
  const shown = rows.slice(0, q.limit);
  if (rows.length > q.limit) {
    // Bars are newest first, one per bucket: the rest are the buckets before the last one shown, and `end` at a
    // bucket's start is not widened (a bucket boundary is its own ceiling).
    const last = JSON.parse(shown[shown.length - 1]!) as { timestamp: string };
    setNextLink(req, res, ctx.config, { end: last.timestamp });
  }
  return sendJsonText(res, { json: `[${shown.join(',')}]`, rows: shown.length });
}
