import type { Principal } from './principal.js';
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
export async function fairUseStatus(store: StateStore, userId: string, at: Date = new Date()): Promise<FairUseStatus | undefined> {
  const user = await store.getUser(userId);
  if (!user) return undefined;
  const ent = await entitlementOf(store, user, at);
  const allowance = ent.plan.fair_use_bytes_month;
  const used = await fairUseUsedBytes(store, user.id, ent.period.start, ent.period.end);
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
 * `fair_use_share` for estimates: estimated bytes / the bytes LEFT of the caller's monthly allowance (plan in
 * force, reservations of running pulls included; at least 1 byte), rounded to 6 decimals. The same numbers
 * the meter checks, so a share above 1 means the pull would be refused with `fair_use_cap`. Anonymous
 * callers get the share of a whole Free allowance.
 */
export async function fairUseShare(store: StateStore, principal: Principal | undefined, estimatedBytes: number, at: Date = new Date()): Promise<number> {
  let left = PLANS.free.fair_use_bytes_month;
  if (principal) {
    const status = await fairUseStatus(store, principal.userId, at);
    left = status ? status.remaining_bytes : planOf(principal.plan).fair_use_bytes_month;
  }
  const share = Math.max(0, estimatedBytes) / Math.max(1, left);
  return Math.round(share * 1e6) / 1e6;
}

/** Bytes already counted against the caller's allowance this period. */
export async function fairUseUsedBytesOf(store: StateStore, principal: Principal, at: Date = new Date()): Promise<number> {
  return (await fairUseStatus(store, principal.userId, at))?.used_bytes ?? 0;
}
