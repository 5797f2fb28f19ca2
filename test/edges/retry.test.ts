import { describe, expect, it } from 'vitest';
import { seededRandom as seeded } from '../../bench/stats.js';
import { MAX_RETRY_AFTER_MS, backoffMs, honouredRetryAfter, parseRetryAfter, retryWaitMs } from '../../src/retry.js';

const now = Date.UTC(2026, 10, 26, 12, 0, 0);

describe('parseRetryAfter', () => {
  it('reads delta-seconds, a fraction included, and white space around them', () => {
    expect(parseRetryAfter('3', now)).toBe(3000);
    expect(parseRetryAfter(' 120 ', now)).toBe(120_000);
    expect(parseRetryAfter('0', now)).toBe(0);
    expect(parseRetryAfter('1.5', now)).toBe(1500);
    expect(parseRetryAfter('86400', now)).toBe(86_400_000);
  });

  it('reads an HTTP date as the time until it, a date past as 0', () => {
    expect(parseRetryAfter('Thu, 26 Nov 2026 12:00:07 GMT', now)).toBe(7000);
    expect(parseRetryAfter('Thu, 26 Nov 2026 12:10:00 GMT', now)).toBe(600_000);
    expect(parseRetryAfter('Thu, 26 Nov 2026 11:00:00 GMT', now)).toBe(0);
  });

  it('is null when absent, empty, garbage or negative', () => {
    for (const h of [null, undefined, '', '   ', 'soon', 'later, please', '1e3s', '-5', '-0.5', '+3']) expect(parseRetryAfter(h, now), String(h)).toBeNull();
  });
});

describe('honouredRetryAfter', () => {
  it('caps what is read at the policy maximum, five minutes unless told', () => {
    expect(honouredRetryAfter('86400', undefined, now)).toBe(MAX_RETRY_AFTER_MS);
    expect(MAX_RETRY_AFTER_MS).toBe(300_000);
    expect(honouredRetryAfter('Fri, 27 Nov 2026 12:00:00 GMT', undefined, now)).toBe(MAX_RETRY_AFTER_MS);
    expect(honouredRetryAfter('90', 60_000, now)).toBe(60_000);
    expect(honouredRetryAfter('30', 60_000, now)).toBe(30_000);
    expect(honouredRetryAfter('soon', 60_000, now)).toBeNull();
  });
});

describe('backoffMs', () => {
  it('stays in [0, min(max, base·2^attempt)) and is a whole number, with a seeded random', () => {
    const random = seeded(42);
    const policy = { baseMs: 100, maxMs: 5000 };
    for (let attempt = 0; attempt < 40; attempt++) {
      const ceiling = Math.min(policy.maxMs, policy.baseMs * 2 ** attempt);
      for (let i = 0; i < 50; i++) {
        const ms = backoffMs(attempt, policy, random);
        expect(Number.isInteger(ms)).toBe(true);
        expect(ms).toBeGreaterThanOrEqual(0);
        expect(ms).toBeLessThan(ceiling);
      }
    }
  });

  it('doubles its ceiling up to the maximum: the extremes of the random', () => {
    const policy = { baseMs: 100, maxMs: 1000 };
    expect([0, 1, 2, 3, 10].map((a) => backoffMs(a, policy, () => 0.999))).toEqual([99, 199, 399, 799, 999]);
    expect(backoffMs(5, policy, () => 0)).toBe(0);
  });

  it('spreads the waits over the range (full jitter), the same for the same seed', () => {
    const a = Array.from({ length: 200 }, () => backoffMs(6, { baseMs: 500, maxMs: 30_000 }, seeded(7)));
    expect(new Set(a).size).toBe(1);
    const random = seeded(7);
    const spread = Array.from({ length: 200 }, () => backoffMs(6, { baseMs: 500, maxMs: 30_000 }, random));
    expect(Math.min(...spread)).toBeLessThan(3000);
    expect(Math.max(...spread)).toBeGreaterThan(27_000);
  });

  it('does not overflow after a long run of failures, nor turn a zero base into NaN', () => {
    expect(backoffMs(5000, { baseMs: 500, maxMs: 30_000 }, () => 0.5)).toBe(15_000);
    expect(backoffMs(5000, { baseMs: 0, maxMs: 30_000 }, () => 0.5)).toBe(0);
  });
});

describe('retryWaitMs', () => {
  const policy = { baseMs: 100, maxMs: 1000 };
  it('is the backoff when the server asks nothing, or asks less', () => {
    expect(retryWaitMs(3, policy, null, () => 0.5)).toBe(400);
    expect(retryWaitMs(3, policy, '0', () => 0.5)).toBe(400);
    expect(retryWaitMs(3, policy, 'garbage', () => 0.5)).toBe(400);
  });

  it('is the Retry-After when longer, up to the cap', () => {
    expect(retryWaitMs(0, policy, '2', () => 0.5)).toBe(2000);
    expect(retryWaitMs(0, policy, '86400', () => 0.5)).toBe(MAX_RETRY_AFTER_MS);
    expect(retryWaitMs(0, { ...policy, maxRetryAfterMs: 1500 }, '2', () => 0.5)).toBe(1500);
  });
});
