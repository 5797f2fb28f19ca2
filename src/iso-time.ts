/** ISO 8601 text → microseconds since the epoch: query parameters, and the instants the runner writes. */

/** 0000-01-01T00:00:00Z and 9999-12-31T23:59:59.999999Z: the instants ISO 8601's four-digit years name (UTC). */
export const MIN_ISO_MICROS = -62_167_219_200_000_000n;
export const MAX_ISO_MICROS = 253_402_300_799_999_999n;

const DATE_RE = /^(\d{4})-(\d{2})-(\d{2})(?:[T ](\d{2}):(\d{2})(?::(\d{2})(?:\.(\d{1,9}))?)?(Z|z|[+-]\d{2}:?\d{2})?)?$/;

/**
 * ISO 8601 → microseconds since the epoch (UTC). Accepts a date (`2025-03-01`, midnight UTC), a datetime
 * with `Z` or an offset, and a naive datetime, read as UTC (what the anchor's Python client sends for naive
 * `datetime`s). Anything else, or an impossible date like 2025-02-30, is refused.
 */
export function parseIsoMicros(text: string): bigint | null {
  const m = DATE_RE.exec(text);
  if (!m) return null;
  const [, y, mo, d, h = '00', mi = '00', s = '00', frac = '', tz] = m;
  const Y = Number(y),
    M = Number(mo),
    D = Number(d),
    H = Number(h),
    MI = Number(mi),
    S = Number(s);
  if (M < 1 || M > 12 || D < 1 || D > 31 || H > 23 || MI > 59 || S > 59) return null;
  // Not Date.UTC(Y, …): it maps years 0–99 to 1900–1999 (the two-digit-year rule), so "0001-01-01" became
  // 1901. setUTCFullYear takes the year as given; years 0000–0099 are read exactly (proleptic Gregorian, as
  // ISO 8601 and DuckDB count them).
  const check = new Date(0);
  check.setUTCFullYear(Y, M - 1, D);
  check.setUTCHours(H, MI, S, 0);
  const ms = check.getTime();
  if (check.getUTCDate() !== D || check.getUTCMonth() !== M - 1) return null;
  let offsetMin = 0;
  if (tz && tz !== 'Z' && tz !== 'z') {
    const sign = tz[0] === '-' ? -1 : 1;
    const digits = tz.slice(1).replace(':', '');
    const oh = Number(digits.slice(0, 2)),
      om = Number(digits.slice(2, 4));
    if (oh > 23 || om > 59) return null;
    offsetMin = sign * (oh * 60 + om);
  }
  const micros = BigInt(ms - offsetMin * 60_000) * 1000n + BigInt((frac + '000000').slice(0, 6));
  return micros;
}
