/**
 * `Promise.all(items.map(fn))` with at most `limit` calls in flight, results in item order: for fan-outs whose
 * every call opens a lake statement (a connection each), so a request naming hundreds of items cannot open
 * hundreds of connections at once. The first failure rejects; calls already started run out.
 */
export async function mapLimit<T, R>(items: readonly T[], limit: number, fn: (item: T, index: number) => Promise<R>): Promise<R[]> {
  const out = new Array<R>(items.length);
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < items.length) {
      const i = next++;
      out[i] = await fn(items[i]!, i);
    }
  };
  await Promise.all(Array.from({ length: Math.min(Math.max(1, limit), items.length) }, worker));
  return out;
}
