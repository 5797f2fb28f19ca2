/**
 * Small pure helpers for the benchmark: medians, percentiles, ratios and the target checks. Kept free of I/O
 * so test/bench/stats.test.ts can pin them down.
 */

/** Median of the values (mean of the two middle ones for an even count); NaN for none. */
export function median(values: readonly number[]): number {
  const xs = values.filter((v) => Number.isFinite(v)).sort((a, b) => a - b);
  if (xs.length === 0) return Number.NaN;
  const mid = Math.floor(xs.length / 2);
  return xs.length % 2 === 1 ? xs[mid]! : (xs[mid - 1]! + xs[mid]!) / 2;
}

/** Nearest-rank percentile (p in 0..100) of the values; NaN for none. */
export function percentile(values: readonly number[], p: number): number {
  const xs = values.filter((v) => Number.isFinite(v)).sort((a, b) => a - b);
  if (xs.length === 0) return Number.NaN;
  const rank = Math.ceil((Math.min(100, Math.max(0, p)) / 100) * xs.length);
  return xs[Math.max(0, rank - 1)]!;
}

/**
 * Relative speed of pmlake against its baseline: baseline seconds / pmlake seconds for the same work, so
 * above 1 means pmlake is faster and 0.8 means it runs at 80 % of the baseline's throughput. Every target of
 * a scenario is a lower bound on this one number (1.2× slower = 1/1.2 = 0.833).
 */
export function speedRatio(pmlakeSeconds: number, baselineSeconds: number): number {
  if (!(pmlakeSeconds > 0) || !(baselineSeconds > 0)) return Number.NaN;
  return baselineSeconds / pmlakeSeconds;
}

/** Megabytes (10^6 bytes) per second; NaN when unknown. */
export function mbPerSecond(bytes: number | undefined, seconds: number): number {
  if (bytes === undefined || !(bytes > 0) || !(seconds > 0)) return Number.NaN;
  return bytes / 1e6 / seconds;
}

export type TargetCheck = { text: string; met: boolean | null; detail?: string };

/** `value >= min`, null (not decided) when the value is unknown. */
export function atLeast(text: string, value: number, min: number, detail?: string): TargetCheck {
  return { text, met: Number.isFinite(value) ? value >= min : null, ...(detail ? { detail } : {}) };
}

/** `value <= max`, null (not decided) when the value is unknown. */
export function atMost(text: string, value: number, max: number, detail?: string): TargetCheck {
  return { text, met: Number.isFinite(value) ? value <= max : null, ...(detail ? { detail } : {}) };
}

/**
 * Peak memory counts as "flat" between a small and a large pull when the large one's peak is at most
 * `factor` times the small one's, or within `slackBytes` of it (a few MB of allocator noise on a small
 * peak would otherwise fail a ratio test).
 */
export function isFlat(smallPeak: number, largePeak: number, factor = 1.25, slackBytes = 64 * 1024 * 1024): boolean {
  return largePeak <= smallPeak * factor || largePeak - smallPeak <= slackBytes;
}

/** Seconds with sensible precision for a table cell. */
export function fmtSeconds(s: number | undefined): string {
  if (s === undefined || !Number.isFinite(s)) return '-';
  if (s < 0.01) return s.toFixed(4);
  if (s < 1) return s.toFixed(3);
  if (s < 100) return s.toFixed(2);
  return s.toFixed(0);
}

export function fmtNumber(n: number | undefined, digits = 1): string {
  if (n === undefined || !Number.isFinite(n)) return '-';
  return n.toFixed(digits);
}

/** 12345678 → "12.3M", 4500 → "4.5k". */
export function fmtCount(n: number | undefined): string {
  if (n === undefined || !Number.isFinite(n)) return '-';
  if (n >= 1e9) return `${(n / 1e9).toFixed(2)}G`;
  if (n >= 1e6) return `${(n / 1e6).toFixed(n >= 1e7 ? 1 : 2)}M`;
  if (n >= 1e4) return `${(n / 1e3).toFixed(0)}k`;
  if (n >= 1e3) return `${(n / 1e3).toFixed(1)}k`;
  return String(Math.round(n));
}

export function fmtBytes(n: number | undefined): string {
  if (n === undefined || !Number.isFinite(n)) return '-';
  if (n >= 1024 ** 3) return `${(n / 1024 ** 3).toFixed(2)} GiB`;
  if (n >= 1024 ** 2) return `${(n / 1024 ** 2).toFixed(0)} MiB`;
  if (n >= 1024) return `${(n / 1024).toFixed(0)} KiB`;
  return `${n} B`;
}

/** A deterministic PRNG (mulberry32) so "random" instants are the same in every run of a scale. */
export function seededRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
