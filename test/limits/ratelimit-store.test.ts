import { describe, expect, it } from 'vitest';
import { MemoryCounterStore } from '../../src/http/ratelimit.js';

/** The fixed-window counter behind the request limiter (the HTTP behaviour is in accounts-limits.test.ts). */
describe('MemoryCounterStore', () => {
  const W = 60_000;
  const t0 = 1_000_000;

  it('counts hits in a window that starts at the first hit and ends windowMs later', () => {
    const s = new MemoryCounterStore(W);
    // Copied at once: the returned window keeps counting later hits.
    const hit = (key: string, at: number) => ({ ...s.increment(key, at) });
    expect(hit('k', t0)).toEqual({ hits: 1, resetAt: t0 + W });
    expect(hit('k', t0 + 10)).toEqual({ hits: 2, resetAt: t0 + W });
    expect(hit('other', t0 + 10)).toEqual({ hits: 1, resetAt: t0 + 10 + W });
    expect(hit('k', t0 + W - 1).hits).toBe(3);
    // At resetAt the window is over: a new one starts.
    expect(hit('k', t0 + W)).toEqual({ hits: 1, resetAt: t0 + 2 * W });
  });

  it('gives back a hit only to the window it was counted in', () => {
    const s = new MemoryCounterStore(W);
    const first = { ...s.increment('k', t0) };
    s.increment('k', t0 + 1);
    s.decrement('k', first.resetAt);
    expect(s.increment('k', t0 + 2).hits).toBe(2);
    // A refund that arrives after its window rolled over must not shrink the new window.
    const nextHits = s.increment('k', t0 + W).hits;
    s.decrement('k', first.resetAt);
    expect(s.increment('k', t0 + W + 1).hits).toBe(nextHits + 1);
    // Never below zero.
    const fresh = s.increment('z', t0);
    s.decrement('z', fresh.resetAt);
    s.decrement('z', fresh.resetAt);
    expect(s.increment('z', t0 + 1).hits).toBe(1);
  });
});
