import fs from 'node:fs';
import path from 'node:path';
import { loadConfig } from '../src/config.js';
import { currentVersion, versionsDir } from '../src/lake/versions.js';
import { compactLake } from './compact.js';
import { acquireLakeLock, LakeLockedError, LakeLockUnavailableError } from './ledger.js';
import { makeScratchDir, openScratchDb, sweepScratch } from './scratch.js';
import { HISTORY } from './versions.js';
import { publishMissingIndex } from './raw-index.js';
import { sweepLake } from './sweep.js';
import { adoptLegacyLake } from './adopt.js';

/**
 * `pmlake compact`: indexes by market the raw days that have no index yet (ingest/raw-index.ts: lakes from
 * before it), merges every partition with more than one file into one sorted, de-duplicated file and publishes
 * the result as a new lake version; then removes files retired longer than the grace period.
 * `pmlake lake versions`: the versions published, newest last, and which one is current.
 */
export async function compactCommand(args: string[]): Promise<number> {
  if (args.includes('--help')) {
    process.stderr.write('usage: pmlake compact\n');
    return 2;
  }
  const config = loadConfig();
  const lakeDir = path.resolve(config.lakeDir);
  fs.mkdirSync(lakeDir, { recursive: true });
  let release: () => Promise<void>;
  try {
    release = await acquireLakeLock(lakeDir, { databaseUrl: config.databaseUrl });
  } catch (err) {
    if (!(err instanceof LakeLockedError || err instanceof LakeLockUnavailableError)) throw err;
    process.stderr.write(`${err.message}\n`);
    return 2;
  }
  let workDir: string | undefined;
  try {
    sweepScratch(lakeDir);
    workDir = makeScratchDir(lakeDir, 'compact');
    const { instance: db, conn } = await openScratchDb(lakeDir, workDir, { threads: config.duckdbThreads, memoryLimit: config.duckdbMemory });
    try {
      await adoptLegacyLake(conn, lakeDir);
      // Before (a killed run's files go at once) and after (files this compaction retired, once past the grace).
      const before = sweepLake(lakeDir, config.lakeGraceSeconds * 1000);
      // Days landed before the market index existed get it first (their own version), then everything compacts.
      const { days, rows } = await publishMissingIndex(conn, lakeDir);
      const compacted = await compactLake(conn, lakeDir);
      const after = sweepLake(lakeDir, config.lakeGraceSeconds * 1000);
      const swept = {
        orphans: before.orphans + after.orphans,
        retired: before.retired + after.retired,
        manifests: before.manifests + after.manifests,
        bytes: before.bytes + after.bytes,
      };
      const mb = compacted.bytes_in / 1e6;
      const out = {
        ...compacted,
        mb_per_second: compacted.seconds > 0 ? Math.round((mb / compacted.seconds) * 10) / 10 : 0,
        rows_per_second: compacted.seconds > 0 ? Math.round(compacted.rows / compacted.seconds) : 0,
        raw_index: { days, rows },
        current_version: currentVersion(lakeDir).version,
        swept,
      };
      process.stdout.write(`${JSON.stringify(out, null, 2)}\n`);
      return 0;
    } finally {
      conn.closeSync();
      db.closeSync();
    }
  } finally {
    if (workDir) fs.rmSync(workDir, { recursive: true, force: true });
    await release();
  }
}

export async function lakeCommand(args: string[]): Promise<number> {
  if (args[0] !== 'versions') {
    process.stderr.write('usage: pmlake lake versions [--json]\n');
    return 2;
  }
  const config = loadConfig();
  const cur = currentVersion(config.lakeDir);
  const lines = readHistory(config.lakeDir);
  if (args.includes('--json')) {
    process.stdout.write(`${JSON.stringify({ current: cur.version, versions: lines }, null, 2)}\n`);
    return 0;
  }
  if (cur.version === 0) process.stdout.write('lake has no versions yet (written before versions; the next ingest or compact adopts it)\n');
  process.stdout.write('version  published_at              kind     files+  files-  rows_added\n');
  for (const l of lines) {
    const rows = Object.values(l.change.rows_added).reduce((s, n) => s + n, 0);
    const mark = l.version === cur.version ? '  (current)' : '';
    process.stdout.write(
      `${String(l.version).padStart(7)}  ${l.published_at.padEnd(24)}  ${l.kind.padEnd(7)}  ${String(l.change.files_added).padStart(6)}  ${String(l.change.files_removed).padStart(6)}  ${String(rows).padStart(10)}${mark}\n`,
    );
  }
  return 0;
}

type HistoryLine = {
  version: number;
  parent: number | null;
  published_at: string;
  kind: string;
  change: { files_added: number; files_removed: number; bytes_added: number; rows_added: Record<string, number>; inputs: number };
};

/** The history log; a torn last line (a crash while appending) is skipped. */
export function readHistory(lakeDir: string): HistoryLine[] {
  let text = '';
  try {
    text = fs.readFileSync(path.join(versionsDir(lakeDir), HISTORY), 'utf8');
  } catch {
    return [];
  }
  return text.split('\n').flatMap((l) => {
    try {
      return l.trim() ? [JSON.parse(l) as HistoryLine] : [];
    } catch {
      return [];
    }
  });
}
