import { z } from 'zod';
import { PLANS, REFERENCE_RATE_PER_MB, planOf, type DatasetKey, type PlanDef } from '../accounts/plans.js';
import { coverage, entitlementOf } from '../accounts/entitlements.js';
import { fairUseShare } from '../accounts/fairuse.js';
import type { Principal } from '../accounts/principal.js';
import type { AppContext } from './context.js';
import { datasetBytesPerRow } from '../lake/runner.js';
import { ESTIMATE_DATA_TYPES, estimateDataset, SERIES_ESTIMATE_DATA_TYPES, type SeriesEstimateDataType } from '../query/estimate.js';
import { checkWindow, isoDateTime, timeframeParam } from './params.js';
import { pullCoverage, type PullCoverage } from '../downloads/coverage.js';
import { COVERAGE_STATUSES, type CoverageScope } from '../query/coverage.js';
import type { Window } from '../query/common.js';

/**
 * The pricing half of the size estimates: rows and bytes come from the lake, this turns them into the seed's
 * estimate object under the subscription model (a per-MB reference rate, the plan that covers the data set,
 * the share of the monthly fair-use allowance).
 */
export const EstimateBody = z
  .object({
    data_type: z.enum(ESTIMATE_DATA_TYPES).default('trades').describe('trades, ohlcv, orderbook (book snapshots), top_of_book, or raw (the level-2 tape)'),
    timeframe: timeframeParam.optional().describe('OHLCV bar width (any timeframe, e.g. 1m, 7m, 1h, 1d); default 1h'),
    start: isoDateTime.nullish(),
    end: isoDateTime.nullish(),
  })
  .superRefine((v, ctx) => checkWindow({ start: v.start ?? undefined, end: v.end ?? undefined }, ctx));

export type EstimateInput = z.infer<typeof EstimateBody>;

/** A series estimate's body: the market estimate's, with the anchor's greeks and snapshots (src/query/estimate.ts). */
export const SeriesEstimateBody = z
  .object({
    data_type: z
      .enum(SERIES_ESTIMATE_DATA_TYPES)
      .default('trades')
      .describe('trades, ohlcv, orderbook or snapshots (book snapshots), top_of_book, raw; greeks for options series (one row per option trade)'),
    timeframe: timeframeParam.optional().describe('OHLCV bar width (any timeframe, e.g. 1m, 7m, 1h, 1d); default 1h'),
    start: isoDateTime.nullish(),
    end: isoDateTime.nullish(),
  })
  .superRefine((v, ctx) => checkWindow({ start: v.start ?? undefined, end: v.end ?? undefined }, ctx));

export type SeriesEstimateInput = z.infer<typeof SeriesEstimateBody>;

const DATASET_KEY: Readonly<Record<SeriesEstimateDataType, DatasetKey>> = {
  trades: 'trades',
  ohlcv: 'ohlcv',
  orderbook: 'orderbook',
  snapshots: 'orderbook',
  top_of_book: 'top_of_book',
  raw: 'raw',
  greeks: 'options',
};

export type Pricing = {
  estimated_size_bytes: number;
  estimated_size_mb: number;
  rate_per_mb: number;
  estimated_cost_usd: number;
  pricing_model: string;
  included_in_plan: string | null;
  fair_use_share: number | null;
  pricing_note: string;
};

export async function bytesFor(ctx: AppContext, t: SeriesEstimateDataType, rows: number): Promise<number> {
  const perRow = await datasetBytesPerRow(ctx.db, ctx.config.lakeDir, estimateDataset(t));
  return Math.round(rows * perRow);
}

/**
 * Plan and fair-use figures from the accounts module, for the caller of THIS request: `included_in_plan` is
 * the plan in force when it covers the data set (entitlementOf: a lapsed paid plan counts as Free), else the
 * plan `coverage` names as required; `fair_use_share` is fairUseShare over the caller's own usage this period
 * (the numbers the meter checks). Anonymous callers (public series estimates) get the cheapest covering plan
 * and the share of a whole Free allowance.
 */
export async function pricingFor(ctx: AppContext, t: SeriesEstimateDataType, bytes: number, principal: Principal | undefined): Promise<Pricing> {
  const key = DATASET_KEY[t];
  const user = principal ? await ctx.state.getUser(principal.userId) : undefined;
  const ent = user ? await entitlementOf(ctx.state, user) : undefined;
  const cov = ent ? coverage(ent, key, 'download') : undefined;
  const cheapest = (Object.values(PLANS) as PlanDef[]).filter((p) => p.datasets.includes(key)).sort((a, b) => a.price_usd_month - b.price_usd_month)[0];
  const covering: PlanDef | undefined = !ent || !cov ? cheapest : cov.ok ? ent.plan : planOf(cov.required_plan);
  const mb = bytes / (1024 * 1024);
  const rate = REFERENCE_RATE_PER_MB[key] ?? 0;
  const share = await fairUseShare(ctx.state, principal, bytes);
  const allowancePlan = ent ? ent.plan : PLANS.free;
  const pct = ` It would use about ${(share * 100).toFixed(share < 0.001 ? 4 : 2)}% of what is left of the ${allowancePlan.name} plan's monthly fair-use allowance.`;
  const head = cov ? (cov.ok ? `Included in your ${ent!.plan.name} plan.` : `${cov.message}.`) : covering ? `Needs the ${covering.name} plan.` : '';
  const note = covering ? `${head}${pct} The per-MB figure is a reference from the retired credit model, not a charge.` : 'No plan covers this data set.';
  return {
    estimated_size_bytes: bytes,
    estimated_size_mb: round(mb, 4),
    rate_per_mb: rate,
    estimated_cost_usd: round(mb * rate, 2),
    pricing_model: 'subscription',
    included_in_plan: covering ? covering.name : null,
    fair_use_share: covering ? share : null,
    pricing_note: note,
  };
}

function round(x: number, digits: number): number {
  const f = 10 ** digits;
  return Math.round(x * f) / f;
}

/** Data types read from the websocket tape (src/downloads/coverage.ts says why trades and OHLCV are not). */
const TAPE_TYPES: ReadonlySet<SeriesEstimateDataType> = new Set(['orderbook', 'snapshots', 'top_of_book', 'raw']);

/** The tape's coverage of the days an estimate's window touches; null for a data type that does not come from the tape. */
export async function estimateCoverage(ctx: AppContext, t: SeriesEstimateDataType, scope: CoverageScope, w: Window): Promise<PullCoverage | null> {
  return TAPE_TYPES.has(t) ? pullCoverage({ db: ctx.db, lakeDir: ctx.config.lakeDir }, scope, w) : null;
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
