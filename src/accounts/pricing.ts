import { planKeyOf, REFERENCE_RATE_PER_MB, type KindId } from '../catalogue/kinds.js';
import type { StateStore } from '../state/store.js';
import { coverage, entitlementOf } from './entitlements.js';
import { fairUseShare } from './fairuse.js';
import { PLANS, planOf, type PlanDef } from './plans.js';
import type { Principal } from './principal.js';

/**
 * The pricing half of the size estimates: rows and bytes come from the lake, this turns them into the seed's
 * estimate object under the subscription model (a per-MB reference rate, the plan that covers the data set,
 * the share of the monthly fair-use allowance).
 */
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

/**
 * Plan and fair-use figures for the caller of THIS request: `included_in_plan` is the plan in force when it
 * covers the kind's data set key (entitlementOf: a lapsed paid plan counts as Free), else the plan `coverage`
 * names as required; `fair_use_share` is fairUseShare over the caller's own usage this period (the numbers
 * the meter checks). Anonymous callers (public series estimates) get the cheapest covering plan and the share
 * of a whole Free allowance.
 */
export async function estimatePricing(state: StateStore, kind: KindId, bytes: number, principal: Principal | undefined): Promise<Pricing> {
  const key = planKeyOf(kind);
  const user = principal ? await state.getUser(principal.userId) : undefined;
  const ent = user ? await entitlementOf(state, user) : undefined;
  const cov = ent ? coverage(ent, key, 'download') : undefined;
  const cheapest = (Object.values(PLANS) as PlanDef[]).filter((p) => p.datasets.includes(key)).sort((a, b) => a.price_usd_month - b.price_usd_month)[0];
  const covering: PlanDef | undefined = !ent || !cov ? cheapest : cov.ok ? ent.plan : planOf(cov.required_plan);
  const mb = bytes / (1024 * 1024);
  const rate = REFERENCE_RATE_PER_MB[key] ?? 0;
  const share = await fairUseShare(state, principal, bytes);
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
