import type { OutFile } from '../psv.js';

/**
 * Silences found in the tape's receive times (lake/README.md "Tape integrity"), after the replay. Spacings are
 * taken between distinct receive times (messages of one instant — both tokens of a price_change, a trade's
 * book — are one arrival), and the bar is the typical (median) spacing times a factor, not the mean: a few long
 * pauses must not raise the bar that finds them, and a quiet token may be quiet.
 * - capture `disconnect`: no book/price_change message of any token for longer than
 *   max(CAPTURE_MIN_SECONDS, CAPTURE_FACTOR × the capture's typical spacing); recorded once per token that has a
 *   message before and after it.
 * - token `silence`: a token without a message for longer than max(TOKEN_MIN_SECONDS, TOKEN_FACTOR × its own
 *   typical spacing), counting only the time the capture was alive (the gap minus the disconnects inside it).
 * The typical spacing is the median of the spacings before the gap, kept as a histogram of quarter-octave
 * buckets (the median's bucket middle is the figure) whose counts are halved whenever they reach HISTORY, so it
 * follows a changing pace; a gap is judged once MIN_SPACINGS spacings came before it. A token silent for more
 * than FRESH_AFTER_DAYS starts afresh: that gap is not judged (nor are the outages in it) and its histogram is
 * emptied, so the lake forgets such tokens (and outages that old) and its state stays the size of the live
 * market, not of the history. Every figure looks only
 * backwards and the state is integers, so where ingest cuts batches changes nothing: the lake keeps each token's
 * and the capture's last receive time and histogram, and the capture's outages (ingest/integrity/gap-state.ts);
 * a batch starts from them and decides exactly the gaps that end after the stored last receive time (earlier
 * times were decided by the batch that brought them).
 */
export const CAPTURE_MIN_SECONDS = 120;
export const CAPTURE_FACTOR = 40;
export const TOKEN_MIN_SECONDS = 600;
export const TOKEN_FACTOR = 20;
export const MIN_SPACINGS = 16;
export const HISTORY = 1024;
export const FRESH_AFTER_DAYS = 30;
export const FRESH_AFTER_MS = FRESH_AFTER_DAYS * 86_400_000;
/** Buckets per octave of the spacing histogram, and how many (2^40 ms: decades). */
const PER_OCTAVE = 4;
const BUCKETS = 40 * PER_OCTAVE;

/** A silence of the whole capture: the last receive time before it, the first after, and the typical spacing then. */
export type Outage = { fromMs: number; toMs: number; typicalMs: number };

/** One stream's state (a token's, or the capture's): its last receive ms and its spacing histogram (counts by bucket, comma-separated). */
export type StreamSeed = { lastMs: number; hist: string };

/** What the lake holds before the batch (ingest/integrity/gap-state.ts). */
export type GapSeed = {
  /** Per touched token (the replay's number). */
  tokens: ReadonlyMap<number, StreamSeed>;
  capture: StreamSeed | undefined;
  /** The capture's outages a touched token may have lived through (sorted by fromMs). */
  outages: readonly Outage[];
};

export const NO_GAP_SEED: GapSeed = { tokens: new Map(), capture: undefined, outages: [] };

/** Where the batch's new state goes: `tok|last_ms|count,count,…` (tok 0: the capture) and `from|to|typical` (new outages). */
export type GapStateOut = { streams: OutFile; outages: OutFile };

/** The running spacing statistic of one stream. */
class Spacings {
  private readonly hist = new Int32Array(BUCKETS);
  private n = 0;
  last = Number.NaN;

  constructor(seed: StreamSeed | undefined) {
    if (!seed) return;
    this.last = seed.lastMs;
    if (seed.hist === '') return;
    seed.hist.split(',').forEach((c, k) => {
      this.hist[k] = Number(c);
      this.n += Number(c);
    });
  }

  reset(): void {
    this.hist.fill(0);
    this.n = 0;
  }

  get judged(): boolean {
    return this.n >= MIN_SPACINGS;
  }

  /** The middle of the median spacing's bucket, ms. */
  typical(): number {
    let c = 0;
    for (let k = 0; k < BUCKETS; k += 1) {
      c += this.hist[k]!;
      if (2 * c >= this.n) return 2 ** ((k + 0.5) / PER_OCTAVE);
    }
    return 0;
  }

  add(gap: number): void {
    this.hist[Math.min(BUCKETS - 1, Math.floor(PER_OCTAVE * Math.log2(gap)))]! += 1;
    this.n += 1;
    if (this.n < HISTORY) return;
    this.n = 0;
    for (let k = 0; k < BUCKETS; k += 1) {
      this.hist[k] = this.hist[k]! >> 1;
      this.n += this.hist[k]!;
    }
  }

  line(id: number): string {
    let top = BUCKETS;
    while (top > 0 && this.hist[top - 1] === 0) top -= 1;
    return `${id}|${this.last}|${this.hist.subarray(0, top).join(',')}`;
  }
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

  /** The capture's new outages (gaps ending after its stored last receive time); writes the capture's state line. */
  private captureOutages(state: GapStateOut): Outage[] {
    const all = this.ms.slice(0, this.n).sort();
    const cap = new Spacings(this.seed.capture);
    const found: Outage[] = [];
    for (const t of all) {
      if (t <= cap.last) continue;
      const gap = t - cap.last;
      if (cap.judged && gap > CAPTURE_MIN_SECONDS * 1000) {
        const typical = cap.typical();
        if (gap > Math.max(CAPTURE_MIN_SECONDS * 1000, CAPTURE_FACTOR * typical)) found.push({ fromMs: cap.last, toMs: t, typicalMs: typical });
      }
      if (!Number.isNaN(cap.last)) cap.add(gap);
      cap.last = t;
    }
    if (!Number.isNaN(cap.last)) state.streams.push(cap.line(0));
    for (const o of found) state.outages.push(`${o.fromMs}|${o.toMs}|${o.typicalMs}`);
    return found;
  }

  /** Writes the incidents as `tok|kind|from_ms|to_ms|seq_ms|seq_k|detail` lines, and the new state. */
  finish(out: OutFile, state: GapStateOut): { disconnects: number; silences: number } {
    const known = new Set(this.seed.outages.map((o) => `${o.fromMs}|${o.toMs}`));
    const downs = [...this.seed.outages, ...this.captureOutages(state).filter((o) => !known.has(`${o.fromMs}|${o.toMs}`))].sort((a, b) => a.fromMs - b.fromMs);
    let disconnects = 0;
    let silences = 0;
    for (let s = 0; s < this.spans.length; s += 3) {
      const tok = this.spans[s]!;
      const lo = this.spans[s + 1]!;
      const hi = this.spans[s + 2]!;
      if (hi === lo) continue;
      const st = new Spacings(this.seed.tokens.get(tok));
      for (let j = lo; j < hi; j += 1) {
        const to = this.ms[j]!;
        // Messages of one instant are one arrival; a time the lake holds was decided by the batch that brought it.
        if (to <= st.last) continue;
        const from = st.last;
        st.last = to;
        if (Number.isNaN(from)) continue;
        const gap = to - from;
        if (gap > FRESH_AFTER_MS) {
          st.reset();
          continue;
        }
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
        // Alive time: the outages inside the gap do not count (both ends of an outage are receive times, so one
        // overlapping the gap lies inside it whole).
        if (st.judged && gap - down > TOKEN_MIN_SECONDS * 1000) {
          const typical = st.typical();
          if (gap - down > Math.max(TOKEN_MIN_SECONDS * 1000, TOKEN_FACTOR * typical)) {
            out.push(`${tok}|silence|${from}|${to}|${to}|${this.ks[j]}|{"seconds":${sec(gap)},"typical_seconds":${sec(typical)}}`);
            silences += 1;
          }
        }
        st.add(gap);
      }
      state.streams.push(st.line(tok));
    }
    return { disconnects, silences };
  }
}
