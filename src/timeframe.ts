/**
 * The one timeframe parser. `30s`, `1m`, `7m`, `2h`, `1d`, `1w`, … → a checked interval in seconds.
 *
 * Alignment: a bucket starts at a multiple of the interval counted from 1970-01-01T00:00:00Z, so every
 * timeframe that divides a day (1m, 5m, 15m, 1h, 4h, 12h, 1d, …) starts at midnight UTC. Week multiples
 * (1w, 2w, …) are counted from Monday 1970-01-05T00:00:00Z instead, so weeks start on Monday 00:00 UTC
 * (ISO weeks) rather than on the Thursday the Unix epoch fell on. Months are not offered: they are not a
 * fixed number of seconds.
 */
export type Timeframe = Readonly<{
  /** Canonical label, e.g. "7m" for "7m" or "420s". */
  label: string;
  seconds: number;
  /** Bucket origin in seconds since the Unix epoch (0, or the first Monday for week multiples). */
  originSeconds: number;
}>;

export const MIN_TIMEFRAME_SECONDS = 1;
/** Four weeks: beyond that a "candle" is a report, not a bar. */
export const MAX_TIMEFRAME_SECONDS = 4 * 7 * 86_400;
export const WEEK_ORIGIN_SECONDS = 4 * 86_400; // 1970-01-05, a Monday

const UNIT_SECONDS: Readonly<Record<string, number>> = { s: 1, m: 60, h: 3_600, d: 86_400, w: 604_800 };
const PATTERN = /^([1-9][0-9]{0,6})([smhdw])$/;

export type TimeframeResult = { ok: true; value: Timeframe } | { ok: false; message: string };

export function parseTimeframe(text: string): TimeframeResult {
  const m = PATTERN.exec(text);
  if (!m) {
    return { ok: false, message: 'timeframe must be a positive whole number followed by s, m, h, d or w (e.g. 30s, 1m, 7m, 4h, 1d, 1w)' };
  }
  const seconds = Number(m[1]) * UNIT_SECONDS[m[2]!]!;
  if (seconds < MIN_TIMEFRAME_SECONDS || seconds > MAX_TIMEFRAME_SECONDS) {
    return { ok: false, message: `timeframe must be between 1s and 4w (got ${text})` };
  }
  return { ok: true, value: timeframeOf(seconds) };
}

export function timeframeOf(seconds: number): Timeframe {
  return Object.freeze({ label: labelOf(seconds), seconds, originSeconds: seconds % 604_800 === 0 ? WEEK_ORIGIN_SECONDS : 0 });
}

function labelOf(seconds: number): string {
  for (const u of ['w', 'd', 'h', 'm'] as const) {
    const s = UNIT_SECONDS[u]!;
    if (seconds % s === 0) return `${seconds / s}${u}`;
  }
  return `${seconds}s`;
}

/** Whole minutes: such candles roll up from candles_1m instead of re-reading trades. */
export function isMinuteMultiple(tf: Timeframe): boolean {
  return tf.seconds % 60 === 0;
}

/** Whole hours whose buckets start on whole hours: such candles roll up from candles_1h. */
export function isHourMultiple(tf: Timeframe): boolean {
  return tf.seconds % 3600 === 0 && tf.originSeconds % 3600 === 0;
}

/** Start of the bucket holding `micros` (microseconds since the epoch, UTC). */
export function bucketFloor(tf: Timeframe, micros: bigint): bigint {
  const step = BigInt(tf.seconds) * 1_000_000n;
  const origin = BigInt(tf.originSeconds) * 1_000_000n;
  const rel = micros - origin;
  // BigInt division truncates toward zero; floor it for instants before the origin.
  const q = rel / step - (rel % step < 0n ? 1n : 0n);
  return q * step + origin;
}

/** End of the bucket holding `micros - 1`: the smallest bucket boundary >= micros. */
export function bucketCeil(tf: Timeframe, micros: bigint): bigint {
  const f = bucketFloor(tf, micros);
  return f === micros ? f : f + BigInt(tf.seconds) * 1_000_000n;
}
