import type { Response } from 'express';
import { z } from 'zod';
import { timeframeOf } from '../timeframe.js';
import type { Route } from './route.js';
import { NotFound } from '../errors.js';
import { lakeSources, runOne, runQuery, type Json, type Row } from '../lake/runner.js';
import { listMarketsQuery, marketBookStatsQuery, marketTradeStatsQuery, seriesExistsQuery, SORT_BY } from '../query/markets.js';
import { estimateRowsQuery } from '../query/estimate.js';

import { checkWindow, isoDateTime, marketIdParam, queryBool, queryInt } from './params.js';
import { bytesFor, EstimateBody, MarketEstimateResponse, pricingFor, type EstimateInput } from './estimates.js';

const dt = z.string().nullable();

export const MARKET_STATUS = ['active', 'resolved', 'paused'] as const;
export type MarketStatus = (typeof MARKET_STATUS)[number];

/**
 * The legacy `status` string, derived from the boolean flags (the spec lists the values, not the rule):
 * resolved wins; a market that is closed but not yet resolved, or flagged not active, is 'paused' (no
 * trading, no outcome yet); everything else is 'active'.
 */
export function marketStatus(flags: { active: boolean; closed: boolean; resolved: boolean }): MarketStatus {
  if (flags.resolved) return 'resolved';
  if (flags.closed || !flags.active) return 'paused';
  return 'active';
}

export const MarketResponse = z
  .object({
    id: z.string().describe('Numeric market id (markets.id): what requests take as market_id'),
    event_id: z.string().nullable(),
    question: z.string().describe('For a market known only from the order-book tape or from fills (no metadata yet): "Unknown market <condition id or token id>"'),
    description: z.string().nullable(),
    outcomes: z.array(z.string()).describe('Parallel to outcome_token_ids. Without metadata: ["Yes","No"] for two tokens, else "Outcome <index>" per token'),
    outcome_prices: z.array(z.number()).nullable(),
    outcome_token_ids: z.array(z.string()).nullable().describe('Outcome token ids, parallel to outcomes; trade and candle rows carry these in market_id'),
    active: z.boolean().nullable(),
    closed: z.boolean().nullable(),
    resolved: z.boolean().nullable(),
    status: z.enum(MARKET_STATUS).describe('Legacy field derived from the flags: resolved if resolved; paused if closed but unresolved, or not active; else active'),
    winning_outcome: z.number().int().nullable(),
    resolution_date: dt,
    volume: z.number().nullable(),
    volume_24h: z.number().nullable(),
    liquidity: z.number().nullable(),
    start_date: dt,
    end_date: dt,
    trade_count: z.number().int(),
    orderbook_count: z.number().int(),
    data_from: dt,
    data_to: dt,
    category: z.string().nullable(),
    condition_id: z.string().nullable().describe('The 0x condition id; order-book rows carry it in market_id. Not accepted in requests.'),
    series_id: z.string().nullable(),
  })
  .meta({ id: 'MarketResponse' });

const ListMarketsQuery = z
  .object({
    active: queryBool.optional().describe('Filter by active status'),
    closed: queryBool.optional().describe('Filter by closed status'),
    resolved: queryBool.optional().describe('Filter by resolution status'),
    category: z.string().max(200).optional().describe('Filter by category (case-insensitive exact match)'),
    has_data: queryBool.optional().describe('true: only markets with trade or order-book data; false or unset: no filter'),
    data_type: z.enum(['trades', 'ohlcv', 'orderbook']).optional().describe('Only markets that have this data type'),
    search: z.string().max(1000).optional().describe('Case-insensitive substring of the question; % and _ match literally'),
    series_id: z.string().min(1).max(80).optional().describe('Only markets in this series (ids from GET /v1/series); unknown series → 404'),
    ending_after: isoDateTime.optional().describe('Only markets whose end_date is at or after this instant'),
    ending_before: isoDateTime.optional().describe('Only markets whose end_date is at or before this instant'),
    sort_by: z.enum(SORT_BY).optional().describe('All descending. Default top (most rows), or end_date when series_id is set'),
    limit: queryInt({ min: 1, max: 1000, default: 100 }),
    offset: queryInt({ min: 0, max: 1_000_000, default: 0 }),
  })
  .superRefine((v, ctx) => checkWindow({ start: v.ending_after, end: v.ending_before }, ctx, ['ending_after', 'ending_before']));

const MarketPath = z.object({ market_id: marketIdParam });

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

async function listMarkets(ctx: Parameters<Route['handler']>[2], q: z.infer<typeof ListMarketsQuery>): Promise<Row[]> {
  const lake = lakeSources(ctx.config.lakeDir);
  if (q.series_id !== undefined) {
    const s = await runOne(ctx.db, seriesExistsQuery(lake, q.series_id));
    if (!s || Number(s.n) === 0) throw new NotFound('Series not found');
  }
  return runQuery(
    ctx.db,
    listMarketsQuery(lake, {
      active: q.active,
      closed: q.closed,
      resolved: q.resolved,
      search: q.search,
      category: q.category,
      seriesId: q.series_id,
      hasData: q.has_data,
      dataType: q.data_type,
      endingAfter: q.ending_after,
      endingBefore: q.ending_before,
      sortBy: q.sort_by,
      limit: q.limit,
      offset: q.offset,
    }),
  );
}

export const marketRoutes: Route[] = [
  {
    method: 'get',
    path: '/v1/markets',
    cost: 'cheap',
    auth: 'key',
    tag: 'markets',
    summary: 'List markets',
    query: ListMarketsQuery,
    response: z.array(MarketResponse),
    handler: async (_req, res, ctx) => {
      const rows = (await listMarkets(ctx, res.locals.query)).map(marketOut);
      res.locals.rows = rows.length;
      return rows;
    },
  },
  {
    method: 'get',
    path: '/v1/markets/:market_id',
    cost: 'cheap',
    auth: 'key',
    tag: 'markets',
    summary: 'Get one market (numeric id or an outcome token id)',
    params: MarketPath,
    response: MarketResponse,
    handler: async (_req, res, ctx) => {
      const r = await ctx.markets.resolve(res.locals.params.market_id);
      res.locals.rows = 1;
      sendMarket(res, r.market);
      return undefined;
    },
  },
  {
    method: 'get',
    path: '/v1/markets/:market_id/stats',
    cost: 'query',
    auth: 'key',
    tag: 'markets',
    summary: 'Trade count, volume, first/last trade and price range per outcome, book snapshot count',
    params: MarketPath,
    response: MarketStatsResponse,
    handler: async (_req, res, ctx) => {
      const r = await ctx.markets.resolve(res.locals.params.market_id);
      const tokens = r.token ? [r.token] : r.tokens;
      const lake = lakeSources(ctx.config.lakeDir);
      const ids = tokens.map((t) => t.token_id);
      const [trades, books] = await Promise.all([
        runQuery(ctx.db, marketTradeStatsQuery(lake, ids)),
        runQuery(ctx.db, marketBookStatsQuery(lake, ids)),
      ]);
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
    },
  },
  {
    method: 'post',
    path: '/v1/markets/:market_id/estimate',
    cost: 'query',
    auth: 'key',
    tag: 'markets',
    summary: 'Size of a market pull (rows and bytes counted in the lake) and what it means on your plan',
    params: MarketPath,
    body: EstimateBody,
    response: MarketEstimateResponse,
    handler: async (req, res, ctx) => {
      const r = await ctx.markets.resolve(res.locals.params.market_id);
      const b = res.locals.body as EstimateInput;
      const tokens = (r.token ? [r.token] : r.tokens).map((t) => t.token_id);
      const w = { start: b.start ?? undefined, end: b.end ?? undefined };
      const lake = lakeSources(ctx.config.lakeDir);
      const row = await runOne(ctx.db, estimateRowsQuery(lake, b.data_type, tokens, w, b.data_type === 'ohlcv' ? (b.timeframe ?? defaultTf) : undefined));
      const rows = Number(row?.rows ?? 0);
      const bytes = await bytesFor(ctx, b.data_type, rows);
      return {
        market_id: String(r.market.id),
        data_type: b.data_type,
        estimated_rows: rows,
        in_range: rows > 0,
        ...(await pricingFor(ctx, b.data_type, bytes, req.principal)),
      };
    },
  },
];

const defaultTf = timeframeOf(3600);

/**
 * GET /v1/markets/{id} answers the same bytes until the catalogue changes, so the JSON and its ETag are built
 * once per market row: stringifying and hashing them per request showed in the profile under load. Keyed by
 * the row object, which ids.ts's resolution cache replaces when ingest rewrites the catalogue — a new row is
 * a new entry, and the old one goes with its row.
 */
const marketBodies = new WeakMap<Row, { body: Buffer; etag: string | undefined }>();

function sendMarket(res: Response, market: Row): void {
  let hit = marketBodies.get(market);
  if (!hit) {
    const body = Buffer.from(JSON.stringify(marketOut(market)), 'utf8');
    // The app's own ETag function (Express's default weak ETag unless configured), so answers match res.json's.
    const etagFn = res.app.get('etag fn') as ((b: Buffer) => string) | undefined;
    hit = { body, etag: typeof etagFn === 'function' ? etagFn(body) : undefined };
    marketBodies.set(market, hit);
  }
  res.setHeader('Content-Type', 'application/json; charset=utf-8');
  if (hit.etag) res.setHeader('ETag', hit.etag);
  // res.send keeps Express's conditional GET (If-None-Match → 304) and HEAD handling.
  res.send(hit.body);
}

/** Decimal sums of six-place values: round away binary noise from adding doubles. */
function roundSum(xs: number[]): number {
  return Math.round(xs.reduce((a, x) => a + x, 0) * 1e6) / 1e6;
}

/**
 * Outcome labels. A market seen only on the tape or in fills has tokens but no metadata (NULL outcomes),
 * and its token order is ingest's sort order, not the venue's. Labels stay parallel to outcome_token_ids:
 * the anchor's default ["Yes","No"] only for exactly two tokens, else one "Outcome <index>" per token
 * (the index requests take as `outcome`), and [] when no token is known.
 */
function outcomesOf(m: Row, tokens: Json[] | null): string[] {
  if (Array.isArray(m.outcomes) && m.outcomes.length > 0) return m.outcomes as string[];
  if (!tokens || tokens.length === 0) return [];
  if (tokens.length === 2) return ['Yes', 'No'];
  return tokens.map((_, i) => `Outcome ${i}`);
}

/** The Market object: every seed field present, lists never null where the seed defaults them. */
export function marketOut(m: Row): Row {
  const tokens = Array.isArray(m.outcome_token_ids) && m.outcome_token_ids.length > 0 ? (m.outcome_token_ids as Json[]) : null;
  const active = (m.active as boolean | null) ?? true;
  const closed = (m.closed as boolean | null) ?? false;
  const resolved = (m.resolved as boolean | null) ?? false;
  // Placeholders (tape- or fills-only markets) have no question yet: name them by what identifies them.
  const question = typeof m.question === 'string' ? m.question : `Unknown market ${String(m.condition_id ?? tokens?.[0] ?? m.id)}`;
  return {
    id: String(m.id),
    event_id: m.event_id ?? null,
    question,
    description: m.description ?? null,
    outcomes: outcomesOf(m, tokens),
    outcome_prices: m.outcome_prices ?? null,
    outcome_token_ids: tokens,
    active,
    closed,
    resolved,
    status: marketStatus({ active, closed, resolved }),
    winning_outcome: m.winning_outcome ?? null,
    resolution_date: m.resolution_date ?? null,
    volume: m.volume ?? null,
    volume_24h: m.volume_24h ?? null,
    liquidity: m.liquidity ?? null,
    start_date: m.start_date ?? null,
    end_date: m.end_date ?? null,
    trade_count: m.trade_count ?? 0,
    orderbook_count: m.orderbook_count ?? 0,
    data_from: m.data_from ?? null,
    data_to: m.data_to ?? null,
    category: m.category ?? null,
    condition_id: m.condition_id ?? null,
    series_id: m.series_id ?? null,
  };
}
