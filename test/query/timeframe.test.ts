import { describe, expect, it } from 'vitest';
import { bucketCeil, bucketFloor, isMinuteMultiple, parseTimeframe, timeframeOf } from '../../src/timeframe.js';
import { parseIsoMicros } from '../../src/http/params.js';
import { decimalToNumber, isoFromMicros, toJson } from '../../src/lake/values.js';

const us = (iso: string): bigint => BigInt(Date.parse(iso)) * 1000n;

describe('timeframe parser', () => {
  it('parses any whole number of s, m, h, d, w within 1s..4w', () => {
    const ok: [string, number][] = [
      ['30s', 30],
      ['1m', 60],
      ['2m', 120],
      ['7m', 420],
      ['15m', 900],
      ['1h', 3600],
      ['2h', 7200],
      ['4h', 14400],
      ['12h', 43200],
      ['1d', 86400],
      ['1w', 604800],
      ['90s', 90],
      ['4w', 2419200],
      ['1s', 1],
    ];
    for (const [t, s] of ok) {
      const r = parseTimeframe(t);
      expect(r.ok, t).toBe(true);
      if (r.ok) expect(r.value.seconds).toBe(s);
    }
    for (const bad of ['', '0m', '01m', '1', 'm', '1M', '1y', '5w', '1.5h', ' 1h', '1h ', '-1m', '1mo', "1m';--", '9999999w']) {
      expect(parseTimeframe(bad).ok, bad).toBe(false);
    }
    expect(timeframeOf(90).label).toBe('90s');
    expect(timeframeOf(7200).label).toBe('2h');
    expect(isMinuteMultiple(timeframeOf(90))).toBe(false);
    expect(isMinuteMultiple(timeframeOf(120))).toBe(true);
  });

  it('aligns to UTC multiples of the interval; weeks start Monday 00:00 UTC', () => {
    expect(bucketFloor(timeframeOf(3600), us('2025-09-16T13:47:12.5Z'))).toBe(us('2025-09-16T13:00:00Z'));
    expect(bucketFloor(timeframeOf(86400), us('2025-09-16T23:59:59Z'))).toBe(us('2025-09-16T00:00:00Z'));
    expect(bucketFloor(timeframeOf(4 * 3600), us('2025-09-16T03:59:59Z'))).toBe(us('2025-09-16T00:00:00Z'));
    expect(bucketFloor(timeframeOf(420), us('2025-09-16T00:00:00Z'))).toBe(us('2025-09-15T23:56:00Z'));
    // 2025-09-17 is a Wednesday; its week starts Monday 2025-09-15.
    expect(bucketFloor(timeframeOf(604800), us('2025-09-17T10:00:00Z'))).toBe(us('2025-09-15T00:00:00Z'));
    expect(bucketFloor(timeframeOf(604800), us('2025-09-15T00:00:00Z'))).toBe(us('2025-09-15T00:00:00Z'));
    expect(bucketFloor(timeframeOf(2 * 604800), us('2025-09-17T10:00:00Z')) % (604800n * 1_000_000n)).toBe(345_600_000_000n);
    expect(bucketCeil(timeframeOf(60), us('2025-09-16T00:00:00Z'))).toBe(us('2025-09-16T00:00:00Z'));
    expect(bucketCeil(timeframeOf(60), us('2025-09-16T00:00:00Z') + 1n)).toBe(us('2025-09-16T00:01:00Z'));
    expect(bucketFloor(timeframeOf(60), -1n)).toBe(-60_000_000n);
  });
});

describe('ISO 8601 input and JSON output', () => {
  it('reads dates, offsets and naive datetimes (UTC); refuses malformed ones', () => {
    expect(parseIsoMicros('2025-03-01')).toBe(us('2025-03-01T00:00:00Z'));
    expect(parseIsoMicros('2025-03-01T12:00:00Z')).toBe(us('2025-03-01T12:00:00Z'));
    expect(parseIsoMicros('2025-03-01T12:00:00')).toBe(us('2025-03-01T12:00:00Z'));
    expect(parseIsoMicros('2025-03-01T12:00:00+02:00')).toBe(us('2025-03-01T10:00:00Z'));
    expect(parseIsoMicros('2025-03-01T12:00:00-0530')).toBe(us('2025-03-01T17:30:00Z'));
    expect(parseIsoMicros('2025-03-01 12:00')).toBe(us('2025-03-01T12:00:00Z'));
    expect(parseIsoMicros('2025-03-01T12:00:00.123456789Z')).toBe(us('2025-03-01T12:00:00.123Z') + 456n);
    for (const bad of [
      '2025-02-30',
      '2025-13-01',
      '2025-3-1',
      '20250301',
      'yesterday',
      '2025-03-01T24:00:00Z',
      '2025-03-01T12:60Z',
      '2025-03-01T12:00:00+25:00',
      "2025-03-01';--",
    ]) {
      expect(parseIsoMicros(bad), bad).toBeNull();
    }
  });

  it('reads years 0000–0099 exactly (not as 1900–1999)', () => {
    // Independent of Date: days from 1970-01-01 in the proleptic Gregorian calendar (H. Hinnant's
    // days_from_civil), so the check does not share Date.UTC's two-digit-year rule.
    const daysFromCivil = (y: number, m: number, d: number): number => {
      y -= m <= 2 ? 1 : 0;
      const era = Math.floor(y / 400);
      const yoe = y - era * 400;
      const doy = Math.floor((153 * (m + (m > 2 ? -3 : 9)) + 2) / 5) + d - 1;
      const doe = yoe * 365 + Math.floor(yoe / 4) - Math.floor(yoe / 100) + doy;
      return era * 146097 + doe - 719468;
    };
    const micros = (y: number, m: number, d: number, h = 0, mi = 0, s = 0) =>
      (BigInt(daysFromCivil(y, m, d)) * 86_400n + BigInt(h * 3600 + mi * 60 + s)) * 1_000_000n;
    expect(parseIsoMicros('0001-01-01T00:00:00Z')).toBe(micros(1, 1, 1));
    expect(parseIsoMicros('0000-02-29')).toBe(micros(0, 2, 29)); // year 0 is a leap year
    expect(parseIsoMicros('0099-12-31T23:59:59Z')).toBe(micros(99, 12, 31, 23, 59, 59));
    expect(parseIsoMicros('0050-06-15T12:00:00+01:00')).toBe(micros(50, 6, 15, 11));
    expect(parseIsoMicros('0100-01-01')).toBe(micros(100, 1, 1));
    expect(parseIsoMicros('1999-12-31')).toBe(micros(1999, 12, 31));
    expect(parseIsoMicros('0001-02-29')).toBeNull(); // year 1 is not
    expect(parseIsoMicros('0100-02-29')).toBeNull(); // nor is 100
    expect(isoFromMicros(micros(1, 1, 1))).toBe('0001-01-01T00:00:00Z');
  });

  it('writes timestamps as ISO 8601 with Z, decimals exactly, big integers as text', () => {
    expect(isoFromMicros(us('2025-03-02T09:27:55Z'))).toBe('2025-03-02T09:27:55Z');
    expect(isoFromMicros(us('2025-03-02T09:27:55.42Z'))).toBe('2025-03-02T09:27:55.420Z');
    expect(isoFromMicros(us('2025-03-02T09:27:55Z') + 7n)).toBe('2025-03-02T09:27:55.000007Z');
    expect(decimalToNumber(550000n, 6)).toBe(0.55);
    expect(decimalToNumber(123456789n, 6)).toBe(123.456789);
    expect(toJson(42n)).toBe(42);
    expect(toJson(1757980800420000000n)).toBe('1757980800420000000');
  });
});
