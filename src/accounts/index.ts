/** What other modules use from accounts: the meter, fair-use numbers for estimates, plans and entitlements. */
export { sqliteMeter, settleTicket, refundTicket } from './usage.js';
export { fairUseShare, fairUseStatus, fairUseUsedBytesOf, type FairUseStatus } from './fairuse.js';
export { entitlementOf, coverage, type Entitlement } from './entitlements.js';
export { PLANS, planOf, REFERENCE_RATE_PER_MB, LEGACY_MINIMUM_ORDER_USD, BYTES_PER_ROW, type PlanDef } from './plans.js';
export type { UsageMeter, UsageTicket, PullRequest } from './meter.js';
