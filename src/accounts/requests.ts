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

  count(userId: string, keyId: string | null, at: Date = new Date()): void {
    const day = at.toISOString().slice(0, 10);
    const k = `${userId}\u0000${keyId ?? ''}\u0000${day}`;
    const cur = this.pending.get(k);
    if (cur) cur.n++;
    else this.pending.set(k, { userId, keyId: keyId ?? '', day, n: 1 });
  }

  flush(): void {
    if (this.pending.size === 0) return;
    const batch = [...this.pending.values()];
    this.pending = new Map();
    addRequestCounts(this.store, batch);
  }
}

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
