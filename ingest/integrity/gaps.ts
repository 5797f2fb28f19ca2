import type { OutFile } from '../psv.js';

/**
 * Silences found in a batch's receive times (lake/README.md "Tape integrity"), after the replay. Spacings are
 * taken between distinct receive times (messages of one instant — both tokens of a price_change, a trade's
 * book — are one arrival), and the bar is the median spacing times a factor, not the mean: a few long pauses
 * must not raise the bar that finds them, and a quiet token may be quiet.
 * - capture `disconnect`: no book/price_change message of any token for longer than
 *   max(CAPTURE_MIN_SECONDS, CAPTURE_FACTOR × the batch's median spacing); recorded once per token that has a
 *   message before and after it.
 * - token `silence`: a token without a message for longer than max(TOKEN_MIN_SECONDS, TOKEN_FACTOR × its own
 *   median spacing), counting only the time the capture was alive (the gap minus the disconnects inside it),
 *   for tokens with at least MIN_MESSAGES distinct receive times in the batch.
 * Only messages of this batch count (a silence across two batches is not seen).
 */
export const CAPTURE_MIN_SECONDS = 120;
export const CAPTURE_FACTOR = 40;
export const TOKEN_MIN_SECONDS = 600;
export const TOKEN_FACTOR = 20;
export const MIN_MESSAGES = 3;

function median(sorted: Float64Array): number {
  const n = sorted.length;
  if (n === 0) return 0;
  return n % 2 ? sorted[(n - 1) >> 1]! : (sorted[n / 2 - 1]! + sorted[n / 2]!) / 2;
}

/** Sorted non-zero spacings of ascending times. */
function spacings(times: Float64Array): Float64Array {
  const d = new Float64Array(Math.max(times.length - 1, 0));
  let n = 0;
  for (let i = 1; i < times.length; i += 1) if (times[i]! > times[i - 1]!) d[n++] = times[i]! - times[i - 1]!;
  return d.subarray(0, n).sort();
}

export class GapFinder {
  private ms = new Float64Array(1 << 16);
  private ks = new Int32Array(1 << 16);
  private n = 0;
  /** [token, first index, end index) per token, in replay order. */
  private spans: number[] = [];

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

  /** Writes the incidents as `tok|kind|from_ms|to_ms|seq_ms|seq_k|detail` lines. */
  finish(out: OutFile): { disconnects: number; silences: number } {
    const all = this.ms.slice(0, this.n).sort();
    const typical = median(spacings(all));
    const capLimit = Math.max(CAPTURE_MIN_SECONDS * 1000, CAPTURE_FACTOR * typical);
    const downs: number[] = [];
    for (let i = 1; i < all.length; i += 1) if (all[i]! - all[i - 1]! > capLimit) downs.push(all[i - 1]!, all[i]!);
    let disconnects = 0;
    let silences = 0;
    const sec = (ms: number): string => String(Math.round(ms) / 1000);
    for (let s = 0; s < this.spans.length; s += 3) {
      const tok = this.spans[s]!;
      const lo = this.spans[s + 1]!;
      const hi = this.spans[s + 2]!;
      if (hi === lo) continue;
      const first = this.ms[lo]!;
      const last = this.ms[hi - 1]!;
      // Disconnects this token lived through: the first message at or after the capture came back reveals it.
      for (let d = 0; d < downs.length; d += 2) {
        const from = downs[d]!;
        const to = downs[d + 1]!;
        if (first > from || last < to) continue;
        let j = lo;
        while (this.ms[j]! < to) j += 1;
        out.push(`${tok}|disconnect|${from}|${to}|${this.ms[j]}|${this.ks[j]}|{"seconds":${sec(to - from)},"typical_seconds":${sec(typical)}}`);
        disconnects += 1;
      }
      const gaps = spacings(this.ms.subarray(lo, hi));
      if (gaps.length + 1 < MIN_MESSAGES) continue;
      const own = median(gaps);
      const limit = Math.max(TOKEN_MIN_SECONDS * 1000, TOKEN_FACTOR * own);
      for (let i = lo + 1; i < hi; i += 1) {
        const from = this.ms[i - 1]!;
        const to = this.ms[i]!;
        if (to - from <= limit) continue;
        let alive = to - from;
        for (let d = 0; d < downs.length; d += 2) alive -= Math.max(0, Math.min(to, downs[d + 1]!) - Math.max(from, downs[d]!));
        if (alive <= limit) continue;
        out.push(`${tok}|silence|${from}|${to}|${to}|${this.ks[i]}|{"seconds":${sec(to - from)},"typical_seconds":${sec(own)}}`);
        silences += 1;
      }
    }
    return { disconnects, silences };
  }
}
