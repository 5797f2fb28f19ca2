import { addRequestCounts } from '../state/usage.js';
import type { StateStore } from '../state/store.js';

/**
 * Counts requests per key and day for GET /v1/user/usage. Counts are summed in memory and written every
 * `flushMs` in one transaction (and when the store closes): a durable commit per request would cost an fsync
 * (or a PostgreSQL round trip) each. A kill -9 can lose at most the last interval of request counts — never money or fair-use bytes,
 * which the meter writes transactionally.
 */
export class RequestCounter {
  private pending = new Map<string, { userId: string; keyId: string; day: string; n: number }>();
  private readonly timer: NodeJS.Timeout;

  constructor(
    private readonly store: StateStore,
    flushMs = 2000,
  ) {
    this.timer = setInterval(() => void this.flush(), flushMs);
    this.timer.unref();
    store.onClose(async () => {
      clearInterval(this.timer);
      await this.flush();
    });
  }

  /** The UTC day of the last count and when it ends: formatting a date per request showed in the profile. */
  private day = '';
  private dayEnds = 0;

  count(userId: string, keyId: string | null, at: number | Date = Date.now(), n = 1): void {
    const t = typeof at === 'number' ? at : at.getTime();
    if (t >= this.dayEnds || t < this.dayEnds - DAY_MS) {
      this.day = new Date(t).toISOString().slice(0, 10);
      this.dayEnds = Date.parse(`${this.day}T00:00:00Z`) + DAY_MS;
    }
    const day = this.day;
    const k = `${userId}\u0000${keyId ?? ''}\u0000${day}`;
    const cur = this.pending.get(k);
    if (cur) cur.n += n;
    else this.pending.set(k, { userId, keyId: keyId ?? '', day, n });
  }

  /** Writes the counts so far (a benign write: it cannot change what a key may do, so the principal cache stays). */
  async flush(): Promise<void> {
    if (this.pending.size === 0 || this.store.isClosed) return;
    const batch = [...this.pending.values()];
    this.pending = new Map();
    try {
      await addRequestCounts(this.store, batch);
    } catch {
      // Busy past busy_timeout (another process holds the write lock) or the database away: keep the counts for
      // the next flush instead of throwing from a timer.
      for (const c of batch) this.count(c.userId, c.keyId || null, Date.parse(`${c.day}T12:00:00Z`), c.n);
    }
  }
}

const DAY_MS = 86_400_000;

const counters = new WeakMap<StateStore, RequestCounter>();

/** One counter per store, shared by every app built on it. */
export function requestCounterFor(store: StateStore): RequestCounter {
  let c = counters.get(store);
  if (!c) {
    c = new RequestCounter(store);
    counters.set(store, c);
  }
  return c;
}
