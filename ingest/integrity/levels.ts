/**
 * The `book` checkpoint's comparison: the venue's full book (expected) against the book replayed up to just
 * before it. Levels are integer prices of 1e-6 → sizes of 1e-6 (ingest/books.ts Side); a level absent on one
 * side of the comparison counts as size 0. Differing levels are listed bids first (best first: price
 * descending), then asks (price ascending), at most MAX_LISTED of them; `differing` is the full count.
 */

export type LevelMap = { readonly sizes: ReadonlyMap<number, number> };

export const MAX_LISTED = 20;

export type BookDiff = { differing: number; detail: string };

function sideDiff(expected: LevelMap, replayed: LevelMap, descending: boolean): number[] {
  const prices: number[] = [];
  for (const [p, s] of expected.sizes) if (replayed.sizes.get(p) !== s) prices.push(p);
  for (const p of replayed.sizes.keys()) if (!expected.sizes.has(p)) prices.push(p);
  return prices.sort((a, b) => (descending ? b - a : a - b));
}

function sameSide(expected: LevelMap, replayed: LevelMap): boolean {
  if (expected.sizes.size !== replayed.sizes.size) return false;
  for (const [p, s] of expected.sizes) if (replayed.sizes.get(p) !== s) return false;
  return true;
}

/** Null when both sides are equal level by level; else the count and the `gap` incident's detail JSON. */
export function diffBooks(expBids: LevelMap, expAsks: LevelMap, repBids: LevelMap, repAsks: LevelMap, dec: (v: number) => string): BookDiff | null {
  // The common case first, without allocating: same level counts and every venue level replayed as it is.
  if (sameSide(expBids, repBids) && sameSide(expAsks, repAsks)) return null;
  const bids = sideDiff(expBids, repBids, true);
  const asks = sideDiff(expAsks, repAsks, false);
  const differing = bids.length + asks.length;
  if (differing === 0) return null;
  const parts: string[] = [];
  const add = (side: 'bid' | 'ask', exp: LevelMap, rep: LevelMap, prices: number[]): void => {
    for (const p of prices) {
      if (parts.length >= MAX_LISTED) return;
      parts.push(`{"side":"${side}","price":"${dec(p)}","expected":"${dec(exp.sizes.get(p) ?? 0)}","replayed":"${dec(rep.sizes.get(p) ?? 0)}"}`);
    }
  };
  add('bid', expBids, repBids, bids);
  add('ask', expAsks, repAsks, asks);
  return { differing, detail: `{"levels":[${parts.join(',')}],"differing":${differing}}` };
}
