import { describe, expect, it, vi } from 'vitest';
import { Pacer } from '../../src/replay/pacer.js';

/** The pacer on a clock the test moves: when each frame is due, and the lateness it reports. */
describe('Pacer', () => {
  it('speed 60: a frame received d ms after the origin is due d/60 ms after the start; lateness is measured', async () => {
    let now = 1000;
    const p = new Pacer(60, 50_000, () => now);
    expect(p.dueAt(50_000)).toBe(1000);
    expect(p.dueAt(56_000)).toBe(1100);
    // Already late by 40 ms: no wait, counted.
    now = 1140;
    expect(await p.wait(56_000)).toBe(true);
    expect(p.stats()).toEqual({ paced: 1, lateMsMax: 40, lateMsMean: 40 });
  });

  it('speed 0 never waits; an aborted wait says so', async () => {
    const p = new Pacer(0, 0, () => 0);
    expect(p.dueAt(1e12)).toBe(0);
    expect(await p.wait(1e12)).toBe(true);
    const slow = new Pacer(1, 0);
    const ac = new AbortController();
    const w = slow.wait(3_600_000, ac.signal);
    ac.abort();
    expect(await w).toBe(false);
  });
});

describe('Pacer: waits beyond the timer range', () => {
  it('a frame due 30 days after the start is sent 30 days later, not at once (Node timers overflow past 2^31-1 ms)', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'Date'] });
    try {
      const DAY = 86_400_000;
      const p = new Pacer(1, 0, () => Date.now());
      let done = false;
      const w = p.wait(30 * DAY).then((ok) => (done = ok));
      // Past one timer's range (24.8 days) and short of the frame's time: still waiting.
      await vi.advanceTimersByTimeAsync(29 * DAY);
      expect(done).toBe(false);
      await vi.advanceTimersByTimeAsync(DAY + 10);
      await w;
      expect(done).toBe(true);
      expect(p.stats().lateMsMax).toBeLessThan(100);
    } finally {
      vi.useRealTimers();
    }
  });
});
