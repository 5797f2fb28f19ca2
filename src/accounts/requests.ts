import { addRequestCounts } from '../state/usage.js';
import type { StateStore } from '../state/store.js';

/**
 * Counts requests per key and day for GET /v1/user/usage. Counts are summed in memory and written every
 * `flushMs` in one transaction (and when the store closes): a synchronous=FULL commit per request would cost an
 * fsync each. A kill -9 can lose at most the last interval of request counts — never money or fair-use bytes,
 * which the meter writes transactionally.
 */
export class RequestCounter {
  private pending = new Map<string, { userId: string; keyId: string; day: string; n: number }>();
  private readonly timer: NodeJS.Timeout;

  constructor(
    private readonly store: StateStore,
    flushMs = 2000,
  ) {
    this.timer = setInterval(() => this.flush(), flushMs);
    this.timer.unref();
    store.onClose(() => {
      clearInterval(this.timer);
      this.flush();
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

  flush(): void {
    if (this.pending.size === 0) return;
    const batch = [...this.pending.values()];
    this.pending = new Map();
    try {
      // Counters cannot change what a key may do: the write must not empty the principal cache (src/accounts/auth.ts).
      this.store.writeBehind(() => addRequestCounts(this.store, batch));
    } catch (err) {
      // Busy past busy_timeout (another process holds the write lock): keep the counts for the next flush
      // instead of throwing from a timer. A closed store cannot take them any more.
      if (!this.store.db.open) throw err;
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
