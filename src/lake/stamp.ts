import { lakeVersion, SET_NAMES } from './versions.js';

/**
 * The lake's change stamp: its version (src/lake/versions.ts), the request's pinned one. Answers derived from
 * the lake as a whole — market_id resolution, the raw data-set catalogue, series, stats — are cached under it;
 * a published batch is a new version, so every such answer follows it at once and never mixes two.
 */
export function lakeStamp(lakeDir: string): string {
  const v = lakeVersion(lakeDir);
  // Version 0 (a lake from before versions) is listed from its directories: its file list is its identity.
  return v.version > 0 ? `${v.lakeDir}|v${v.version}` : `${v.lakeDir}|v0|${SET_NAMES.map((n) => v.setKey(n)).join('|')}`;
}

/**
 * Values computed from the lake, one per (lake, key), reused while the lake's stamp is unchanged. Concurrent
 * misses share one computation; a failed one is not kept. `maxAgeMs` also expires an entry by age.
 */
export class StampedCache<T> {
  private readonly entries = new Map<string, { stamp: string; at: number; value: Promise<T> }>();

  constructor(private readonly opts: { maxEntries?: number; maxAgeMs?: number } = {}) {}

  /**
   * Whether the value for the current stamp is held or already being computed: a `get` now would start no
   * computation of its own (a route that pays for lake scans with a slot takes one only when this is false).
   */
  has(lakeDir: string, key: string): boolean {
    const e = this.entries.get(`${lakeDir}\u0000${key}`);
    return e !== undefined && e.stamp === lakeStamp(lakeDir) && (this.opts.maxAgeMs === undefined || Date.now() - e.at < this.opts.maxAgeMs);
  }

  /** The value and when it was computed. */
  async get(lakeDir: string, key: string, compute: () => Promise<T>): Promise<{ value: T; at: number }> {
    const stamp = lakeStamp(lakeDir);
    const id = `${lakeDir}\u0000${key}`;
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
