import { z } from 'zod';
import { ESTIMATE_KINDS, fromTape, SERIES_ESTIMATE_KINDS, sizingDataset, type EstimateKind, type SeriesEstimateKind } from '../catalogue/kinds.js';
import { estimatePricing, type Pricing } from '../accounts/pricing.js';
import type { Principal } from '../accounts/principal.js';
import type { AppContext, RequestContext } from './context.js';
import { checkWindow, isoDateTime, timeframeParam } from './params.js';
import { pullCoverage, type PullCoverage } from '../downloads/coverage.js';
import { COVERAGE_STATUSES, type CoverageScope } from '../query/coverage.js';
import type { Window } from '../query/common.js';

/**
 * The size estimates at the edge: their bodies and responses. Rows and bytes come from the lake; the kinds,
 * the data set that sizes each and whether it comes from the tape are the catalogue's (src/catalogue/kinds.ts);
 * the pricing is the accounts module's (src/accounts/pricing.ts).
 */
export const EstimateBody = z
  .object({
    data_type: z
      .enum(ESTIMATE_KINDS)
      .default('trades')
      .describe(
        'trades, ohlcv, orderbook (book snapshots), top_of_book, raw (the level-2 tape), book_snapshot_interval (the book at each interval boundary) or tbbo (trade prints with the quote before each)',
      ),
    timeframe: timeframeParam.optional().describe('OHLCV bar width (any timeframe, e.g. 1m, 7m, 1h, 1d); default 1h'),
    interval: timeframeParam.optional().describe('book_snapshot_interval: the interval between snapshots (e.g. 1s, 1m); default 1m'),
    start: isoDateTime.nullish(),
    end: isoDateTime.nullish(),
  })
  .superRefine((v, ctx) => checkWindow({ start: v.start ?? undefined, end: v.end ?? undefined }, ctx));

export type EstimateInput = z.infer<typeof EstimateBody>;

/** A series estimate's body: the market estimate's, with the anchor's greeks and snapshots (src/query/estimate.ts). */
export const SeriesEstimateBody = z
  .object({
    data_type: z
      .enum(SERIES_ESTIMATE_KINDS)
      .default('trades')
      .describe('trades, ohlcv, orderbook or snapshots (book snapshots), top_of_book, raw; greeks for options series (one row per option trade)'),
    timeframe: timeframeParam.optional().describe('OHLCV bar width (any timeframe, e.g. 1m, 7m, 1h, 1d); default 1h'),
    start: isoDateTime.nullish(),
    end: isoDateTime.nullish(),
  })
  .superRefine((v, ctx) => checkWindow({ start: v.start ?? undefined, end: v.end ?? undefined }, ctx));

export type SeriesEstimateInput = z.infer<typeof SeriesEstimateBody>;

export async function bytesFor(ctx: RequestContext, t: SeriesEstimateKind | EstimateKind, rows: number): Promise<number> {
  const perRow = await ctx.lake.bytesPerRow(sizingDataset(t));
  return Math.round(rows * perRow);
}

/** The estimate's pricing for the caller of this request (src/accounts/pricing.ts). */
export async function pricingFor(ctx: AppContext, t: SeriesEstimateKind | EstimateKind, bytes: number, principal: Principal | undefined): Promise<Pricing> {
  return estimatePricing(ctx.state, t, bytes, principal);
}

/** The tape's coverage of the days an estimate's window touches; null for a data type that does not come from the tape. */
export async function estimateCoverage(
  ctx: RequestContext,
  t: SeriesEstimateKind | EstimateKind,
  scope: CoverageScope,
  w: Window,
): Promise<PullCoverage | null> {
  return fromTape(t) ? pullCoverage(ctx.lake, scope, w) : null;
}

const CoverageStatusSchema = z.enum(COVERAGE_STATUSES);

export const PullCoverageSchema = z
  .object({
    worst: CoverageStatusSchema.nullable().describe('The worst day: verified < unverified < degraded < missing (null: the tape has no day in the window)'),
    days: z.array(z.object({ date: z.string(), status: CoverageStatusSchema })).describe('Each UTC day the window touches that the tape has, its worst token'),
  })
  .nullable()
  .describe("The tape's coverage (GET /v1/markets/{market_id}/coverage) of the days pulled; null for trades and OHLCV (on-chain fills, not the tape)")
  .meta({ id: 'PullCoverage' });

const pricingShape = {
  estimated_rows: z.number().int(),
  estimated_size_bytes: z.number().int(),
  estimated_size_mb: z.number(),
  rate_per_mb: z.number(),
  estimated_cost_usd: z.number().describe('Reference only: pulls are included in the plan'),
  pricing_model: z.string().nullable(),
  included_in_plan: z.string().nullable(),
  fair_use_share: z.number().nullable().describe('Fraction of the monthly fair-use allowance the pull would use'),
  pricing_note: z.string().nullable(),
};

export const MarketEstimateResponse = z
  .object({ market_id: z.string(), data_type: z.string(), in_range: z.boolean(), ...pricingShape, coverage: PullCoverageSchema })
  .meta({ id: 'MarketEstimateResponse' });

export const SeriesEstimateResponse = z
  .object({
    series_id: z.string(),
    data_type: z.string(),
    markets_in_range: z.number().int(),
    in_range: z.boolean(),
    // The anchor's defaults, as it states them (both are always sent).
    coming_soon: z.boolean().meta({ default: false }),
    row_cap_applied: z.boolean().meta({ default: false }),
    row_cap: z.number().int().nullable(),
    ...pricingShape,
    coverage: PullCoverageSchema,
  })
  .meta({ id: 'EstimateResponse' });
