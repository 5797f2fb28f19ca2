import type { Principal } from '../http/auth.js';
import { fairUseUsedBytes } from '../state/pulls.js';
import type { StateStore } from '../state/store.js';
import { entitlementOf } from './entitlements.js';
import { PLANS, planOf } from './plans.js';

export type FairUseStatus = {
  plan: string;
  allowance_bytes: number;
  used_bytes: number;
  remaining_bytes: number;
  period_start: string;
  period_end: string;
};

/** The caller's fair-use position now: the same numbers the meter checks (pending reservations included). */
export function fairUseStatus(store: StateStore, userId: string, at: Date = new Date()): FairUseStatus | undefined {
  const user = store.getUser(userId);
  if (!user) return undefined;
  const ent = entitlementOf(store, user, at);
  const allowance = ent.plan.fair_use_bytes_month;
  const used = fairUseUsedBytes(store, user.id, ent.period.start, ent.period.end);
  return {
    plan: ent.plan.id,
    allowance_bytes: allowance,
    used_bytes: used,
    remaining_bytes: Math.max(0, allowance - used),
    period_start: ent.period.start.toISOString(),
    period_end: ent.period.end.toISOString(),
  };
}

/**
 * `fair_use_share` for estimates: the fraction of ONE MONTH'S TOTAL allowance of the caller's plan in force
 * that the pull would use (estimated bytes / monthly allowance), rounded to 6 decimals. It does not depend on
 * what is already used, so the same pull always shows the same share; `fairUseStatus().remaining_bytes`
 * tells whether it still fits. Anonymous callers (no principal) get the Free plan's share.
 */
export function fairUseShare(store: StateStore, principal: Principal | undefined, estimatedBytes: number, at: Date = new Date()): number {
  let allowance = PLANS.free.fair_use_bytes_month;
  if (principal) {
    const user = store.getUser(principal.userId);
    allowance = user ? entitlementOf(store, user, at).plan.fair_use_bytes_month : planOf(principal.plan).fair_use_bytes_month;
  }
  const share = Math.max(0, estimatedBytes) / allowance;
  return Math.round(share * 1e6) / 1e6;
}
