import { NotFound } from '../errors.js';
import { bookAt } from '../markets/book-at.js';
import type { Row } from '../lake/values.js';
import type { Keyed } from './merge.js';
import { head, l2Rows, RANK, type StreamContext } from './normalized-streams.js';
import type { BookSnapshotMessage, DataType, ReplayAsset } from './normalized-types.js';

type Level = { price: number; size: number };
type SnapshotType = Extract<DataType, { kind: 'book_snapshot' }>;

/**
 * The book of one token at every interval boundary of the window (multiples of the interval since the epoch,
 * from <= b < to), to the type's depth: the book at `from` (src/markets/book-at.ts), then the l2 tape after it
 * applied in arrival order — a `book` message replaces both sides, a level's size is its new total, 0 removes it
 * — and at each boundary the book of everything received at or before it, as GET /v1/orderbook/snapshot gives
 * it. Nothing is sent before the token's first book. Memory: this one book.
 */
export async function* bookSnapshots(c: StreamContext, a: ReplayAsset, t: SnapshotType): AsyncGenerator<Keyed<BookSnapshotMessage>> {
  const { start, end } = c.window;
  const step = t.intervalUs;
  let next = ((start + step - 1n) / step) * step;
  if (next >= end) return;
  const last = ((end - 1n) / step) * step;
  const bids = new Map<number, number>();
  const asks = new Map<number, number>();
  let known = false;
  try {
    const book = await bookAt(c.session, a.resolved, a.token, start, Number.MAX_SAFE_INTEGER);
    for (const l of book.bids as Level[]) bids.set(l.price, l.size);
    for (const l of book.asks as Level[]) asks.set(l.price, l.size);
    known = true;
  } catch (err) {
    // No book yet at `from`: snapshots start with the token's first message.
    if (!(err instanceof NotFound)) throw err;
  }
  // The sorted sides are kept until the book changes: at short intervals most boundaries see the same book.
  let sides: { bids: Level[]; asks: Level[] } | null = null;
  const emit = (b: bigint): Keyed<BookSnapshotMessage> => {
    sides ??= { bids: top(bids, t.depth, true), asks: top(asks, t.depth, false) };
    return {
      us: b,
      rank: RANK.snapshot,
      seq: 0n,
      sub: 0,
      value: { ...head(a, t.name, b), depth: t.depth, interval: t.name.slice(t.name.lastIndexOf('_') + 1), bids: sides.bids, asks: sides.asks },
    };
  };
  // The tape strictly after `from` (the book at `from` holds what came at it) up to the last boundary.
  const tape = l2Rows({ ...c, window: { start: start + 1n, end: last + 1n } }, a.asset_id);
  let snapSeq: string | null = null;
  for await (const r of tape) {
    const recv = BigInt(String(r.recv_us));
    for (; next <= last && recv > next; next += step) if (known) yield emit(next);
    apply(r);
  }
  for (; next <= last; next += step) {
    if (c.signal?.aborted) return;
    if (known) yield emit(next);
  }

  function apply(r: Row): void {
    known = true;
    sides = null;
    if (r.is_snapshot === true) {
      const seq = String(r.seq);
      if (seq !== snapSeq) {
        bids.clear();
        asks.clear();
        snapSeq = seq;
      }
    } else snapSeq = null;
    if (r.side === null || r.price === null) return;
    const side = r.side === 'bid' ? bids : asks;
    const price = Number(r.price);
    const size = Number(r.size);
    if (size === 0) side.delete(price);
    else side.set(price, size);
  }
}

/** The best `depth` levels of a side, best first. */
function top(side: Map<number, number>, depth: number, desc: boolean): Level[] {
  const prices = [...side.keys()].sort((x, y) => (desc ? y - x : x - y));
  return prices.slice(0, depth).map((price) => ({ price, size: side.get(price)! }));
}
