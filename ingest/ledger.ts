import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Worker } from 'node:worker_threads';
import { Unavailable } from '../src/errors.js';
import { processAlive } from '../src/lake/duckdb.js';
import { isHeld, tryAdvisoryLock, type AdvisoryLock, type Refusal } from '../src/locks/advisory.js';

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
  /** The file's modification time when it was read (absent in entries written before it was recorded). */
  mtime_ms?: number;
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
  // No execArgv: the worker is plain JavaScript, and the parent's TypeScript loader (tsx) would take longer to
  // start in it than hashing a file of a few tens of MB.
  private readonly worker = new Worker(new URL('./hash-worker.mjs', import.meta.url), { execArgv: [] });
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
/** The lock across machines could not be taken (PostgreSQL unreachable): the ingest must not run unlocked. */
export class LakeLockUnavailableError extends Error {}

export type LakeLockOptions = {
  /** PostgreSQL shared by the writers of a lake on several machines (src/config.ts PMLAKE_DATABASE_URL). */
  databaseUrl?: string;
};

/**
 * An exclusive lock on the lake for the duration of an ingest (or compaction); the returned function releases it.
 *
 * Always a lock file: `<lake>/_ingest/lock` holding the owner's pid and host, created with O_EXCL. A lock whose
 * pid no longer runs on this host (a killed ingest) is stale and is taken over.
 *
 * With a database URL, first a PostgreSQL session-level advisory lock keyed by the lake's identity, held on its
 * own connection until release (or until the process dies: the server drops a dead session's locks, so a
 * killed ingest strands nothing). It is taken *in addition to* the file, not instead of it: the file keeps
 * excluding a writer on this machine started without PMLAKE_DATABASE_URL (a hand-run `pmlake compact`), and
 * it is where a human finds who holds the lake. Across machines the file alone cannot work (a pid from another
 * host says nothing here), so a file left by another host is taken over only under the advisory lock, which
 * proves its writer gone; without a database it is refused. Every writer of a shared lake must therefore set
 * PMLAKE_DATABASE_URL. PostgreSQL unreachable → LakeLockUnavailableError before anything is written.
 * Known limit: a session lost mid-ingest (database restarted) frees the lock while this ingest still runs.
 */
export async function acquireLakeLock(lakeDir: string, opts: LakeLockOptions = {}): Promise<() => Promise<void>> {
  let advisory: AdvisoryLock | undefined;
  if (opts.databaseUrl) {
    let got: AdvisoryLock | Refusal;
    try {
      got = await tryAdvisoryLock(opts.databaseUrl, () => `pmlake lake writer ${lakeIdentity(lakeDir)}`, 'ingest');
    } catch (err) {
      if (!(err instanceof Unavailable)) throw err;
      throw new LakeLockUnavailableError(`cannot take the lake's ingest lock: ${err.message}; nothing was written`);
    }
    if (!isHeld(got)) {
      throw new LakeLockedError(`lake ${lakeDir} is locked by a running ingest (${got.holder ?? 'PostgreSQL advisory lock held by another session'})`);
    }
    advisory = got;
  }
  try {
    const releaseFile = takeLockFile(lakeDir, advisory !== undefined);
    return async () => {
      releaseFile();
      await advisory?.release();
    };
  } catch (err) {
    await advisory?.release();
    throw err;
  }
}

function takeLockFile(lakeDir: string, holdsAdvisory: boolean): () => void {
  fs.mkdirSync(ingestDir(lakeDir), { recursive: true });
  const file = path.join(ingestDir(lakeDir), 'lock');
  for (let attempt = 0; attempt < 3; attempt += 1) {
    try {
      const fd = fs.openSync(file, 'wx');
      fs.writeSync(fd, `${process.pid}\n${os.hostname()}\n`);
      fs.closeSync(fd);
      let released = false;
      return () => {
        if (released) return;
        released = true;
        fs.rmSync(file, { force: true });
      };
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      const [pidText = '', host = ''] = fs.readFileSync(file, 'utf8').split('\n');
      const pid = Number.parseInt(pidText.trim(), 10);
      // Files written before the host line, or by this host: the pid is checked here.
      const here = host.trim() === '' || host.trim() === os.hostname();
      if (!here && !holdsAdvisory) {
        throw new LakeLockedError(
          `lake ${lakeDir} is locked by an ingest on host ${host.trim()} (pid ${pidText.trim()}); writers on several machines need PMLAKE_DATABASE_URL, or remove ${file} if it no longer runs`,
        );
      }
      if (here && Number.isInteger(pid) && pid > 0 && (pid === process.pid || processAlive(pid))) {
        throw new LakeLockedError(`lake ${lakeDir} is locked by a running ingest (pid ${pid})`);
      }
      fs.rmSync(file, { force: true });
    }
  }
  throw new LakeLockedError(`could not take the lake lock ${file}`);
}

/**
 * The lake's identity for the advisory lock: a random id kept in `<lake>/_ingest/lake-id`, not the lake's path,
 * because machines may mount one shared lake at different paths. Two first ingests racing to create it agree:
 * each writes its own candidate and link()s it into place, which fails when the id already exists.
 */
export function lakeIdentity(lakeDir: string): string {
  const file = path.join(ingestDir(lakeDir), 'lake-id');
  const read = (): string | undefined => {
    try {
      const id = fs.readFileSync(file, 'utf8').trim();
      return /^[0-9a-f-]{36}$/.test(id) ? id : undefined;
    } catch {
      return undefined;
    }
  };
  const existing = read();
  if (existing) return existing;
  fs.mkdirSync(ingestDir(lakeDir), { recursive: true });
  const candidate = `${file}.${process.pid}.${randomUUID()}.tmp`;
  fs.writeFileSync(candidate, `${randomUUID()}\n`);
  try {
    fs.linkSync(candidate, file);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
  } finally {
    fs.rmSync(candidate, { force: true });
  }
  const id = read();
  if (!id) throw new Error(`${file} does not hold a lake id; remove it to have a new one made`);
  return id;
}
