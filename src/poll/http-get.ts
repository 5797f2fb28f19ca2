/**
 * One GET of a catalogue page with Node's fetch: a timeout per attempt, and retries of what passes (429, 5xx,
 * network errors, timeouts) with full-jitter exponential backoff, waiting at least what a `Retry-After` asks.
 * Never throws: the answer is a body, or why there is none. The policy (and its cap on `Retry-After`) is src/retry.ts.
 */
import { MAX_RETRY_AFTER_MS, backoffMs as backoff, honouredRetryAfter, retryWaitMs } from '../retry.js';

export type GetOptions = {
  timeoutMs: number;
  /** Attempts after the first. */
  retries: number;
  baseDelayMs: number;
  maxDelayMs: number;
  /** Aborts the attempt in flight and the wait between attempts (the poller stopping). */
  signal?: AbortSignal;
  /** Called before each wait, for the log. */
  onRetry?: (info: { url: string; attempt: number; status: number | null; message: string; waitMs: number }) => void;
  /** Tests: the random number in [0, 1) for the jitter. */
  random?: () => number;
};

export type GetResult =
  { ok: true; status: number; body: string; attempts: number } | { ok: false; status: number | null; body?: string; message: string; attempts: number };

export const DEFAULT_GET: Omit<GetOptions, 'signal' | 'onRetry' | 'random'> = { timeoutMs: 30_000, retries: 6, baseDelayMs: 500, maxDelayMs: 30_000 };

/** `Retry-After` as the poller waits for it: delta-seconds or an HTTP date, capped; null when absent or unreadable. */
export function retryAfterMs(header: string | null, now = Date.now()): number | null {
  return honouredRetryAfter(header, MAX_RETRY_AFTER_MS, now);
}

/** Full jitter: uniform in [0, min(max, base·2^attempt)). */
export function backoffMs(attempt: number, base: number, max: number, random: () => number): number {
  return backoff(attempt, { baseMs: base, maxMs: max }, random);
}

const retryable = (status: number): boolean => status === 429 || status >= 500;

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const t = setTimeout(done, ms);
    function done(): void {
      clearTimeout(t);
      signal?.removeEventListener('abort', done);
      resolve();
    }
    signal?.addEventListener('abort', done, { once: true });
  });
}

export async function getWithRetries(url: string, opts: GetOptions): Promise<GetResult> {
  const random = opts.random ?? Math.random;
  for (let attempt = 0; ; attempt++) {
    let status: number | null = null;
    let body: string | undefined;
    let message: string;
    let retryAfter: string | null = null;
    const timeout = AbortSignal.timeout(opts.timeoutMs);
    const signal = opts.signal ? AbortSignal.any([opts.signal, timeout]) : timeout;
    try {
      const res = await fetch(url, { signal, headers: { accept: 'application/json' } });
      status = res.status;
      body = await res.text();
      if (res.ok) return { ok: true, status, body, attempts: attempt + 1 };
      message = `HTTP ${status}`;
      if (!retryable(status)) return { ok: false, status, body, message, attempts: attempt + 1 };
      retryAfter = res.headers.get('retry-after');
    } catch (err) {
      if (opts.signal?.aborted) return { ok: false, status, message: 'stopped', attempts: attempt + 1 };
      const e = err as Error & { cause?: { code?: string; message?: string } };
      message = timeout.aborted ? `no answer within ${opts.timeoutMs} ms` : `${e.message}${e.cause?.code ? ` (${e.cause.code})` : ''}`;
    }
    if (attempt >= opts.retries) return { ok: false, status, ...(body !== undefined ? { body } : {}), message, attempts: attempt + 1 };
    const waitMs = retryWaitMs(attempt, { baseMs: opts.baseDelayMs, maxMs: opts.maxDelayMs }, retryAfter, random);
    opts.onRetry?.({ url, attempt: attempt + 1, status, message, waitMs });
    await sleep(waitMs, opts.signal);
    if (opts.signal?.aborted) return { ok: false, status, message: 'stopped', attempts: attempt + 1 };
  }
}
