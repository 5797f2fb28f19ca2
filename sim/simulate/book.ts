import type { Rng } from '../generate/prng.js';
import { ASK, BID, YesBook } from '../generate/yes-book.js';

/**
 * One market's order book as the simulated venue runs it, the generator's model (sim/generate/day.ts) in real
 * time: only the Yes book is kept, in integer thousandths of a price ("milli") and hundredths of a share
 * ("cents"); the No book is its mirror (a Yes bid at p is a No ask at 1 − p, same size). Every change is handed to
 * the `BookSink` the moment it happens, so a message always shows the book as it is at that point.
 */
export { ASK, BID };

export interface BookSink {
  /** Level changes already applied, as flat (side, milli, new total cents) triples of the Yes book; `only` = one token. */
  changes(b: MarketBook, ch: number[], only: -1 | 0 | 1): void;
  /** A taker order matched `cents` at `milli` (the traded token's price) before the book changed. */
  trade(b: MarketBook, token: 0 | 1, milli: number, takerBuys: boolean, cents: number): void;
  /** The venue's full book of one token (after a trade, or a rare re-send). */
  book(b: MarketBook, token: 0 | 1): void;
  tickChange(b: MarketBook, oldTick: number, newTick: number): void;
}

export class MarketBook extends YesBook {
  /** Last trade per token, in that token's milli; -1 before the first. */
  readonly lastPrice = [-1, -1];
  resolved = false;
  private x: number;
  private readonly anchor: number;

  constructor(
    readonly conditionId: string,
    readonly tokens: [string, string],
    public tick: number,
    readonly weight: number,
    rng: Rng,
  ) {
    super();
    this.anchor = 3 * (rng.float() - 0.5);
    this.x = this.anchor;
    this.init(rng);
  }

  /** Fair probability of Yes in milli: an OU walk in logit space around the market's anchor. */
  private fair(rng: Rng): number {
    this.x += 0.002 * (this.anchor - this.x) + 0.03 * rng.normal();
    this.x = Math.max(-4.5, Math.min(4.5, this.x));
    return 1000 / (1 + Math.exp(-this.x));
  }

  /** A fresh book around the fair price, as the venue holds it before anyone subscribes. */
  private init(rng: Rng): void {
    const tk = this.tick;
    const f = this.fair(rng);
    const spreadTicks = 1 + Math.min(3, rng.geometric(0.5));
    const bb = Math.max(tk, Math.min(1000 - tk * (spreadTicks + 1), Math.floor((f - (spreadTicks * tk) / 2) / tk) * tk));
    const depth = 4 + rng.int(12);
    for (let side = BID; side <= ASK; side++) {
      let p = side === BID ? bb : bb + spreadTicks * tk;
      for (let i = 0; i < depth && p >= tk && p <= 1000 - tk; i++) {
        this.set(side, p, restingCents(rng));
        p += (side === BID ? -1 : 1) * (1 + (rng.chance(0.3) ? rng.geometric(0.5) : 0)) * tk;
      }
    }
  }

  /** One order-book event: an order added or cancelled, a taker crossing the touch, or a stale quote moved. */
  step(rng: Rng, out: BookSink): void {
    if (this.tick === 10 && rng.chance(0.0001)) {
      // The venue tightens the grid (never the reverse: resting prices stay on the finer grid).
      this.tick = 1;
      out.tickChange(this, 10, 1);
    }
    const f = this.fair(rng);
    if (f > this.ba && rng.chance(0.6)) {
      if (rng.chance(0.3)) this.trade(rng, out, ASK);
      else this.requote(rng, out, ASK);
    } else if (f < this.bb && rng.chance(0.6)) {
      if (rng.chance(0.3)) this.trade(rng, out, BID);
      else this.requote(rng, out, BID);
    } else {
      const side = rng.chance(0.5) ? BID : ASK;
      const r = rng.float();
      if (this.ba - this.bb > 2 * this.tick && rng.chance(0.6)) this.add(rng, out, side, f);
      else if (r < 0.45) {
        // Depth stays bounded: a full side loses its farthest level instead of growing.
        if (this.n[side]! >= 14) this.dropFar(out, side);
        else this.add(rng, out, side, f);
      } else if (r < 0.9) this.cancel(rng, out, side);
      else this.trade(rng, out, rng.chance(f > (this.bb + this.ba) / 2 ? 0.65 : 0.35) ? ASK : BID);
    }
    if (rng.chance(0.002)) {
      out.book(this, 0);
      out.book(this, 1);
    }
  }

  private add(rng: Rng, out: BookSink, side: number, fair: number): void {
    const tk = this.tick;
    let P: number;
    if (this.ba - this.bb > 2 * tk && rng.chance(0.85)) {
      // Market makers compete inside a wide spread, quoting next to the fair price.
      P =
        side === BID
          ? Math.min(this.ba - tk, Math.max(this.bb + tk, Math.floor((fair - tk / 2) / tk) * tk))
          : Math.max(this.bb + tk, Math.min(this.ba - tk, Math.ceil((fair + tk / 2) / tk) * tk));
    } else {
      const k = Math.min(25, rng.geometric(0.4));
      P = side === BID ? this.bb - k * tk : this.ba + k * tk;
      if (P < tk || P > 1000 - tk) P = side === BID ? this.bb : this.ba;
      // An empty side quotes again one tick from the other side's touch (or mid-book).
      if (P < tk || P > 1000 - tk) P = side === BID ? Math.min(500, this.ba - tk) : Math.max(500, this.bb + tk);
    }
    if (P < tk || P > 1000 - tk || (side === BID ? P >= this.ba : P <= this.bb)) return;
    this.set(side, P, this.lvl[side]![P]! + restingCents(rng));
    out.changes(this, [side, P, this.lvl[side]![P]!], -1);
  }

  private cancel(rng: Rng, out: BookSink, side: number): void {
    if (this.n[side] === 0) return this.add(rng, out, side, (this.bb + this.ba) / 2);
    const a = this.lvl[side]!;
    const dir = side === BID ? -1 : 1;
    let P = side === BID ? this.bb : this.ba;
    for (let skip = rng.geometric(0.45); skip > 0; skip--) {
      let q = P + dir;
      while (q > 0 && q < 1000 && a[q] === 0) q += dir;
      if (q <= 0 || q >= 1000) break;
      P = q;
    }
    const size = a[P]!;
    let left: number;
    if (this.n[side] === 1) {
      if (size <= 1000) return this.add(rng, out, side, (this.bb + this.ba) / 2);
      left = Math.round(size * (0.3 + 0.5 * rng.float()));
    } else if (size <= 500 || rng.chance(0.55)) left = 0;
    else left = Math.max(100, Math.round(size * (0.2 + 0.6 * rng.float())));
    this.set(side, P, left);
    out.changes(this, [side, P, left], -1);
  }

  private dropFar(out: BookSink, side: number): void {
    const a = this.lvl[side]!;
    let P = side === BID ? 1 : 999;
    while (a[P] === 0) P += side === BID ? 1 : -1;
    this.set(side, P, 0);
    out.changes(this, [side, P, 0], -1);
  }

  /**
   * A taker crosses the touch on `side`. As on the venue: `last_trade_price`, then the traded token's full book,
   * then the other token's mirrored level as a price_change; an emptied last level is refilled by a new order.
   */
  private trade(rng: Rng, out: BookSink, side: number): void {
    if (this.n[side] === 0) return this.add(rng, out, side, (this.bb + this.ba) / 2);
    const P = side === ASK ? this.ba : this.bb;
    const avail = this.lvl[side]![P]!;
    const size = rng.chance(0.22) ? avail : Math.min(avail, takerCents(rng));
    const token = rng.chance(0.5) ? 0 : 1;
    out.trade(this, token, token === 0 ? P : 1000 - P, token === 0 ? side === ASK : side === BID, size);
    this.lastPrice[token] = token === 0 ? P : 1000 - P;
    const emptied = avail === size && this.n[side] === 1;
    this.set(side, P, avail - size);
    out.book(this, token);
    out.changes(this, [side, P, avail - size], token === 0 ? 1 : 0);
    if (emptied) {
      const step = (1 + rng.geometric(0.5)) * this.tick;
      const Q = side === ASK ? P + step : P - step;
      const at = Q >= this.tick && Q <= 1000 - this.tick ? Q : P;
      this.set(side, at, restingCents(rng));
      out.changes(this, [side, at, this.lvl[side]![at]!], -1);
    }
  }

  /** The fair price left the spread: pull the stale quote at the touch and quote the other side there. */
  private requote(rng: Rng, out: BookSink, side: number): void {
    const tk = this.tick;
    const P = side === ASK ? this.ba : this.bb;
    const other = side === ASK ? BID : ASK;
    const ch: number[] = [];
    if (this.n[side] === 1) {
      const Q = side === ASK ? P + tk * (1 + rng.geometric(0.5)) : P - tk * (1 + rng.geometric(0.5));
      if (Q < tk || Q > 1000 - tk) return this.trade(rng, out, side);
      this.set(side, Q, restingCents(rng));
      ch.push(side, Q, this.lvl[side]![Q]!);
    }
    this.set(side, P, 0);
    ch.push(side, P, 0);
    this.set(other, P, this.lvl[other]![P]! + restingCents(rng));
    ch.push(other, P, this.lvl[other]![P]!);
    out.changes(this, ch, -1);
  }
}

/** Resting order size in cents: log-normal around ~120 shares, mostly whole shares. */
function restingCents(rng: Rng): number {
  const shares = Math.min(2_500_000, Math.max(5, Math.exp(Math.log(120) + 1.2 * rng.normal())));
  return rng.chance(0.6) ? Math.round(shares) * 100 : Math.round(shares * 100);
}

function takerCents(rng: Rng): number {
  const shares = Math.min(500_000, Math.max(1, Math.exp(Math.log(35) + 1.3 * rng.normal())));
  return rng.chance(0.5) ? Math.round(shares) * 100 : Math.max(100, Math.round(shares * 100));
}
