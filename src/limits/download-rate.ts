import { RateLimited } from '../errors.js';

/**
 * The per-plan download rate and burst cap (src/accounts/plans.ts: downloads_per_hour, downloads_per_minute) as
 * sliding windows over the downloads that hold a slot; a refunded download gives its slot back. On one box the
 * usage meter counts them in the state store, inside its transaction (src/accounts/usage.ts); with
 * PMLAKE_REDIS_URL they live in Redis (./redis.ts) so every replica sees every download.
 */
export type RateWindow = { readonly limit: number; readonly windowMs: number };

export interface DownloadRateLimiter {
  /**
   * Takes a slot for download `downloadId` of `userId` at `at` in every window at once, or takes none and throws
   * RateLimited (a window is full) or Unavailable (the shared store cannot be reached).
   */
  acquire(userId: string, downloadId: string, windows: readonly RateWindow[], at: Date): Promise<void>;
  /** Gives the slot of a refunded download back. Best effort: a slot that cannot be released ages out. */
  release(userId: string, downloadId: string): Promise<void>;
}

/**
 * The refusal of a full window, the same whichever store counted: Retry-After is when the oldest counted
 * download leaves the window (`freeAtMs`).
 */
export function downloadRateExceeded(limit: number, freeAtMs: number, atMs: number): RateLimited {
  return new RateLimited((freeAtMs - atMs) / 1000, {
    'X-RateLimit-Limit': String(limit),
    'X-RateLimit-Remaining': '0',
    'X-RateLimit-Reset': String(Math.ceil(freeAtMs / 1000)),
  });
}
