import { describe, expect, it } from 'vitest';
import { atLeast, atMost, fmtCount, isFlat, mbPerSecond, median, percentile, seededRandom, speedRatio } from '../../bench/stats.js';
import { summarize } from '../../bench/runner.js';

describe('bench statistics', () => {
  it('median of odd and even counts, ignoring non-finite values', () => {
    expect(median([5, 1, 3])).toBe(3);
    expect(median([4, 1, 3, 2])).toBe(2.5);
    expect(median([2, Number.NaN, 8])).toBe(5);
    expect(median([])).toBeNaN();
  });

  it('nearest-rank percentiles', () => {
    const xs = Array.from({ length: 100 }, (_, i) => 100 - i); // 100..1, unsorted on purpose
    expect(percentile(xs, 50)).toBe(50);
    expect(percentile(xs, 99)).toBe(99);
    expect(percentile(xs, 100)).toBe(100);
    expect(percentile([7], 99)).toBe(7);
  });

  it('speed ratio is baseline time over pmlake time', () => {
    expect(speedRatio(0.5, 1)).toBe(2);
    expect(speedRatio(1.2, 1)).toBeCloseTo(1 / 1.2, 12);
    expect(speedRatio(0, 1)).toBeNaN();
    expect(speedRatio(1, Number.NaN)).toBeNaN();
  });

  it('target checks: bounds are inclusive, unknown values undecided', () => {
    expect(atLeast('x', 0.8, 0.8).met).toBe(true);
    expect(atLeast('x', 0.79, 0.8).met).toBe(false);
    expect(atLeast('x', Number.NaN, 0.8).met).toBeNull();
    expect(atMost('x', 0.1, 0.1).met).toBe(true);
    expect(atMost('x', 0.11, 0.1).met).toBe(false);
  });

  it('flat memory: within 1.25× or 64 MiB of the small pull', () => {
    const MiB = 2 ** 20;
    expect(isFlat(400 * MiB, 460 * MiB)).toBe(true); // +15 %
    expect(isFlat(100 * MiB, 160 * MiB)).toBe(true); // +60 % but only 60 MiB
    expect(isFlat(400 * MiB, 900 * MiB)).toBe(false);
  });

  it('MB/s and counts', () => {
    expect(mbPerSecond(50_000_000, 2)).toBe(25);
    expect(mbPerSecond(undefined, 2)).toBeNaN();
    expect(fmtCount(12_345_678)).toBe('12.3M');
    expect(fmtCount(1_500_000)).toBe('1.50M');
    expect(fmtCount(4500)).toBe('4.5k');
    expect(fmtCount(999)).toBe('999');
  });

  it('seeded random is reproducible and in [0, 1)', () => {
    const a = seededRandom(42);
    const b = seededRandom(42);
    const xs = Array.from({ length: 1000 }, () => a());
    expect(xs).toEqual(Array.from({ length: 1000 }, () => b()));
    expect(Math.min(...xs)).toBeGreaterThanOrEqual(0);
    expect(Math.max(...xs)).toBeLessThan(1);
    expect(new Set(xs).size).toBeGreaterThan(990);
  });

  it('summarize takes medians of times and the worst peak memory', () => {
    const s = summarize([
      { seconds: 3, rows: 10, bytes: 300, peakRss: 100 },
      { seconds: 1, rows: 10, bytes: 100, peakRss: 500 },
      { seconds: 2, rows: 10, bytes: 200, peakRss: 200 },
    ]);
    expect(s.seconds).toBe(2);
    expect(s.samples).toEqual([3, 1, 2]);
    expect(s.bytes).toBe(200);
    expect(s.mbPerSec).toBeCloseTo(200 / 1e6 / 2, 12);
    expect(s.peakRss).toBe(500);
  });
});
