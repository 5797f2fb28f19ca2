import path from 'node:path';
import type { DuckDBConnection } from '@duckdb/node-api';
import { sqlString } from '../src/lake/duckdb.js';
import { DATASETS, type DatasetDef, type DatasetName } from '../src/lake/layout.js';
import type { FileEntry } from '../src/lake/versions.js';
import { compactFiles, emptyCompactReport, type CompactReport } from './compact.js';
import { VersionDraft } from './versions.js';

/**
 * The follow loop's compaction policy (lake/README.md "Following"). Every cycle adds a small file to each
 * partition it touches, so a day partition would hold thousands. Files are grouped by the time their rows cover
 * (the partition column's span in the file's footer statistics, read once per file: files never change):
 * - a file whose rows lie in one hour that has closed (settled: no longer written by the cycles) joins that hour's
 *   group; a group of two or more is merged into one hour file;
 * - once a whole day has closed, its files (hour files and the rest) are merged into one day file, unless the day
 *   is larger than DAY_FILE_MAX_BYTES (then its hour files stay: each is large enough to read well).
 * A file spanning more than a day (a one-shot ingest's batch) is left as it is. Late files for a folded hour or
 * day are merged with it once they add a quarter of its size or number more than eight (worthMerging). Work per cycle is bounded: oldest groups first, at most
 * MAX_BYTES_PER_STEP of input, and no new group once the cycle's period is used up, except that a step always
 * merges at least one group so compaction cannot starve under load. All merges of a step publish one version
 * (`kind: compact`); readers keep the version they pinned, and the retired files are swept after the grace period.
 */

const HOUR_MS = 3_600_000;
const DAY_MS = 24 * HOUR_MS;
/** A closed day larger than this keeps its hour files. */
export const DAY_FILE_MAX_BYTES = 1024 * 1024 * 1024;
/** Input bytes one step merges at most. */
export const MAX_BYTES_PER_STEP = 512 * 1024 * 1024;

/** A group whose largest file is folded already waits until the others add this share of it, or this many files. */
const GROWTH_SHARE = 0.25;
const MANY_FILES = 8;

type Span = { min: number; max: number };

/**
 * Whether merging the files pays: not when one file already holds nearly all of it (a folded hour or day and a
 * late file or two). Rewriting it for each late file would make a backfill of a closed day quadratic; waiting
 * until the rest add a quarter of it (or are many) rewrites each row a bounded number of times.
 */
function worthMerging(list: readonly FileEntry[]): boolean {
  if (list.length < 2) return false;
  if (list.length > MANY_FILES) return true;
  const largest = Math.max(...list.map((e) => e.bytes));
  const rest = list.reduce((s, e) => s + e.bytes, 0) - largest;
  return rest >= GROWTH_SHARE * largest;
}
type Group = { name: DatasetName; partition: string; start: number; entries: FileEntry[]; bytes: number };

export class FollowCompaction {
  /** Rows' time span per file path (relative to the lake); null when the file has no rows in the column. */
  private readonly spans = new Map<string, Span | null>();

  private readonly lakeDir: string;

  constructor(
    lakeDir: string,
    cycleSeconds: number,
    /** An hour (day) is closed this long after its end: the recorder's rotation and a cycle or two of lag. */
    private readonly settleMs: number = Math.max(5 * 60_000, 3 * cycleSeconds * 1000),
  ) {
    this.lakeDir = path.resolve(lakeDir);
  }

  /** Plans and merges groups as above into one draft; publishes it when anything was merged. */
  async step(conn: DuckDBConnection, deadline: number, now: number = Date.now()): Promise<CompactReport | null> {
    const t0 = performance.now();
    const draft = new VersionDraft(this.lakeDir);
    const groups = await this.plan(conn, draft, now);
    const report = emptyCompactReport();
    for (const g of groups) {
      if (report.partitions > 0 && (performance.now() >= deadline || report.bytes_in + g.bytes > MAX_BYTES_PER_STEP)) break;
      report.rows += await compactFiles(conn, draft, g.name, g.partition, g.entries);
      report.partitions += 1;
      report.files_in += g.entries.length;
      report.files_out += 1;
      report.bytes_in += g.bytes;
    }
    if (report.partitions === 0) return null;
    const published = draft.publish('compact', {}, []);
    if (published) {
      report.version = published.version;
      report.bytes_out = published.change.bytes_added;
    }
    const live = new Set(Object.values(published?.sets ?? {}).flatMap((l) => (l ?? []).map((e) => e.path)));
    for (const p of this.spans.keys()) if (!live.has(p)) this.spans.delete(p);
    report.seconds = Math.round((performance.now() - t0) / 10) / 100;
    return report;
  }

  /** Every group due now, oldest first. */
  async plan(conn: DuckDBConnection, draft: VersionDraft, now: number): Promise<Group[]> {
    const groups: Group[] = [];
    for (const name of Object.keys(DATASETS) as DatasetName[]) {
      const def: DatasetDef = DATASETS[name];
      if (def.partition === 'none' || !def.partitionColumn) continue;
      const byPartition = new Map<string, FileEntry[]>();
      for (const e of draft.entries(name)) {
        if (e.partition === null) continue;
        byPartition.set(e.partition, [...(byPartition.get(e.partition) ?? []), e]);
      }
      const candidates = [...byPartition.values()].filter((l) => l.length >= 2).flat();
      await this.loadSpans(conn, def, candidates);
      for (const [partition, entries] of byPartition) {
        if (entries.length < 2) continue;
        groups.push(...this.groupsOf(name, partition, entries, now));
      }
    }
    return groups.sort((a, b) => a.start - b.start);
  }

  private groupsOf(name: DatasetName, partition: string, entries: FileEntry[], now: number): Group[] {
    const days = new Map<number, FileEntry[]>();
    for (const e of entries) {
      const s = this.spans.get(e.path);
      if (!s) continue;
      const day = Math.floor(s.min / DAY_MS) * DAY_MS;
      if (s.max >= day + DAY_MS) continue;
      days.set(day, [...(days.get(day) ?? []), e]);
    }
    const out: Group[] = [];
    const group = (start: number, list: FileEntry[]): void => {
      if (!worthMerging(list)) return;
      out.push({ name, partition, start, entries: list, bytes: list.reduce((s, e) => s + e.bytes, 0) });
    };
    for (const [day, list] of days) {
      const bytes = list.reduce((s, e) => s + e.bytes, 0);
      if (day + DAY_MS + this.settleMs <= now && bytes <= DAY_FILE_MAX_BYTES) {
        group(day, list);
        continue;
      }
      const hours = new Map<number, FileEntry[]>();
      for (const e of list) {
        const s = this.spans.get(e.path)!;
        const hour = Math.floor(s.min / HOUR_MS) * HOUR_MS;
        if (s.max >= hour + HOUR_MS || hour + HOUR_MS + this.settleMs > now) continue;
        hours.set(hour, [...(hours.get(hour) ?? []), e]);
      }
      for (const [hour, l] of hours) group(hour, l);
    }
    return out;
  }

  /**
   * The partition column's span of files not seen before, from their footers' row-group statistics (no data read);
   * a file without statistics is left alone.
   */
  private async loadSpans(conn: DuckDBConnection, def: DatasetDef, entries: FileEntry[]): Promise<void> {
    const todo = entries.filter((e) => !this.spans.has(e.path));
    if (todo.length === 0) return;
    const list = `[${todo.map((e) => sqlString(`${this.lakeDir}/${e.path}`)).join(', ')}]`;
    const rows = (
      await conn.runAndReadAll(
        `SELECT file_name, epoch_ms(min(TRY_CAST(stats_min_value AS TIMESTAMP))) AS lo, epoch_ms(max(TRY_CAST(stats_max_value AS TIMESTAMP))) AS hi
         FROM parquet_metadata(${list}) WHERE path_in_schema = $col GROUP BY file_name`,
        { col: def.partitionColumn! },
      )
    ).getRowObjectsJS();
    const byFile = new Map(rows.map((r) => [String(r.file_name), r]));
    for (const e of todo) {
      const r = byFile.get(`${this.lakeDir}/${e.path}`);
      this.spans.set(e.path, r && r.lo !== null && r.hi !== null ? { min: Number(r.lo), max: Number(r.hi) } : null);
    }
  }
}
