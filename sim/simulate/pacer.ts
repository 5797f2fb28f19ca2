import type { Rng } from '../generate/prng.js';
import type { MarketBook } from './book.js';
import type { Feed } from './feed.js';

const TICK_MS = 10;
/**
 * Bursts: in every second, 100 ms at a random moment run at 4× the rate and the rest at 2/3 of it, so the flow is
 * clustered but every second still averages the asked rate (a bench reads a sustained rate off any window).
 */
const BURST = 4;
const CALM = 2 / 3;
const BURST_S = 0.1;

/**
 * The venue's clock: every few milliseconds it steps subscribed markets until the level updates sent since the
 * last tick reach what the rate asks for that interval (a deficit carries over, so the mean holds however big a
 * single book was). Markets are drawn by weight, so a few are much busier than the rest, as on the venue.
 */
export class RatePacer {
  private readonly timer: NodeJS.Timeout;
  private last = performance.now();
  private budget = 0;
  private period = performance.now();
  /** This period's and the previous period's burst, [start, end) in performance.now() ms. */
  private bursts: [number, number][] = [];
  private dirty = true;
  private active: MarketBook[] = [];
  private cum: number[] = [];

  constructor(
    private readonly rate: number,
    private readonly rng: Rng,
    private readonly feed: Feed,
    private readonly markets: () => MarketBook[],
    private readonly afterTick: () => void,
  ) {
    this.drawBurst();
    this.timer = setInterval(() => this.tick(), TICK_MS);
  }

  /** A subscription changed: the set of markets to step is rebuilt on the next tick. */
  marketsChanged(): void {
    this.dirty = true;
  }

  stop(): void {
    clearInterval(this.timer);
  }

  private tick(): void {
    const now = performance.now();
    // A stalled event loop catches up at most a quarter of a second, not in one flood.
    const dt = Math.min(250, now - this.last) / 1000;
    this.last = now;
    while (now - this.period >= 1000) {
      this.period += 1000;
      this.drawBurst();
    }
    // The factor is integrated over the interval exactly: ticks run late while a burst keeps them busy, so a factor
    // sampled at each tick would under-count the bursts.
    let burstMs = 0;
    for (const [from, to] of this.bursts) burstMs += Math.max(0, Math.min(now, to) - Math.max(now - dt * 1000, from));
    if (this.dirty) this.rebuild();
    if (this.active.length === 0 || this.rate === 0) {
      this.budget = 0;
    } else {
      this.budget = Math.min(this.budget + this.rate * (dt * CALM + (burstMs / 1000) * (BURST - CALM)), this.rate / 4);
      this.feed.ts = String(Date.now());
      for (let guard = 0; this.budget > 0 && guard < 1_000_000; guard++) {
        const before = this.feed.levelUpdates;
        this.pick().step(this.rng, this.feed);
        this.budget -= this.feed.levelUpdates - before;
      }
      this.feed.flushTouches();
    }
    this.afterTick();
  }

  private drawBurst(): void {
    const start = this.period + this.rng.float() * (1 - BURST_S) * 1000;
    this.bursts = [...this.bursts.slice(-1), [start, start + BURST_S * 1000]];
  }

  private rebuild(): void {
    this.dirty = false;
    this.active = this.markets();
    let total = 0;
    this.cum = this.active.map((b) => (total += b.weight));
  }

  private pick(): MarketBook {
    const x = this.rng.float() * this.cum[this.cum.length - 1]!;
    let lo = 0;
    let hi = this.cum.length - 1;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (this.cum[mid]! > x) hi = mid;
      else lo = mid + 1;
    }
    return this.active[lo]!;
  }
}
