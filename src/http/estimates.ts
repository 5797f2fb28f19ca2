import { z } from 'zod';
import { PLANS, REFERENCE_RATE_PER_MB, planOf, type DatasetKey, type PlanDef } from '../accounts/plans.js';
import type { Principal } from './auth.js';
import type { AppContext } from './context.js';
import { datasetBytesPerRow } from '../lake/runner.js';
import { ESTIMATE_DATA_TYPES, estimateDataset, type EstimateDataType } from '../query/estimate.js';
import { checkWindow, isoDateTime, timeframeParam } from './params.js';

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

/**
 * Fair-use usage so far this period. The accounts module replaces this with the caller's real usage;
 * until then a pull is measured against the whole allowance.
 */
export type UsageLookup = (principal: Principal) => Promise<number> | number;
let usageLookup: UsageLookup = () => 0;
export function registerFairUseUsage(fn: UsageLookup): void {
  usageLookup = fn;
}

const DATASET_KEY: Readonly<Record<EstimateDataType, DatasetKey>> = {
  trades: 'trades',
  ohlcv: 'ohlcv',
  orderbook: 'orderbook',
  top_of_book: 'top_of_book',
  raw: 'raw',
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

export async function bytesFor(ctx: AppContext, t: EstimateDataType, rows: number): Promise<number> {
  const perRow = await datasetBytesPerRow(ctx.db, ctx.config.lakeDir, estimateDataset(t));
  return Math.round(rows * perRow);
}

export async function pricingFor(t: EstimateDataType, bytes: number, principal: Principal | undefined): Promise<Pricing> {
  const key = DATASET_KEY[t];
  const mine = principal ? planOf(principal.plan) : undefined;
  const cheapest = (Object.values(PLANS) as PlanDef[])
    .filter((p) => p.datasets.includes(key))
    .sort((a, b) => a.price_usd_month - b.price_usd_month)[0];
  const covering = mine && mine.datasets.includes(key) ? mine : cheapest;
  const mb = bytes / (1024 * 1024);
  const rate = REFERENCE_RATE_PER_MB[key] ?? 0;
  // The share is of the allowance the caller has left (all of it until accounts reports usage).
  const allowancePlan = mine ?? covering;
  let share: number | null = null;
  if (allowancePlan) {
    const used = principal ? Math.max(0, Number(await usageLookup(principal)) || 0) : 0;
    const left = Math.max(1, allowancePlan.fair_use_bytes_month - used);
    share = round(bytes / left, 6);
  }
  const pct = share === null ? '' : ` It would use about ${(share * 100).toFixed(share < 0.001 ? 4 : 2)}% of the ${allowancePlan!.name} plan's monthly fair-use allowance.`;
  const note = covering
    ? `${mine && mine === covering ? `Included in your ${covering.name} plan.` : `Needs the ${covering.name} plan.`}${pct} The per-MB figure is a reference from the retired credit model, not a charge.`
    : 'No plan covers this data set.';
  return {
    estimated_size_bytes: bytes,
    estimated_size_mb: round(mb, 4),
    rate_per_mb: rate,
    estimated_cost_usd: round(mb * rate, 2),
    pricing_model: 'subscription',
    included_in_plan: covering ? covering.name : null,
    fair_use_share: share,
    pricing_note: note,
  };
}

function round(x: number, digits: number): number {
  const f = 10 ** digits;
  return Math.round(x * f) / f;
}

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
  .object({ market_id: z.string(), data_type: z.string(), in_range: z.boolean(), ...pricingShape })
  .meta({ id: 'MarketEstimateResponse' });

export const SeriesEstimateResponse = z
  .object({
    series_id: z.string(),
    data_type: z.string(),
    markets_in_range: z.number().int(),
    in_range: z.boolean(),
    coming_soon: z.boolean(),
    row_cap_applied: z.boolean(),
    row_cap: z.number().int().nullable(),
    ...pricingShape,
  })
  .meta({ id: 'EstimateResponse' });
