/**
 * A k-way merge of streams each already in time order: one head per stream in a binary heap, so memory is one
 * item per stream (plus whatever page each stream holds) however long the window.
 */

/** An item's place in the merged order: time (µs), then rank (the type's order at one instant), then seq, then sub. */
export type Keyed<T> = { us: bigint; rank: number; seq: bigint; sub: number; value: T };

type Head<T> = { item: Keyed<T>; it: AsyncIterator<Keyed<T>>; index: number };

function before<T>(a: Head<T>, b: Head<T>): boolean {
  const x = a.item;
  const y = b.item;
  if (x.us !== y.us) return x.us < y.us;
  if (x.rank !== y.rank) return x.rank < y.rank;
  if (x.seq !== y.seq) return x.seq < y.seq;
  if (x.sub !== y.sub) return x.sub < y.sub;
  return a.index < b.index;
}

class Heap<T> {
  private readonly a: Head<T>[] = [];
  get size(): number {
    return this.a.length;
  }
  push(h: Head<T>): void {
    const a = this.a;
    a.push(h);
    let i = a.length - 1;
    while (i > 0) {
      const p = (i - 1) >> 1;
      if (!before(a[i]!, a[p]!)) break;
      [a[i], a[p]] = [a[p]!, a[i]!];
      i = p;
    }
  }
  pop(): Head<T> | undefined {
    const a = this.a;
    const top = a[0];
    const last = a.pop();
    if (a.length > 0 && last) {
      a[0] = last;
      let i = 0;
      for (;;) {
        const l = 2 * i + 1;
        const r = l + 1;
        let m = i;
        if (l < a.length && before(a[l]!, a[m]!)) m = l;
        if (r < a.length && before(a[r]!, a[m]!)) m = r;
        if (m === i) break;
        [a[i], a[m]] = [a[m]!, a[i]!];
        i = m;
      }
    }
    return top;
  }
}

/** The streams merged in (us, rank, seq, sub) order; stops (and closes every stream) when `signal` aborts. */
export async function* mergeByTime<T>(streams: readonly AsyncIterable<Keyed<T>>[], signal?: AbortSignal): AsyncGenerator<T> {
  const iters = streams.map((s) => s[Symbol.asyncIterator]());
  const heap = new Heap<T>();
  try {
    for (let i = 0; i < iters.length; i += 1) {
      if (signal?.aborted) return;
      const r = await iters[i]!.next();
      if (!r.done) heap.push({ item: r.value, it: iters[i]!, index: i });
    }
    while (heap.size > 0) {
      if (signal?.aborted) return;
      const h = heap.pop()!;
      yield h.item.value;
      const r = await h.it.next();
      if (!r.done) heap.push({ item: r.value, it: h.it, index: h.index });
    }
  } finally {
    // An early end (abort, or the consumer stopped) closes every stream so their pagers stop too.
    await Promise.all(iters.map((it) => it.return?.(undefined)));
  }
}
