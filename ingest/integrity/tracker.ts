import path from 'node:path';
import { dec, OutFile } from '../psv.js';
import { GapFinder, NO_GAP_SEED, type GapSeed } from './gaps.js';
import { diffBooks, type LevelMap } from './levels.js';

/**
 * The integrity checks of the book replay (ingest/books.ts), one token at a time in seq order — the rules are
 * in lake/README.md "Tape integrity". The replay calls `startToken`, then `endMessage` after applying each
 * message, and hands its book_snapshots / top_of_book lines to `snapshotLine` / `topLine`: a line waits here
 * until the `book` checkpoint that closes its stretch decides its `verified` flag (a line at a `book` message
 * itself is the venue's own book: verified at once). Output: pipe-separated files read back by
 * ingest/integrity/stage.ts.
 */

/** What the lake already holds of a token's current stretch (ingest/integrity/stage.ts seedSql). */
export type TokenSeed = {
  /** Receive ms of the token's last stored `book` message, or of its first stored message; NaN when none. */
  sinceMs: number;
  /** The stored rows after the last stored `book` wait for this batch's first checkpoint. */
  open: boolean;
  /** A stored top_mismatch or crossed incident lies in that open stretch. */
  broken: boolean;
};

export type IntegrityCounts = { book_checks: number; book_mismatches: number; top_checks: number; top_mismatches: number; incidents: number };

/** Replayed empty sides compare as the venue writes them in best_bid/best_ask: no bid "0", no ask "1". */
const NO_BID = 0;
const NO_ASK = 1_000_000;

export class IntegrityTracker {
  readonly checkpoints: OutFile;
  readonly incidents: OutFile;
  readonly afterGap: OutFile;
  readonly reopened: OutFile;
  private readonly gapStreams: OutFile;
  private readonly gapOutages: OutFile;
  readonly counts: IntegrityCounts = { book_checks: 0, book_mismatches: 0, top_checks: 0, top_mismatches: 0, incidents: 0 };
  private readonly gaps: GapFinder;

  /** The token's tick in 1e-6 units (-1 unknown): the replay checks prices against it. */
  tick = -1;
  private tok = -1;
  private seed: TokenSeed | undefined;
  private history = false;
  private sinceMs = Number.NaN;
  private open = false;
  private broken = false;
  private topBad = false;
  private crossed = false;
  private markNext = false;
  private pendSnap: string[] = [];
  private pendTop: string[] = [];

  /**
   * `outages`: per token, the capture outages (capture_disconnect: from ms, to ms) of the batch and the lake. A
   * stretch overlapping one is not verified even when its closing `book` passes: nothing proves what it missed.
   * `gapSeed`: the silence finder's state from the lake (ingest/integrity/gap-state.ts).
   */
  constructor(
    dir: string,
    private readonly seeds: ReadonlyMap<number, TokenSeed>,
    private readonly snapOut: OutFile,
    private readonly topOut: OutFile,
    private readonly outages: ReadonlyMap<number, readonly (readonly [number, number])[]> = new Map(),
    gapSeed: GapSeed = NO_GAP_SEED,
  ) {
    this.checkpoints = new OutFile(dir, 'checkpoints.psv');
    this.incidents = new OutFile(dir, 'incidents.psv');
    this.afterGap = new OutFile(dir, 'after_gap.psv');
    this.reopened = new OutFile(dir, 'reopened.psv');
    this.gapStreams = new OutFile(dir, 'gap_streams.psv');
    this.gapOutages = new OutFile(dir, 'gap_outages.psv');
    this.gaps = new GapFinder(gapSeed);
  }

  static files(dir: string): { checkpoints: string; incidents: string; afterGap: string; reopened: string; gapStreams: string; gapOutages: string } {
    const f = (n: string): string => path.join(dir, n);
    return {
      checkpoints: f('checkpoints.psv'),
      incidents: f('incidents.psv'),
      afterGap: f('after_gap.psv'),
      reopened: f('reopened.psv'),
      gapStreams: f('gap_streams.psv'),
      gapOutages: f('gap_outages.psv'),
    };
  }

  startToken(tok: number): void {
    this.endToken();
    this.tok = tok;
    this.seed = this.seeds.get(tok);
    this.history = false;
    this.sinceMs = this.seed?.sinceMs ?? Number.NaN;
    this.open = this.seed?.open ?? false;
    this.broken = this.seed?.broken ?? false;
    this.topBad = false;
    this.crossed = false;
    this.markNext = false;
    this.tick = -1;
    this.gaps.startToken(tok);
  }

  /** Whether a `book` message now is a checkpoint: the token has a replayed book to compare with. */
  get hasHistory(): boolean {
    return this.history;
  }

  snapshotLine(line: string, atBook: boolean): void {
    if (atBook) this.snapOut.push(line, '|true');
    else this.pendSnap.push(line);
  }

  topLine(line: string, atBook: boolean): void {
    if (atBook) this.topOut.push(line, '|true');
    else this.pendTop.push(line);
  }

  /** A stored (seed or tail) message was replayed: history only, no check. */
  storedMessage(ms: number): void {
    this.history = true;
    if (Number.isNaN(this.sinceMs)) this.sinceMs = ms;
  }

  /**
   * A `book` message of this batch, after the replay swapped its books: `exp*` is the venue's book, `rep*` the
   * replayed one. Closes the current stretch (call before the book's own lines are handed over).
   */
  book(ms: number, k: number, expBids: LevelMap, expAsks: LevelMap, repBids: LevelMap, repAsks: LevelMap): void {
    this.message(ms, k);
    if (this.history) {
      const diff = diffBooks(expBids, expAsks, repBids, repAsks, dec);
      const ok = diff === null;
      this.counts.book_checks += 1;
      this.checkpoints.push(`${this.tok}|${ms}|${k}|book|${ok}|${this.sinceMs}`);
      if (diff) {
        this.counts.book_mismatches += 1;
        this.incident('gap', this.sinceMs, ms, ms, k, diff.detail);
        this.afterGap.push(`${this.tok}|${ms}|${k}`);
      }
      this.close(ok && !this.broken && !this.inOutage(ms));
    } else this.close(false);
    this.history = true;
    this.sinceMs = ms;
    this.broken = false;
    this.topBad = false;
  }

  /**
   * A price_change of this batch after it was applied: `bid`/`ask` the replayed best prices (-1 for an empty
   * side), `chkBid`/`chkAsk` the venue's best_bid/best_ask of the token's last entry (-1 when the message has
   * none: old shape), `offTick` the first price off the token's tick (-1 none).
   */
  priceChange(ms: number, k: number, bid: number, ask: number, chkBid: number, chkAsk: number, offTick: number): void {
    this.message(ms, k);
    if (Number.isNaN(this.sinceMs)) this.sinceMs = ms;
    if (chkBid >= 0 && chkAsk >= 0 && this.history) {
      this.counts.top_checks += 1;
      const rb = bid >= 0 ? bid : NO_BID;
      const ra = ask >= 0 ? ask : NO_ASK;
      if (rb !== chkBid || ra !== chkAsk) {
        this.counts.top_mismatches += 1;
        // One incident per run of mismatches: until the next book the replayed top may stay wrong.
        if (!this.topBad) {
          this.checkpoints.push(`${this.tok}|${ms}|${k}|top|false|${this.sinceMs}`);
          this.incident(
            'top_mismatch',
            ms,
            ms,
            ms,
            k,
            `{"expected":{"best_bid":"${dec(chkBid)}","best_ask":"${dec(chkAsk)}"},"replayed":{"best_bid":"${dec(rb)}","best_ask":"${dec(ra)}"}}`,
          );
          this.markNext = true;
        }
        this.topBad = true;
        this.broken = true;
      } else this.topBad = false;
    }
    if (offTick >= 0) this.incident('off_tick', ms, ms, ms, k, `{"price":"${dec(offTick)}","tick":"${dec(this.tick)}"}`);
    this.history = true;
  }

  /** After any message of this batch: the crossed/locked check on the replayed top. */
  top(ms: number, k: number, bid: number, ask: number): void {
    if (bid >= 0 && ask >= 0 && bid >= ask) {
      if (!this.crossed) this.incident('crossed', ms, ms, ms, k, `{"best_bid":"${dec(bid)}","best_ask":"${dec(ask)}"}`);
      this.crossed = true;
      this.broken = true;
    } else this.crossed = false;
  }

  /** A book whose own levels are off its tick. */
  offTickBook(ms: number, k: number, price: number): void {
    this.incident('off_tick', ms, ms, ms, k, `{"price":"${dec(price)}","tick":"${dec(this.tick)}"}`);
  }

  private message(ms: number, k: number): void {
    this.gaps.add(ms, k);
    if (this.markNext) {
      this.afterGap.push(`${this.tok}|${ms}|${k}`);
      this.markNext = false;
    }
  }

  private incident(kind: string, fromMs: number, toMs: number, seqMs: number, seqK: number, detail: string): void {
    this.counts.incidents += 1;
    this.incidents.push(`${this.tok}|${kind}|${fromMs}|${toMs}|${seqMs}|${seqK}|${detail}`);
  }

  /** Whether a capture outage overlaps the stretch (sinceMs, ms]. */
  private inOutage(ms: number): boolean {
    return (this.outages.get(this.tok) ?? []).some(([from, to]) => from < ms && to > this.sinceMs);
  }

  /** The stretch since the last book ends here: its waiting lines get their flag. */
  private close(verified: boolean): void {
    if (this.open) {
      // The stretch began in an earlier batch: its stored rows are rewritten when it is verified now.
      if (verified) this.reopened.push(String(this.tok));
      this.open = false;
    }
    this.flush(verified);
  }

  private flush(verified: boolean): void {
    const v = verified ? '|true' : '|false';
    for (const l of this.pendSnap) this.snapOut.push(l, v);
    for (const l of this.pendTop) this.topOut.push(l, v);
    this.pendSnap.length = 0;
    this.pendTop.length = 0;
  }

  private endToken(): void {
    if (this.tok >= 0) this.flush(false);
  }

  /** After the last token: remaining lines (open stretches), then silences and disconnects. */
  finish(): void {
    this.endToken();
    this.tok = -1;
    const g = this.gaps.finish(this.incidents, { streams: this.gapStreams, outages: this.gapOutages });
    this.counts.incidents += g.disconnects + g.silences;
    for (const f of [this.checkpoints, this.incidents, this.afterGap, this.reopened, this.gapStreams, this.gapOutages]) f.close();
  }
}
