import fs from 'node:fs';
import type { DuckDBConnection } from '@duckdb/node-api';
import { sqlIdent, sqlString } from '../src/lake/duckdb.js';
import { DATASETS, parquetScan, type DatasetDef, type DatasetName } from '../src/lake/layout.js';
import { writeParquetFile } from './partitions.js';
import { publishMissingIndex } from './raw-index.js';
import { VersionDraft } from './versions.js';
import type { FileEntry } from '../src/lake/versions.js';

/**
 * Compaction: a partition's files (the adopted or last compacted file plus one small file per append) merged
 * into one file, sorted on the data set's sort order and de-duplicated on its natural key, published as a new
 * version. Readers of older versions keep their files for the grace period (ingest/versions.ts sweepLake).
 *
 * Appends never leave duplicates (ingest/partitions.ts checks keys against the stored files), so the
 * de-duplicating window runs only when a count of distinct key hashes says two rows share a key (a hash
 * collision only sends a partition down the exact path). When it does, for facts the oldest file's row wins
 * (as on append); for derived data set `onConflict: 'replace'` the newest.
 */
export type CompactReport = {
  version: number | null;
  partitions: number;
  files_in: number;
  files_out: number;
  rows: number;
  bytes_in: number;
  bytes_out: number;
  seconds: number;
  /** Raw days compacted here that had no market index and got one (ingest/raw-index.ts: archive backfills). */
  raw_index_days: number;
};

/** A report of nothing compacted yet: what compactLake and the follow loop's bounded step add to. */
export function emptyCompactReport(): CompactReport {
  return { version: null, partitions: 0, files_in: 0, files_out: 0, rows: 0, bytes_in: 0, bytes_out: 0, seconds: 0, raw_index_days: 0 };
}

/** Files below this size count as small for the automatic trigger. */
export const SMALL_FILE_BYTES = 64 * 1024 * 1024;

export type CompactOptions = {
  /** Automatic mode: compact only partitions with more than this many small files. Unset: every partition with 2+ files. */
  smallFiles?: number;
  datasets?: readonly DatasetName[];
};

export async function compactLake(conn: DuckDBConnection, lakeDir: string, opts: CompactOptions = {}): Promise<CompactReport> {
  const t0 = performance.now();
  const report = emptyCompactReport();
  const rawDays: string[] = [];
  const names = opts.datasets ?? (Object.keys(DATASETS) as DatasetName[]).filter((d) => (DATASETS[d] as DatasetDef).partition !== 'none');
  for (const name of names) {
    // One version per data set: a kill loses at most one data set's work, and the next run sweeps its files.
    const draft = new VersionDraft(lakeDir);
    const byPartition = new Map<string, { path: string; bytes: number }[]>();
    for (const e of draft.entries(name)) {
      if (e.partition === null) continue;
      const list = byPartition.get(e.partition) ?? [];
      list.push(e);
      byPartition.set(e.partition, list);
    }
    for (const [partition, entries] of byPartition) {
      if (entries.length < 2) continue;
      if (opts.smallFiles !== undefined && entries.filter((e) => e.bytes < SMALL_FILE_BYTES).length <= opts.smallFiles) continue;
      const rows = await compactPartition(conn, draft, name, partition);
      if (name === 'raw') rawDays.push(partition);
      report.partitions += 1;
      report.files_in += entries.length;
      report.files_out += 1;
      report.rows += rows;
      report.bytes_in += entries.reduce((s, e) => s + e.bytes, 0);
      const pauseMs = Number(process.env.PMLAKE_TEST_PAUSE_BETWEEN_MERGES_MS ?? 0);
      if (pauseMs > 0) {
        // Test hook (kill test, as in ingest/run.ts): announce each partition written and leave time to be killed.
        process.stderr.write(`pmlake-test: compacted ${name} ${partition}\n`);
        await new Promise((r) => setTimeout(r, pauseMs));
      }
    }
    const published = draft.publish('compact', {}, []);
    if (published) {
      report.version = published.version;
      report.bytes_out += published.change.bytes_added;
    }
  }
  if (rawDays.length > 0) {
    // A raw day compacted here is read anyway: one deferred by an archive backfill gets its market index now.
    const index = await publishMissingIndex(conn, lakeDir, rawDays);
    if (index.version !== null) report.version = index.version;
    report.raw_index_days = index.days;
  }
  report.seconds = Math.round((performance.now() - t0) / 10) / 100;
  return report;
}

async function compactPartition(conn: DuckDBConnection, draft: VersionDraft, name: DatasetName, partition: string): Promise<number> {
  return compactFiles(
    conn,
    draft,
    name,
    partition,
    draft.entries(name).filter((e) => e.partition === partition),
  );
}

/**
 * Merges some files of one partition (all of them, or a group the follow loop's policy chose) into one new file
 * of the draft, sorted and de-duplicated as above, and retires them. Returns the rows written.
 */
export async function compactFiles(
  conn: DuckDBConnection,
  draft: VersionDraft,
  name: DatasetName,
  partition: string,
  group: readonly FileEntry[],
): Promise<number> {
  const def: DatasetDef = DATASETS[name];
  const cols = Object.keys(def.columns).map(sqlIdent).join(', ');
  const key = def.naturalKey.map(sqlIdent).join(', ');
  const order = def.sortBy.map(sqlIdent).join(', ');
  // Oldest first: adopted `data.parquet` files, then `vNNNNNNNN-…` in version order.
  const entries = [...group].sort((a, b) => rank(a.path).localeCompare(rank(b.path)));
  const files = entries.map((e) => `${draft.lakeDir}/${e.path}`);
  const list = `[${files.map(sqlString).join(', ')}]`;
  const dup = (await conn.runAndReadAll(`SELECT count(*) - count(DISTINCT hash(${key})) AS d FROM ${parquetScan(def, list)}`)).getRowObjectsJS()[0]!;
  let select = `SELECT ${cols} FROM ${parquetScan(def, list)} ORDER BY ${order}`;
  if (Number(dup.d) > 0) {
    const age = files.map((f, i) => `WHEN ${sqlString(f)} THEN ${i}`).join(' ');
    const winner = def.onConflict === 'replace' ? 'DESC' : 'ASC';
    select = `SELECT ${cols} FROM ${parquetScan(def, list, ', filename = true')}
      QUALIFY row_number() OVER (PARTITION BY ${key} ORDER BY CASE filename ${age} END ${winner}, ${cols}) = 1
      ORDER BY ${order}`;
  }
  const out = draft.newFile(name, partition);
  const rows = await writeParquetFile(conn, select, out, {}, def.rowGroupSize);
  draft.retire(
    name,
    entries.map((e) => e.path),
  );
  if (rows > 0) draft.add(name, partition, out, rows);
  else fs.rmSync(out, { force: true });
  return rows;
}

/** Sort key by age: adopted files first, then by version and the file's number within it (numerically). */
function rank(rel: string): string {
  const base = rel.slice(rel.lastIndexOf('/') + 1);
  const m = /^v([0-9]{8})-([0-9]+)-/.exec(base);
  return m ? `1${m[1]}${m[2]!.padStart(8, '0')}` : `0${base}`;
}
