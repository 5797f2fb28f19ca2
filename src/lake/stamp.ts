import type { LakeSession } from './session.js';

/**
 * Values computed from the lake, one per (lake, key), reused while the session's stamp (its version,
 * ./versions.ts LakeVersion.stamp) is unchanged. Answers derived from the lake as a whole — market_id resolution,
 * the raw data-set catalogue, series, stats — are cached so; a published batch is a new version, so every such
 * answer follows it at once and never mixes two. Concurrent misses share one computation; a failed one is not
 * kept. `maxAgeMs` also expires an entry by age.
 */
export class StampedCache<T> {
  private readonly entries = new Map<string, { stamp: string; at: number; value: Promise<T> }>();

  constructor(private readonly opts: { maxEntries?: number; maxAgeMs?: number } = {}) {}

  /**
   * Whether the value for the session's stamp is held or already being computed: a `get` now would start no
   * computation of its own (a route that pays for lake scans with a slot takes one only when this is false).
   */
  has(lake: LakeSession, key: string): boolean {
    const e = this.entries.get(`${lake.lakeDir}\u0000${key}`);
    return e !== undefined && e.stamp === lake.stamp && (this.opts.maxAgeMs === undefined || Date.now() - e.at < this.opts.maxAgeMs);
  }

  /** The value and when it was computed. */
  async get(lake: LakeSession, key: string, compute: () => Promise<T>): Promise<{ value: T; at: number }> {
    const stamp = lake.stamp;
    const id = `${lake.lakeDir}\u0000${key}`;
    const now = Date.now();
    let e = this.entries.get(id);
    if (!e || e.stamp !== stamp || (this.opts.maxAgeMs !== undefined && now - e.at >= this.opts.maxAgeMs)) {
      if (!e && this.entries.size >= (this.opts.maxEntries ?? 1000)) this.entries.delete(this.entries.keys().next().value!);
      const entry = { stamp, at: now, value: compute() };
      this.entries.set(id, entry);
      entry.value.catch(() => {
        if (this.entries.get(id) === entry) this.entries.delete(id);
      });
      e = entry;
    }
    return { value: await e.value, at: e.at };
  }
}
