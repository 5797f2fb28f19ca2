import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { DuckDBInstance, type DuckDBValue } from '@duckdb/node-api';

/** A statement and its bound values: what every SQL builder returns. Values are never spliced into text. */
export type Query = Readonly<{ sql: string; params: Readonly<Record<string, DuckDBValue>> }>;

export type LakeDbOptions = {
  /**
   * Directories DuckDB may read or write, besides its own spill folder; everything else (the rest of the
   * temp directory, the state directory with the accounts database) is refused once external access is off.
   */
  allowedDirectories: string[];
  threads?: number | undefined;
  memoryLimit?: string | undefined;
  /** Database file; ':memory:' for the query service (the lake itself is Parquet). */
  path?: string;
  /** Ingest needs to write temp files and create tables; the service only reads. */
  lock?: boolean;
  /** Where DuckDB spills; ingest passes its scratch directory under the lake (see ingest/scratch.ts). */
  tempDirectory?: string;
};

/**
 * Opens DuckDB the way every part of pmlake uses it: UTC, no extension auto-install (there is no network
 * and a failed autoload leaves empty folders under ~/.duckdb), file access limited to the given
 * directories, and the configuration locked so no later statement can loosen it.
 */
// DuckDB removes its spill files but not their folders; remove those when the process ends.
const spillDirs = new Set<string>();
process.once('exit', () => {
  for (const dir of spillDirs) fs.rmSync(dir, { recursive: true, force: true });
});

const SPILL_PREFIX = 'pmlake-duckdb-spill-';

export async function openLakeDb(opts: LakeDbOptions): Promise<DuckDBInstance> {
  const extDir = path.join(os.tmpdir(), 'pmlake-duckdb-ext');
  fs.mkdirSync(extDir, { recursive: true });
  let tempDir: string;
  if (opts.tempDirectory) {
    tempDir = opts.tempDirectory;
    fs.mkdirSync(tempDir, { recursive: true });
  } else {
    // A killed process skips the 'exit' hook: its folder is named by pid and removed by the next one.
    sweepDeadSpillDirs();
    tempDir = fs.mkdtempSync(path.join(os.tmpdir(), `${SPILL_PREFIX}${process.pid}-`));
  }
  spillDirs.add(tempDir);
  const options: Record<string, string> = {
    autoinstall_known_extensions: 'false',
    autoload_known_extensions: 'false',
    extension_directory: extDir,
    temp_directory: tempDir,
  };
  if (opts.threads) options.threads = String(opts.threads);
  if (opts.memoryLimit) options.memory_limit = opts.memoryLimit;
  const instance = await DuckDBInstance.create(opts.path ?? ':memory:', options);
  const conn = await instance.connect();
  try {
    // TimeZone is an ICU setting, unknown to the instance options; set it globally for every connection.
    await conn.run(`SET GLOBAL TimeZone = 'UTC'`);
    // Parquet footers are re-read on every query otherwise; the cache is keyed on the file's modification time,
    // so an ingest's atomic rename of a partition invalidates its entry.
    await conn.run('SET GLOBAL parquet_metadata_cache = true');
    const dirs = [...opts.allowedDirectories, tempDir].map((d) => path.resolve(d));
    // allowed_directories only bites once external access is off; the lake paths stay readable.
    await conn.run(`SET allowed_directories = ${sqlList(dirs)}`);
    await conn.run(`SET enable_external_access = false`);
    if (opts.lock !== false) await conn.run('SET lock_configuration = true');
  } finally {
    conn.closeSync();
  }
  return instance;
}

/** Removes spill folders of processes that no longer run (`pmlake-duckdb-spill-<pid>-*`). */
export function sweepDeadSpillDirs(root: string = os.tmpdir()): number {
  let removed = 0;
  for (const name of fs.readdirSync(root)) {
    const m = name.startsWith(SPILL_PREFIX) ? /^(\d+)-/.exec(name.slice(SPILL_PREFIX.length)) : null;
    if (!m || processAlive(Number(m[1]))) continue;
    fs.rmSync(path.join(root, name), { recursive: true, force: true });
    removed++;
  }
  return removed;
}

/** Whether a process with this pid runs (EPERM: it does, as another user). Also the lake lock's staleness test. */
export function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** A string literal for the few statements (SET, COPY targets) that cannot take parameters. */
export function sqlString(s: string): string {
  if (s.includes('\u0000')) throw new Error('NUL byte in SQL literal');
  return `'${s.replaceAll("'", "''")}'`;
}

/** An identifier: only for names that a zod enum or pattern has already allowed. */
export function sqlIdent(name: string): string {
  return `"${name.replaceAll('"', '""')}"`;
}

function sqlList(items: string[]): string {
  return `[${items.map(sqlString).join(', ')}]`;
}
