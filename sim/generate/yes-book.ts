/** Sides of the Yes book, as indices into `YesBook.lvl`. */
export const BID = 0;
export const ASK = 1;

/**
 * The Yes book the generator's markets (./day.ts) and the simulated venue's (../simulate/book.ts) are driven by:
 * resting size per price in integer thousandths ("milli", 0–1000) and hundredths of a share ("cents"), with the
 * count of levels per side and the best bid / best ask kept up to date as levels change. The No book is its mirror.
 */
export class YesBook {
  readonly lvl = [new Float64Array(1001), new Float64Array(1001)];
  readonly n = [0, 0];
  bb = 0;
  ba = 1000;

  /** Best level on a side after `from` stopped being one (scans away from the spread). */
  rescan(side: number, from: number): void {
    const a = this.lvl[side]!;
    if (side === BID) {
      let p = from;
      while (p > 0 && a[p] === 0) p--;
      this.bb = p;
    } else {
      let p = from;
      while (p < 1000 && a[p] === 0) p++;
      this.ba = p;
    }
  }

  /** The level's new total; a level appearing or emptied moves the count and, at the touch, the best price. */
  set(side: number, p: number, cents: number): void {
    const a = this.lvl[side]!;
    const was = a[p]!;
    a[p] = cents;
    if (was === 0 && cents > 0) {
      this.n[side]!++;
      if (side === BID ? p > this.bb : p < this.ba) {
        if (side === BID) this.bb = p;
        else this.ba = p;
      }
    } else if (was > 0 && cents === 0) {
      this.n[side]!--;
      if (p === (side === BID ? this.bb : this.ba)) this.rescan(side, p);
    }
  }
}
