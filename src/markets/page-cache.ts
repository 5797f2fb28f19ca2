/**
 * Answers of heavy GETs kept as their JSON text, keyed by the request and the versions of the files they were
 * read from (so a landed batch is a different key: nothing is invalidated, old keys simply stop being asked
 * for and age out). Least recently used entries go first once the byte budget is spent. Made for the trades
 * pages of busy markets: the same first pages are asked for by many clients between two ingests.
 */
export class PageCache<V extends { json: string } = { json: string; rows: number }> {
  private readonly entries = new Map<string, V>();
  private bytes = 0;

  constructor(
    private readonly maxBytes: number,
    private readonly maxEntryBytes: number,
  ) {}

  get(key: string): V | undefined {
    const hit = this.entries.get(key);
    if (hit) {
      // Refresh its place: the map's order is the eviction order.
      this.entries.delete(key);
      this.entries.set(key, hit);
    }
    return hit;
  }

  set(key: string, value: V): void {
    // Strings are UTF-16 in memory; JSON of trades is ASCII, so length × 2 is the cost.
    const size = value.json.length * 2 + key.length * 2;
    if (size > this.maxEntryBytes || this.entries.has(key)) return;
    while (this.bytes + size > this.maxBytes && this.entries.size > 0) {
      const [k, v] = this.entries.entries().next().value!;
      this.entries.delete(k);
      this.bytes -= v.json.length * 2 + k.length * 2;
    }
    this.entries.set(key, value);
    this.bytes += size;
  }
}
