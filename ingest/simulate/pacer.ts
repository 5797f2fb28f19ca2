import type { Rng } from '../generate/prng.js';
import type { MarketBook } from './book.js';
import type { Feed } from './feed.js';

const TICK_MS = 10;
/** Bursts: about 10 % of the time at 4× the rate, the rest at 2/3 of it, so the long-run mean is the asked rate. */
const BURST = 4;
const CALM = 2 / 3;
const BURST_MEAN_S = 0.2;
const CALM_MEAN_S = 1.8;

/**
 * The venue's clock: every few milliseconds it steps subscribed markets until the level updates sent since the
 * last tick reach what the rate asks for that interval (a deficit carries over, so the mean holds however big a
 * single book was). Markets are drawn by weight, so a few are much busier than the rest, as on the venue.
 */
export class RatePacer {
  private readonly timer: NodeJS.Timeout;
  private last = performance.now();
  private budget = 0;
  private burst = false;
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
    if (this.rng.chance(dt / (this.burst ? BURST_MEAN_S : CALM_MEAN_S))) this.burst = !this.burst;
    if (this.dirty) this.rebuild();
    if (this.active.length === 0 || this.rate === 0) {
      this.budget = 0;
    } else {
      this.budget = Math.min(this.budget + this.rate * dt * (this.burst ? BURST : CALM), this.rate / 4);
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
