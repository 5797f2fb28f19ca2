import { activeSubscription, type SubscriptionRow } from '../state/accounts.js';
import type { Db } from '../state/db.js';
import type { UserRow } from '../state/store.js';
import { planOf, PLANS, type PlanDef } from './plans.js';

/**
 * What a user is entitled to right now. A paid plan entitles only while its subscription is active; a user
 * whose paid plan lapsed falls back to Free and is told `subscription_required` for what only the paid plan
 * covers (see `coverage`).
 */
export type Entitlement = {
  user: UserRow;
  /** The plan in force (Free when a paid plan has no active subscription). */
  plan: PlanDef;
  /** The plan the user holds or last held. */
  assigned: PlanDef;
  subscription: SubscriptionRow | undefined;
  /** Fair-use period containing `at`: [start, end). */
  period: { start: Date; end: Date };
};

export async function entitlementOf(t: Db, user: UserRow, at: Date = new Date()): Promise<Entitlement> {
  const assigned = planOf(user.plan);
  const subscription = await activeSubscription(t, user.id, at);
  const plan = subscription ? planOf(subscription.tier) : assigned.requires_subscription ? PLANS.free : assigned;
  return { user, plan, assigned, subscription, period: fairUsePeriod(subscription, at) };
}

/**
 * The monthly fair-use window. With a subscription the months run from its period start (the billing date);
 * without one they are calendar months, UTC. An annual subscription still gets a monthly allowance.
 */
export function fairUsePeriod(sub: SubscriptionRow | undefined, at: Date): { start: Date; end: Date } {
  if (!sub) {
    const start = new Date(Date.UTC(at.getUTCFullYear(), at.getUTCMonth(), 1));
    return { start, end: new Date(Date.UTC(at.getUTCFullYear(), at.getUTCMonth() + 1, 1)) };
  }
  const anchor = new Date(sub.current_period_start);
  let n = (at.getUTCFullYear() - anchor.getUTCFullYear()) * 12 + (at.getUTCMonth() - anchor.getUTCMonth());
  if (n < 0) n = 0;
  while (n > 0 && addMonthsUTC(anchor, n) > at) n--;
  while (addMonthsUTC(anchor, n + 1) <= at) n++;
  const end = addMonthsUTC(anchor, n + 1);
  const subEnd = new Date(sub.current_period_end);
  return { start: addMonthsUTC(anchor, n), end: end < subEnd ? end : subEnd };
}

/** Adds calendar months, clamping the day (Jan 31 + 1 month = Feb 28/29). */
export function addMonthsUTC(d: Date, months: number): Date {
  const y = d.getUTCFullYear();
  const m = d.getUTCMonth() + months;
  const lastDay = new Date(Date.UTC(y, m + 1, 0)).getUTCDate();
  return new Date(Date.UTC(y, m, Math.min(d.getUTCDate(), lastDay), d.getUTCHours(), d.getUTCMinutes(), d.getUTCSeconds(), d.getUTCMilliseconds()));
}

export type Coverage = { ok: true } | { ok: false; code: 'upgrade_required' | 'subscription_required'; message: string; required_plan: string };

/**
 * Whether the plan in force covers a data set. `subscription_required`: the user's own (lapsed) paid plan
 * would cover it. `upgrade_required`: their plan does not include it; a higher plan does.
 */
export function coverage(ent: Entitlement, dataset: string, kind: 'download' | 'export' | 'read' = 'read'): Coverage {
  const needs = kind === 'export' ? [dataset, 'exports'] : [dataset];
  const covers = (p: PlanDef) => needs.every((d) => (p.datasets as readonly string[]).includes(d));
  if (covers(ent.plan)) return { ok: true };
  const what = kind === 'export' ? `${dataset} exports` : dataset;
  if (!ent.subscription && ent.assigned.requires_subscription && covers(ent.assigned)) {
    return {
      ok: false,
      code: 'subscription_required',
      message: `${what} needs an active ${ent.assigned.name} subscription; yours is not active`,
      required_plan: ent.assigned.id,
    };
  }
  const higher = Object.values(PLANS).find((p) => p.id !== ent.plan.id && covers(p));
  return {
    ok: false,
    code: 'upgrade_required',
    message: `The ${ent.plan.name} plan does not include ${what}${higher ? `; upgrade to ${higher.name}` : ''}`,
    required_plan: higher?.id ?? 'professional',
  };
}
