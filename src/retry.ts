/**
 * The one retry policy of the service's outbound edges (the catalogue poller's GETs, the chain indexer's JSON-RPC,
 * the recorder's venue socket): full-jitter exponential backoff, and a server's `Retry-After` honoured up to a cap.
 *
 * The rule: a wait is the larger of the backoff and the server's `Retry-After`, and a `Retry-After` counts for at
 * most `maxRetryAfterMs` (by default `MAX_RETRY_AFTER_MS`). A server may ask for an hour or a date next week; a
 * long-running role that obeyed would look hung, so it asks again after the cap and lets the server say no again.
 */

/** Full-jitter exponential backoff: the first ceiling and the largest. */
export type Backoff = { baseMs: number; maxMs: number };

export type RetryPolicy = Backoff & {
  /** The most a `Retry-After` is waited for (default `MAX_RETRY_AFTER_MS`). */
  maxRetryAfterMs?: number;
};

/** A server asking for more than this is not waited for longer (a poll or an indexer would never move on). */
export const MAX_RETRY_AFTER_MS = 5 * 60_000;

/**
 * `Retry-After` as milliseconds from `now`: delta-seconds (`120`, a fraction allowed) or an HTTP date (a date past
 * is 0). Null when absent or unreadable, a negative number included: the header then asks for nothing.
 */
export function parseRetryAfter(header: string | null | undefined, now = Date.now()): number | null {
  const s = header?.trim() ?? '';
  if (s === '') return null;
  if (/^\d+(\.\d+)?$/.test(s)) return Number(s) * 1000;
  // Date.parse makes some date of a bare number (`-5`); a number is delta-seconds or nothing.
  if (/^[-+]?[\d.]+$/.test(s)) return null;
  const at = Date.parse(s);
  return Number.isNaN(at) ? null : Math.max(0, at - now);
}

/** `parseRetryAfter` within the policy's cap: what a caller actually waits for at least. */
export function honouredRetryAfter(header: string | null | undefined, maxRetryAfterMs = MAX_RETRY_AFTER_MS, now = Date.now()): number | null {
  const ms = parseRetryAfter(header, now);
  return ms === null ? null : Math.min(maxRetryAfterMs, ms);
}

/**
 * Full jitter: a whole number of milliseconds uniform in [0, min(maxMs, baseMs·2^attempt)), `attempt` counted from
 * 0. Spreading the waits over the whole range keeps many clients that failed together from retrying together.
 */
export function backoffMs(attempt: number, { baseMs, maxMs }: Backoff, random: () => number = Math.random): number {
  // 2^attempt overflows to Infinity after a long run of failures; min() then gives maxMs, and a zero base stays 0.
  const ceiling = baseMs <= 0 ? 0 : Math.min(maxMs, baseMs * 2 ** attempt);
  return Math.floor(random() * ceiling);
}

/** The wait before attempt `attempt + 1`: the backoff, or the server's (capped) `Retry-After` when that is longer. */
export function retryWaitMs(attempt: number, policy: RetryPolicy, retryAfterHeader: string | null | undefined, random: () => number = Math.random): number {
  return Math.max(honouredRetryAfter(retryAfterHeader, policy.maxRetryAfterMs) ?? 0, backoffMs(attempt, policy, random));
}
