import fs from 'node:fs';
import path from 'node:path';
import { expandInputs } from './detect.js';
import { readLedger } from './ledger.js';

/**
 * The follow loop's memory of which files it has dealt with, so a cycle hands the orchestrator only new files
 * instead of hashing every file of the directories again. A file is known by its path, size and mtime: a closed
 * capture file is never written again, and a file that does change is taken again (the orchestrator hashes it and
 * the ledger decides). Seeded from the ledger, whose entries carry size and mtime (older entries only the size).
 *
 * `rejected` holds files the orchestrator could not read (format not recognised, staging failed): such a file is
 * taken again only after a wait that doubles each time (REJECT_RETRY_MS up to REJECT_RETRY_MAX_MS), or at once
 * when it changes. A bad file is then an issue now and then, not one per cycle, while a file that failed for a
 * passing reason (DuckDB out of memory) still lands.
 */
/** The first wait before a rejected file is taken again, and the longest. */
export const REJECT_RETRY_MS = 2 * 60_000;
export const REJECT_RETRY_MAX_MS = 6 * 3_600_000;

export class LandedFiles {
  private readonly landed = new Set<string>();
  private readonly rejected = new Map<string, { retryAt: number; waitMs: number }>();
  /** The identity of each file handed out by the last `pending`, to record its outcome under. */
  private handedOut = new Map<string, string>();

  static fromLedger(lakeDir: string): LandedFiles {
    const f = new LandedFiles();
    for (const e of readLedger(lakeDir).values()) f.landed.add(identity(e.file, e.bytes, e.mtime_ms));
    return f;
  }

  get size(): number {
    return this.landed.size;
  }

  /** Closed files of the directories not yet landed nor rejected, in name order (capture names sort by time). */
  pending(dirs: readonly string[]): string[] {
    const out: { file: string; base: string }[] = [];
    this.handedOut = new Map();
    const now = Date.now();
    for (const file of expandInputs([...dirs]).files) {
      const st = fs.statSync(file, { throwIfNoEntry: false });
      if (!st?.isFile()) continue;
      const id = identity(file, st.size, st.mtimeMs);
      if (this.landed.has(id) || this.landed.has(identity(file, st.size)) || (this.rejected.get(id)?.retryAt ?? 0) > now) continue;
      this.handedOut.set(file, id);
      out.push({ file, base: path.basename(file) });
    }
    out.sort((a, b) => a.base.localeCompare(b.base) || a.file.localeCompare(b.file));
    return out.map((o) => o.file);
  }

  /** The orchestrator's word on a file handed out by the last `pending`. */
  record(file: string, outcome: 'landed' | 'skipped' | 'failed'): void {
    const id = this.handedOut.get(file);
    if (id === undefined) return;
    if (outcome !== 'failed') {
      this.landed.add(id);
      this.rejected.delete(id);
      return;
    }
    const before = this.rejected.get(id);
    const waitMs = before ? Math.min(REJECT_RETRY_MAX_MS, before.waitMs * 2) : REJECT_RETRY_MS;
    this.rejected.set(id, { retryAt: Date.now() + waitMs, waitMs });
  }
}

/** Without an mtime (ledger entries written before it was recorded): path and size alone. */
function identity(file: string, bytes: number, mtimeMs?: number): string {
  return `${path.resolve(file)}\u0000${bytes}\u0000${mtimeMs === undefined ? '*' : mtimeMs}`;
}
