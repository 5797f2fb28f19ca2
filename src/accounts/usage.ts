import crypto from 'node:crypto';
import type { Logger } from 'pino';
import type { Principal } from './principal.js';
import { PaymentRequired, QuotaExceeded, Unauthorized } from '../errors.js';
import { downloadRateExceeded, type DownloadRateLimiter, type RateWindow } from '../limits/index.js';
import { completePull, downloadsSince, failPull, fairUseUsedBytes, insertPull } from '../state/pulls.js';
import { lockUser, type Db } from '../state/db.js';
import { sql } from '../state/sql.js';
import { newId, type StateStore, type UserRow } from '../state/store.js';
import { coverage, entitlementOf, type Entitlement } from './entitlements.js';
import type { PullRequest, UsageMeter, UsageTicket } from './meter.js';

/**
 * The real usage meter. `begin` runs one state transaction (the user's row locked on PostgreSQL, so replicas
 * take their turns) that checks, in order: the plan covers
 * the data set (402 upgrade_required / subscription_required), the per-plan download rate (429 "Rate limit
 * exceeded" with Retry-After), and the monthly fair-use volume (429 fair_use_cap, no Retry-After) — then
 * reserves the estimated bytes by inserting the pending download-history row. Because check and reservation
 * are one transaction, parallel pulls can never together pass the allowance. `commit` settles the row to the
 * bytes actually sent; `refund` marks it failed, which releases both the bytes and the rate-limit slot.
 *
 * With `downloadRate` (Redis, shared by every replica: src/limits/) a download's rate slot is taken there
 * instead, before the transaction (a network wait must not hold the state's write lock), after the plan was
 * checked so a 402 still comes first; a transaction that then refuses (fair use) gives the slot back, and so
 * does a refund. An unreachable Redis refuses the pull with 503 before anything is reserved.
 */
export type MeterOptions = {
  now?: () => Date;
  log?: Logger;
  downloadRate?: DownloadRateLimiter | undefined;
  /** Starts every download ticket's id (downloadIdPrefix): a restarted replica refunds only its own cut-off downloads. */
  downloadIdPrefix?: string;
};

/**
 * The id prefix of the downloads one API process starts: `dl_` and a digest of its replica name (stable across
 * its restarts: PMLAKE_REPLICA_ID, else host and port), so at start-up it refunds the downloads its crash cut
 * off and none that another replica sharing the database is still streaming.
 */
export function downloadIdPrefix(replica: string): string {
  return `dl_${crypto.createHash('sha256').update(replica).digest('hex').slice(0, 10)}_`;
}

const HOUR_MS = 3_600_000;
/** Below this a grant is not halved: what is left goes whole. */
const SMALLEST_GRANT = 64 * 1024;
const MINUTE_MS = 60_000;

export function sqliteMeter(store: StateStore, opts: MeterOptions = {}): UsageMeter {
  const now = opts.now ?? (() => new Date());
  return {
    async begin(principal: Principal, pull: PullRequest): Promise<UsageTicket> {
      const at = now();
      // An export's charge has its job's id (pull.chargeId): a build retried on another worker, after the one
      // that charged died before marking the job done, finds the charge instead of making a second one.
      const id = pull.chargeId ?? (opts.downloadIdPrefix ? `${opts.downloadIdPrefix}${newId('').slice(1)}` : newId('dl'));
      const shared = pull.kind === 'download' ? opts.downloadRate : undefined;
      if (shared) {
        const { user, ent } = await covered(store, principal.userId, pull, at);
        await shared.acquire(user.id, id, rateWindows(ent), at);
      }
      try {
        await store.tx(async (t) => {
          await lockUser(t, principal.userId);
          const { user, ent } = await covered(t, principal.userId, pull, at);
          if (pull.kind === 'download' && !shared) await checkDownloadRate(t, user.id, rateWindows(ent), at);
          const allowance = ent.plan.fair_use_bytes_month;
          const used = await fairUseUsedBytes(t, user.id, ent.period.start, ent.period.end);
          const estimated = Math.max(0, Math.floor(Number.isFinite(pull.estimatedBytes) ? pull.estimatedBytes : 0));
          if (used >= allowance || used + estimated > allowance) {
            throw fairUseCap(ent.plan.name, allowance, used, estimated, ent.period.end);
          }
          await insertPull(t, {
            id,
            user_id: user.id,
            key_id: principal.keyId,
            kind: pull.kind,
            dataset: pull.dataset,
            description: pull.description.slice(0, 500),
            market_id: pull.marketId ?? null,
            format: pull.format ?? null,
            file_name: pull.fileName ?? null,
            timeframe: pull.timeframe ?? null,
            start_date: pull.start ?? null,
            end_date: pull.end ?? null,
            status: 'pending',
            reserved_bytes: estimated,
            bytes: null,
            rows: null,
            reason: null,
            created_at: at.toISOString(),
            finished_at: null,
          });
        });
      } catch (err) {
        if (shared) await shared.release(principal.userId, id).catch(() => {});
        throw err;
      }
      const slot = shared ? { limiter: shared, userId: principal.userId } : undefined;
      return ticketFor(store, { id, userId: principal.userId }, now, opts.log, slot);
    },
    async authorize(principal: Principal, pull: Pick<PullRequest, 'kind' | 'dataset'>): Promise<void> {
      await covered(store, principal.userId, pull, now());
    },
  };
}

/** The caller's user and entitlement, once the plan covers the pull (401 unknown user, 402 not covered). */
async function covered(t: Db, userId: string, pull: Pick<PullRequest, 'kind' | 'dataset'>, at: Date): Promise<{ user: UserRow; ent: Entitlement }> {
  const user = await t.get<UserRow>(sql`SELECT * FROM users WHERE id = ${userId}`);
  if (!user) throw new Unauthorized('Invalid API key');
  const ent = await entitlementOf(t, user, at);
  const cov = coverage(ent, pull.dataset, pull.kind);
  if (!cov.ok) {
    throw new PaymentRequired({ code: cov.code, message: cov.message, plan: ent.plan.id, required_plan: cov.required_plan });
  }
  return { user, ent };
}

/** The plan's download rate (per hour) and burst cap (per minute, when it has one). */
function rateWindows(ent: Entitlement): RateWindow[] {
  const windows: RateWindow[] = [{ limit: ent.plan.downloads_per_hour, windowMs: HOUR_MS }];
  if (ent.plan.downloads_per_minute !== null) windows.push({ limit: ent.plan.downloads_per_minute, windowMs: MINUTE_MS });
  return windows;
}

/** A ticket by id: exports that outlive a restart settle through this (see settleTicket/refundTicket). */
function ticketFor(
  store: StateStore,
  { id, userId }: { id: string; userId: string },
  now: () => Date,
  log?: Logger,
  slot?: { limiter: DownloadRateLimiter; userId: string },
): UsageTicket {
  return {
    id,
    reserve: (bytes) => reserveMore(store, { id, userId, bytes, at: now() }),
    async commit(result) {
      try {
        await completePull(store, id, Math.max(0, Math.round(result.bytes)), Math.max(0, Math.round(result.rows)), now());
      } catch (err) {
        // Settling must never take down the response that already went out; the row stays pending (reserved).
        log?.error({ err, ticket: id }, 'usage commit failed');
      }
    },
    async refund(reason) {
      try {
        // A shared rate slot goes back with the row (once: only when this call settled it).
        if ((await failPull(store, id, reason, now())) && slot) {
          await slot.limiter.release(slot.userId, id).catch((err: unknown) => log?.warn({ err, ticket: id }, 'download-rate slot not released'));
        }
      } catch (err) {
        log?.error({ err, ticket: id }, 'usage refund failed');
      }
    },
  };
}

/**
 * One more grant for a pending pull, checked and taken in one transaction with the user's row locked (as
 * `begin`), so grants of concurrent streams on every replica never add up past the allowance.
 */
async function reserveMore(store: StateStore, g: { id: string; userId: string; bytes: number; at: Date }): Promise<number> {
  const want = Math.max(0, Math.floor(g.bytes));
  if (want === 0) return 0;
  return store.tx(async (t) => {
    await lockUser(t, g.userId);
    const user = await t.get<UserRow>(sql`SELECT * FROM users WHERE id = ${g.userId}`);
    if (!user) return 0;
    const ent = await entitlementOf(t, user, g.at);
    const used = await fairUseUsedBytes(t, user.id, ent.period.start, ent.period.end);
    const left = ent.plan.fair_use_bytes_month - used;
    // Near the end of the allowance a grant is at most half of what is left, so no one stream of the user's
    // takes it all while the others wait.
    const grant = Math.min(want, left, Math.max(SMALLEST_GRANT, Math.floor(left / 2)));
    if (grant <= 0) return 0;
    const n = await t.run(sql`UPDATE pulls SET reserved_bytes = reserved_bytes + ${grant} WHERE id = ${g.id} AND status = 'pending'`);
    return n === 1 ? grant : 0;
  });
}

/** Settles a ticket by id (exports resumed after a restart). False when it was already settled. */
export function settleTicket(store: Db, id: string, result: { bytes: number; rows: number }, at: Date = new Date()): Promise<boolean> {
  return completePull(store, id, Math.max(0, Math.round(result.bytes)), Math.max(0, Math.round(result.rows)), at);
}

/** Refunds a ticket by id. False when it was already settled. */
export function refundTicket(store: Db, id: string, reason: string, at: Date = new Date()): Promise<boolean> {
  return failPull(store, id, reason, at);
}

/**
 * Sliding windows over the download history: a refunded download frees its slot. Retry-After is when the
 * oldest counted download leaves the window.
 */
async function checkDownloadRate(t: Db, userId: string, windows: readonly RateWindow[], at: Date): Promise<void> {
  for (const { limit, windowMs } of windows) {
    const { count, oldest } = await downloadsSince(t, userId, new Date(at.getTime() - windowMs));
    if (count >= limit) throw downloadRateExceeded(limit, (oldest ? Date.parse(oldest) : at.getTime()) + windowMs, at.getTime());
  }
}

function fairUseCap(planName: string, allowance: number, used: number, estimated: number, resetsAt: Date): QuotaExceeded {
  const gb = (b: number) => `${(b / 1024 ** 3).toFixed(2)} GB`;
  const message =
    used >= allowance
      ? `The ${planName} plan's monthly fair-use volume of ${gb(allowance)} is used up; it resets on ${resetsAt.toISOString()}`
      : `This pull (about ${gb(estimated)}) would exceed the ${planName} plan's monthly fair-use volume: ${gb(allowance - used)} of ${gb(allowance)} left until ${resetsAt.toISOString()}`;
  // No Retry-After on purpose: retrying does not help before the next billing date.
  return new QuotaExceeded({
    code: 'fair_use_cap',
    message,
    allowance_bytes: allowance,
    used_bytes: used,
    resets_at: resetsAt.toISOString(),
  });
}
