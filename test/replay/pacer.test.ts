import { describe, expect, it } from 'vitest';
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
