/**
 * Fixed-window hit counters: the request limiter's buckets (src/http/ratelimit.ts) count through one of these.
 * In-process by default (MemoryCounterStore); shared by every replica when PMLAKE_REDIS_URL is set
 * (RedisCounterStore in ./redis.ts). Nothing here knows of HTTP.
 */

/** A window's hits so far and when it ends; `hits` may grow after it is returned, `resetAt` never changes. */
export type Hits = { readonly hits: number; readonly resetAt: number };

/** A fixed-window hit counter. A shared implementation answers asynchronously. */
export interface CounterStore {
  /**
   * Counts a hit for `key` at `now` (ms) and returns the window's hits so far and when it ends. A shared store
   * that cannot be reached rejects with the core's Unavailable (nothing counted) — never lets a request through.
   */
  increment(key: string, now: number): Hits | Promise<Hits>;
  /** Gives back one hit of the window that ends at `resetAt` (nothing when that window is over). */
  decrement(key: string, resetAt: number): void | Promise<void>;
}

/** In-process windows; expired ones are swept once a window, so idle keys do not accumulate. */
export class MemoryCounterStore implements CounterStore {
  private readonly windows = new Map<string, { hits: number; resetAt: number }>();
  private readonly sweeper: NodeJS.Timeout;

  constructor(private readonly windowMs: number) {
    this.sweeper = setInterval(() => {
      const now = Date.now();
      for (const [k, w] of this.windows) if (w.resetAt <= now) this.windows.delete(k);
    }, windowMs);
    this.sweeper.unref();
  }

  increment(key: string, now: number): Hits {
    let w = this.windows.get(key);
    if (!w || w.resetAt <= now) {
      w = { hits: 0, resetAt: now + this.windowMs };
      this.windows.set(key, w);
    }
    w.hits++;
    return w;
  }

  decrement(key: string, resetAt: number): void {
    const w = this.windows.get(key);
    if (w && w.resetAt === resetAt && w.hits > 0) w.hits--;
  }
}
