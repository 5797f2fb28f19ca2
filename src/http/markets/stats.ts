import { z } from 'zod';
import { defineRoute, type Route, type RouteInput } from '../route.js';
import type { RequestContext } from '../context.js';
import { marketBookStatsQuery, marketTradeStatsQuery } from '../../query/markets.js';
import { MarketPath } from '../params.js';

/** GET /v1/markets/{market_id}/stats: trade and book figures per outcome and for the whole market. */

const dt = z.string().meta({ format: 'date-time' }).nullable();

const OutcomeStats = z.object({
  outcome: z.number().int(),
  outcome_label: z.string().nullable(),
  token_id: z.string(),
  trade_count: z.number().int(),
  volume: z.number(),
  usd_volume: z.number(),
  min_price: z.number().nullable(),
  max_price: z.number().nullable(),
  first_trade: dt,
  last_trade: dt,
  book_snapshot_count: z.number().int(),
});

export const MarketStatsResponse = z
  .object({
    market_id: z.string(),
    trade_count: z.number().int().describe('All trades held (not a sample)'),
    total_volume: z.number().describe('Sum of trade size'),
    usd_volume: z.number(),
    min_price: z.number().nullable(),
    max_price: z.number().nullable(),
    first_trade: dt,
    last_trade: dt,
    book_snapshot_count: z.number().int(),
    outcomes: z.array(OutcomeStats).describe('The same figures per outcome; prices are only comparable within one outcome'),
  })
  .meta({ id: 'MarketStatsResponse' });

export const marketStatsRoutes: Route[] = [
  defineRoute({
    method: 'get',
    path: '/v1/markets/:market_id/stats',
    cost: 'query',
    auth: 'key',
    tag: 'markets',
    summary: 'Trade count, volume, first/last trade and price range per outcome, book snapshot count',
    params: MarketPath,
    response: MarketStatsResponse,
    handler: getMarketStats,
  }),
];

async function getMarketStats({ params }: RouteInput<{ params: typeof MarketPath }>, ctx: RequestContext) {
  const r = await ctx.markets.resolve(ctx.lake, params.market_id);
  const tokens = r.token ? [r.token] : r.tokens;
  const lake = ctx.lake.sources;
  const ids = tokens.map((t) => t.token_id);
  const [trades, books] = await Promise.all([ctx.lake.rows(marketTradeStatsQuery(lake, ids)), ctx.lake.rows(marketBookStatsQuery(lake, ids))]);
  const tBy = new Map(trades.map((t) => [String(t.token_id), t]));
  const bBy = new Map(books.map((b) => [String(b.asset_id), b]));
  const outcomes = tokens.map((t) => {
    const s = tBy.get(t.token_id);
    return {
      outcome: t.outcome_index,
      outcome_label: t.outcome_label,
      token_id: t.token_id,
      trade_count: Number(s?.trade_count ?? 0),
      volume: Number(s?.volume ?? 0),
      usd_volume: Number(s?.usd_volume ?? 0),
      min_price: (s?.min_price as number | undefined) ?? null,
      max_price: (s?.max_price as number | undefined) ?? null,
      first_trade: (s?.first_trade as string | undefined) ?? null,
      last_trade: (s?.last_trade as string | undefined) ?? null,
      book_snapshot_count: Number(bBy.get(t.token_id)?.snapshot_count ?? 0),
    };
  });
  const nonNull = <T>(xs: (T | null)[]): T[] => xs.filter((x): x is T => x !== null);
  const firsts = nonNull(outcomes.map((o) => o.first_trade)).sort();
  const lasts = nonNull(outcomes.map((o) => o.last_trade)).sort();
  const mins = nonNull(outcomes.map((o) => o.min_price));
  const maxs = nonNull(outcomes.map((o) => o.max_price));
  return {
    market_id: String(r.market.id),
    trade_count: outcomes.reduce((a, o) => a + o.trade_count, 0),
    total_volume: roundSum(outcomes.map((o) => o.volume)),
    usd_volume: roundSum(outcomes.map((o) => o.usd_volume)),
    min_price: mins.length ? Math.min(...mins) : null,
    max_price: maxs.length ? Math.max(...maxs) : null,
    first_trade: firsts[0] ?? null,
    last_trade: lasts[lasts.length - 1] ?? null,
    book_snapshot_count: outcomes.reduce((a, o) => a + o.book_snapshot_count, 0),
    outcomes,
  };
}

/** Decimal sums of six-place values: round away binary noise from adding doubles. */
function roundSum(xs: number[]): number {
  return Math.round(xs.reduce((a, x) => a + x, 0) * 1e6) / 1e6;
}
