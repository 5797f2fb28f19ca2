import fs from 'node:fs';
import path from 'node:path';
import { Worker } from 'node:worker_threads';
import { processAlive } from '../src/lake/duckdb.js';

/**
 * What has been ingested, keyed by the sha256 of each input file's bytes. The ledger is an append-only JSON
 * lines file under `<lake>/_ingest/`; an entry is written (and fsynced) only after every partition touched by
 * the file's batch has been renamed into place, so a crash before that point makes the next run ingest the
 * file again — which changes nothing that was already written, because partitions de-duplicate on natural keys.
 */

export type LedgerEntry = {
  sha256: string;
  file: string;
  bytes: number;
  handler: string;
  ingested_at: string;
};

export function ingestDir(lakeDir: string): string {
  return path.join(lakeDir, '_ingest');
}

function ledgerPath(lakeDir: string): string {
  return path.join(ingestDir(lakeDir), 'ledger.jsonl');
}

export function readLedger(lakeDir: string): Map<string, LedgerEntry> {
  const out = new Map<string, LedgerEntry>();
  const file = ledgerPath(lakeDir);
  if (!fs.existsSync(file)) return out;
  for (const line of fs.readFileSync(file, 'utf8').split('\n')) {
    if (!line.trim()) continue;
    try {
      const e = JSON.parse(line) as LedgerEntry;
      if (typeof e.sha256 === 'string') out.set(e.sha256, e);
    } catch {
      // A torn last line from a crash mid-append: the file it named is simply ingested again.
    }
  }
  return out;
}

export function appendLedger(lakeDir: string, entries: LedgerEntry[]): void {
  if (entries.length === 0) return;
  fs.mkdirSync(ingestDir(lakeDir), { recursive: true });
  const fd = fs.openSync(ledgerPath(lakeDir), 'a');
  try {
    fs.writeSync(fd, entries.map((e) => JSON.stringify(e)).join('\n') + '\n');
    fs.fsyncSync(fd);
  } finally {
    fs.closeSync(fd);
  }
}

/**
 * Hashes files in order on one worker thread, ahead of the caller: `hash(file)` returns a promise that is
 * usually settled by the time the orchestrator has staged the file before it. Call `close()` when done.
 */
export class FileHasher {
  private readonly worker = new Worker(new URL('./hash-worker.mjs', import.meta.url));
  private readonly waiting = new Map<number, { resolve: (h: string) => void; reject: (e: Error) => void }>();
  private next = 0;

  constructor() {
    this.worker.on('message', (m: { id: number; sha256?: string; error?: string }) => {
      const w = this.waiting.get(m.id);
      this.waiting.delete(m.id);
      if (m.sha256 !== undefined) w?.resolve(m.sha256);
      else w?.reject(new Error(m.error ?? 'hash failed'));
    });
    this.worker.on('error', (err) => {
      for (const w of this.waiting.values()) w.reject(err);
      this.waiting.clear();
    });
  }

  hash(file: string): Promise<string> {
    const id = this.next++;
    const p = new Promise<string>((resolve, reject) => this.waiting.set(id, { resolve, reject }));
    // Queued now, hashed in order; an unawaited failure must not become an unhandled rejection.
    p.catch(() => {});
    this.worker.postMessage({ id, file });
    return p;
  }

  async close(): Promise<void> {
    await this.worker.terminate();
  }
}

export class LakeLockedError extends Error {}

/**
 * An exclusive lock on the lake for the duration of an ingest: `<lake>/_ingest/lock` holding the owner's pid,
 * created with O_EXCL. A lock whose pid no longer runs (a killed ingest) is stale and is taken over.
 */
export function acquireLakeLock(lakeDir: string): () => void {
  fs.mkdirSync(ingestDir(lakeDir), { recursive: true });
  const file = path.join(ingestDir(lakeDir), 'lock');
  for (let attempt = 0; attempt < 3; attempt += 1) {
    try {
      const fd = fs.openSync(file, 'wx');
      fs.writeSync(fd, `${process.pid}\n`);
      fs.closeSync(fd);
      let released = false;
      return () => {
        if (released) return;
        released = true;
        fs.rmSync(file, { force: true });
      };
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      const pid = Number.parseInt(fs.readFileSync(file, 'utf8').trim(), 10);
      if (Number.isInteger(pid) && pid > 0 && (pid === process.pid || processAlive(pid))) {
        throw new LakeLockedError(`lake ${lakeDir} is locked by a running ingest (pid ${pid})`);
      }
      fs.rmSync(file, { force: true });
    }
  }
  throw new LakeLockedError(`could not take the lake lock ${file}`);
}
