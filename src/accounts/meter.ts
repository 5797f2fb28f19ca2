import type { Principal } from './principal.js';

/**
 * The seam between pulls (downloads, exports) and accounting. A pull asks `begin` before it produces a byte;
 * `begin` refuses with a typed error (402 plan/subscription, 429 fair-use cap or download rate) or returns a
 * ticket. The pull then `commit`s the bytes and rows it actually delivered — recorded in the caller's download
 * history and counted against fair use — or `refund`s when it failed, so a 5xx or a failed export costs nothing.
 */
export type PullKind = 'download' | 'export';

export type PullRequest = {
  kind: PullKind;
  /** Data set key as in src/accounts/plans.ts (trades, ohlcv, orderbook, top_of_book, raw, options, ...). */
  dataset: string;
  /** Endpoint or export spec, for the history record. */
  description: string;
  /** Bytes the pull is expected to produce (0 when unknown); reserved against the allowance. */
  estimatedBytes: number;
  format?: string;
  /** Optional detail for the caller's download history (GET /v1/user/downloads). */
  marketId?: string;
  fileName?: string;
  timeframe?: string;
  start?: string | null;
  end?: string | null;
  /**
   * The ticket's id, given by the caller: an export's charge is named after its job, so the job is charged at
   * most once whichever worker builds it (a second begin with the id fails on the history's primary key).
   */
  chargeId?: string;
};

export interface UsageTicket {
  readonly id: string;
  /** Records the delivered bytes; never throws (a failure is logged, the reservation stays). */
  commit(result: { bytes: number; rows: number }): Promise<void>;
  /** Releases the reservation and the rate slot; never throws. */
  refund(reason: string): Promise<void>;
  /**
   * Grows the ticket's reservation by up to `bytes`, within what is left of the caller's fair use (every
   * other pull in flight, on any replica, reserved included): the bytes granted, 0 once nothing is left. A
   * stream sends only what it reserved, so all of a user's streams together stay within the allowance.
   */
  reserve(bytes: number): Promise<number>;
}

export interface UsageMeter {
  begin(principal: Principal, pull: PullRequest): Promise<UsageTicket>;
  /**
   * Only the plan check of `begin` (402 upgrade_required / subscription_required), reserving nothing: an export
   * is refused at submit, before a job exists, rather than after a worker built the whole file.
   */
  authorize(principal: Principal, pull: Pick<PullRequest, 'kind' | 'dataset'>): Promise<void>;
}

/** Accepts everything and records nothing: used until the accounts module provides the real meter. */
export const openMeter: UsageMeter = {
  async begin() {
    return { id: 'untracked', async commit() {}, async refund() {}, reserve: async (bytes) => bytes };
  },
  async authorize() {},
};
