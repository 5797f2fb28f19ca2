import fs from 'node:fs';
import path from 'node:path';
import { DATASETS } from './layout.js';

/**
 * A cheap change stamp of the lake, until the lake has real versions: the ingest ledger (every landed batch
 * appends to it after its files are renamed into place, ingest/ledger.ts) and the catalogue files (rewritten
 * when their rows change), each by inode, mtime and size. Answers derived from the lake as a whole — market_id
 * resolution, the raw data-set catalogue, series, stats — are cached under it. A batch's data is visible a
 * moment before its ledger line: an answer computed in that moment is cached under the old stamp and replaced
 * once the line lands.
 */
const LEDGER = path.join('_ingest', 'ledger.jsonl');
const WATCHED = [LEDGER, ...(['markets', 'tokens', 'series'] as const).map((n) => path.join(DATASETS[n].dir, 'data.parquet'))];

/** The files are stat'ed at most this often per lake: four stat calls per request showed in the profile. */
const TTL_MS = 500;
const checked = new Map<string, { at: number; stamp: string }>();

export function lakeStamp(lakeDir: string, now: number = Date.now()): string {
  const hit = checked.get(lakeDir);
  if (hit && now - hit.at < TTL_MS) return hit.stamp;
  const parts: string[] = [lakeDir];
  for (const f of WATCHED) {
    try {
      const st = fs.statSync(path.join(lakeDir, f));
      parts.push(`${st.ino}:${st.mtimeMs}:${st.size}`);
    } catch {
      parts.push('-');
    }
  }
  const stamp = parts.join('|');
  checked.set(lakeDir, { at: now, stamp });
  return stamp;
}

/**
 * Values computed from the lake, one per (lake, key), reused while the lake's stamp is unchanged. Concurrent
 * misses share one computation; a failed one is not kept. `maxAgeMs` also expires an entry by age.
 */
export class StampedCache<T> {
  private readonly entries = new Map<string, { stamp: string; at: number; value: Promise<T> }>();

  constructor(private readonly opts: { maxEntries?: number; maxAgeMs?: number } = {}) {}

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
