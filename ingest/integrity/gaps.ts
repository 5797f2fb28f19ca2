import type { OutFile } from '../psv.js';

/**
 * Silences found in the tape's receive times (lake/README.md "Tape integrity"), after the replay. Spacings are
 * taken between distinct receive times (messages of one instant — both tokens of a price_change, a trade's
 * book — are one arrival), and the bar is the median spacing times a factor, not the mean: a few long pauses
 * must not raise the bar that finds them, and a quiet token may be quiet.
 * - capture `disconnect`: no book/price_change message of any token for longer than
 *   max(CAPTURE_MIN_SECONDS, CAPTURE_FACTOR × the median of the capture's spacings among its RECENT distinct
 *   receive times before the gap); recorded once per token that has a message before and after it.
 * - token `silence`: a token without a message for longer than max(TOKEN_MIN_SECONDS, TOKEN_FACTOR × the median
 *   of its own spacings among its RECENT distinct receive times before the gap), counting only the time the
 *   capture was alive (the gap minus the disconnects inside it), once the token has MIN_MESSAGES distinct
 *   receive times before the gap.
 * Every figure looks only backwards, over a fixed number of receive times, so where ingest cuts batches changes
 * nothing: the lake keeps each token's and the capture's last RECENT receive times and the capture's outages
 * (ingest/integrity/gap-state.ts), a batch starts from them, and it decides exactly the gaps that end at a
 * receive time it brings (a time already stored was decided by the batch that brought it).
 */
export const CAPTURE_MIN_SECONDS = 120;
export const CAPTURE_FACTOR = 40;
export const TOKEN_MIN_SECONDS = 600;
export const TOKEN_FACTOR = 20;
export const MIN_MESSAGES = 3;
/** Distinct receive times the typical spacing is taken over (so at most RECENT - 1 spacings). */
export const RECENT = 16;

/** A silence of the whole capture: the last receive time before it, the first after, and the typical spacing then. */
export type Outage = { fromMs: number; toMs: number; typicalMs: number };

/** What the lake holds before the batch (ingest/integrity/gap-state.ts). Lists ascending. */
export type GapSeed = {
  /** Per touched token (the replay's number): its last RECENT distinct receive ms. */
  tokens: ReadonlyMap<number, readonly number[]>;
  /** The capture's (every token's) last RECENT distinct receive ms. */
  capture: readonly number[];
  /** The capture's outages a touched token may have lived through (sorted by fromMs). */
  outages: readonly Outage[];
};

export const NO_GAP_SEED: GapSeed = { tokens: new Map(), capture: [], outages: [] };

/** Where the batch's new state goes: `tok|ms,ms,…` (tok 0: the capture) and `from|to|typical` (new outages). */
export type GapStateOut = { recent: OutFile; outages: OutFile };

/** Median of the spacings among times[lo..hi] (ascending, distinct); 0 when there is none. */
function medianSpacing(times: ArrayLike<number>, lo: number, hi: number): number {
  const d: number[] = [];
  for (let i = Math.max(lo, 0) + 1; i <= hi; i += 1) d.push(times[i]! - times[i - 1]!);
  if (d.length === 0) return 0;
  d.sort((a, b) => a - b);
  const n = d.length;
  return n % 2 ? d[(n - 1) >> 1]! : (d[n / 2 - 1]! + d[n / 2]!) / 2;
}

/**
 * The stored times then the batch's, distinct and ascending; `own[i]` is the index in the batch arrays of the
 * first message at times[i] when the batch brings that time (a time the lake already holds: -1).
 */
function merge(stored: readonly number[], ms: Float64Array, lo: number, hi: number): { times: number[]; own: number[] } {
  const times: number[] = [];
  const own: number[] = [];
  const held = new Set(stored);
  let s = 0;
  let b = lo;
  while (s < stored.length || b < hi) {
    if (b >= hi || (s < stored.length && stored[s]! <= ms[b]!)) {
      const t = stored[s++]!;
      if (times[times.length - 1] !== t) {
        times.push(t);
        own.push(-1);
      }
    } else {
      const t = ms[b]!;
      if (times[times.length - 1] !== t) {
        times.push(t);
        own.push(held.has(t) ? -1 : b);
      }
      b += 1;
    }
  }
  return { times, own };
}

/** Index of the first outage that begins at or after `ms` (outages sorted by fromMs). */
function firstFrom(outages: readonly Outage[], ms: number): number {
  let lo = 0;
  let hi = outages.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (outages[mid]!.fromMs < ms) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

const sec = (ms: number): string => String(Math.round(ms) / 1000);

export class GapFinder {
  private ms = new Float64Array(1 << 16);
  private ks = new Int32Array(1 << 16);
  private n = 0;
  /** [token, first index, end index) per token, in replay order. */
  private spans: number[] = [];

  constructor(private readonly seed: GapSeed = NO_GAP_SEED) {}

  startToken(tok: number): void {
    this.spans.push(tok, this.n, this.n);
  }

  /** A message of this batch (in seq order within the token). */
  add(ms: number, k: number): void {
    if (this.n === this.ms.length) {
      const m = new Float64Array(this.n * 2);
      m.set(this.ms);
      this.ms = m;
      const kk = new Int32Array(this.n * 2);
      kk.set(this.ks);
      this.ks = kk;
    }
    this.ms[this.n] = ms;
    this.ks[this.n] = k;
    this.n += 1;
    this.spans[this.spans.length - 1] = this.n;
  }

  /** The capture's new outages (gaps ending at a receive time of this batch); writes the capture's state line. */
  private captureOutages(state: GapStateOut): Outage[] {
    const all = this.ms.slice(0, this.n).sort();
    const { times, own } = merge(this.seed.capture, all, 0, all.length);
    const found: Outage[] = [];
    for (let i = 1; i < times.length; i += 1) {
      const gap = times[i]! - times[i - 1]!;
      // The bar is never below the minimum: shorter gaps need no median.
      if (own[i]! < 0 || gap <= CAPTURE_MIN_SECONDS * 1000) continue;
      const typical = medianSpacing(times, i - RECENT, i - 1);
      if (gap > Math.max(CAPTURE_MIN_SECONDS * 1000, CAPTURE_FACTOR * typical)) found.push({ fromMs: times[i - 1]!, toMs: times[i]!, typicalMs: typical });
    }
    if (times.length > 0) state.recent.push(`0|${times.slice(-RECENT).join(',')}`);
    for (const o of found) state.outages.push(`${o.fromMs}|${o.toMs}|${o.typicalMs}`);
    return found;
  }

  /** Writes the incidents as `tok|kind|from_ms|to_ms|seq_ms|seq_k|detail` lines, and the new state. */
  finish(out: OutFile, state: GapStateOut): { disconnects: number; silences: number } {
    const known = new Set(this.seed.outages.map((o) => `${o.fromMs}|${o.toMs}`));
    const downs = [...this.seed.outages, ...this.captureOutages(state).filter((o) => !known.has(`${o.fromMs}|${o.toMs}`))].sort(
      (a, b) => a.fromMs - b.fromMs,
    );
    let disconnects = 0;
    let silences = 0;
    for (let s = 0; s < this.spans.length; s += 3) {
      const tok = this.spans[s]!;
      const lo = this.spans[s + 1]!;
      const hi = this.spans[s + 2]!;
      if (hi === lo) continue;
      const { times, own } = merge(this.seed.tokens.get(tok) ?? [], this.ms, lo, hi);
      for (let i = 1; i < times.length; i += 1) {
        const j = own[i]!;
        if (j < 0) continue;
        const from = times[i - 1]!;
        const to = times[i]!;
        // The outages this token lived through end before this message: it reveals them.
        let down = 0;
        for (let x = firstFrom(downs, from); x < downs.length; x += 1) {
          const d = downs[x]!;
          if (d.fromMs >= to) break;
          if (d.toMs > to) continue;
          out.push(`${tok}|disconnect|${d.fromMs}|${d.toMs}|${to}|${this.ks[j]}|{"seconds":${sec(d.toMs - d.fromMs)},"typical_seconds":${sec(d.typicalMs)}}`);
          disconnects += 1;
          down += d.toMs - d.fromMs;
        }
        if (i < MIN_MESSAGES || to - from <= TOKEN_MIN_SECONDS * 1000) continue;
        const typical = medianSpacing(times, i - RECENT, i - 1);
        const limit = Math.max(TOKEN_MIN_SECONDS * 1000, TOKEN_FACTOR * typical);
        // Alive time: the outages inside the gap do not count (both ends of an outage are receive times, so
        // one overlapping the gap lies inside it whole).
        if (to - from - down <= limit) continue;
        out.push(`${tok}|silence|${from}|${to}|${to}|${this.ks[j]}|{"seconds":${sec(to - from)},"typical_seconds":${sec(typical)}}`);
        silences += 1;
      }
      state.recent.push(`${tok}|${times.slice(-RECENT).join(',')}`);
    }
    return { disconnects, silences };
  }
}
