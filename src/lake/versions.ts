import fs from 'node:fs';
import path from 'node:path';
import { DATASETS, type DatasetDef, type DatasetName } from './layout.js';

/**
 * Lake versions. A version is one immutable manifest, `_versions/vNNNNNNNN.json`, naming every live file of
 * every data set (paths relative to the lake). `_versions/current.json` is a copy of the current manifest,
 * replaced with one atomic rename: that rename *is* the publication. Files are never rewritten in place: an
 * ingest batch or a compaction writes new files under new names, then publishes a manifest naming them; until
 * then no reader can see them, and after it every reader that resolves the version sees all of them.
 *
 * A reader resolves a version once and keeps it (a lake session, ./session.ts: one per request, per export job),
 * so one request never mixes two.
 *
 * A lake written before versions existed (Parquet files in Hive partition directories, no `_versions/`) is
 * read as version 0, listed from the directories; the first ingest or compaction adopts those files into version 1.
 */

/** Internal sets, versioned like data sets but not part of the API: the catalogue's (ingest/catalog.ts) and the silence finder's state. */
export const RECORD_SETS = {
  market_records: 'catalog/market_records',
  series_records: 'catalog/series_records',
  /** Per token: trades and book snapshots in the lake and their time span, kept up to date by each batch. */
  token_stats: 'catalog/token_stats',
  /** Per token and for the whole capture: the last receive time and spacing histogram; the capture's outages (ingest/integrity/gap-state.ts). */
  tape_gaps: 'integrity/tape_gaps',
} as const;
export type SetName = DatasetName | keyof typeof RECORD_SETS;
export const SET_NAMES = [...(Object.keys(DATASETS) as DatasetName[]), ...(Object.keys(RECORD_SETS) as (keyof typeof RECORD_SETS)[])];

export function setDir(name: SetName): string {
  return name in RECORD_SETS ? RECORD_SETS[name as keyof typeof RECORD_SETS] : DATASETS[name as DatasetName].dir;
}

export function setPartition(name: SetName): DatasetDef['partition'] {
  return name in RECORD_SETS ? 'none' : (DATASETS[name as DatasetName] as DatasetDef).partition;
}

export type FileEntry = {
  /** Relative to the lake root, `/`-separated, e.g. `trades/month=2025-10/v00000012-0-1a2b.parquet`. */
  path: string;
  /** Partition value (`2025-10`, `2025-10-31`), null for a single-file set. */
  partition: string | null;
  rows: number;
  bytes: number;
};

export type VersionKind = 'adopt' | 'ingest' | 'compact';

/** The inputs whose freshness a version records: the venue's tape now; the catalogue and the chain when they land. */
export const LANDED_SOURCES = ['tape', 'catalogue', 'chain'] as const;
export type LandedSource = (typeof LANDED_SOURCES)[number];

export type Manifest = {
  format: 1;
  version: number;
  parent: number | null;
  published_at: string;
  kind: VersionKind;
  /** What this version changed against its parent (for operators; readers use `sets`). */
  change: { files_added: number; files_removed: number; bytes_added: number; rows_added: Record<string, number>; inputs: string[] };
  /** Every live file of every set, sorted by partition then path. */
  sets: Partial<Record<SetName, FileEntry[]>>;
  /**
   * Per source, the newest receive time (ISO 8601) of everything this version holds (for the tape: max `recv_ts`
   * of raw), carried over from the parent; absent in manifests written before it was recorded.
   */
  landed_to?: Partial<Record<LandedSource, string>>;
};

export const VERSIONS_DIR = '_versions';
export const CURRENT = 'current.json';

export function versionsDir(lakeDir: string): string {
  return path.join(lakeDir, VERSIONS_DIR);
}

export function manifestName(version: number): string {
  return `v${String(version).padStart(8, '0')}.json`;
}

export function parseManifestName(name: string): number | null {
  const m = /^v([0-9]{8})\.json$/.exec(name);
  return m ? Number(m[1]) : null;
}

/** One version of the lake as a reader sees it: absolute file lists per set. */
export class LakeVersion {
  readonly version: number;
  readonly publishedAt: string | null;
  private readonly byName = new Map<SetName, FileEntry[]>();

  constructor(
    readonly lakeDir: string,
    readonly manifest: Manifest,
  ) {
    this.version = manifest.version;
    this.publishedAt = manifest.version === 0 ? null : manifest.published_at;
    for (const [name, entries] of Object.entries(manifest.sets)) this.byName.set(name as SetName, entries ?? []);
  }

  entries(name: SetName): readonly FileEntry[] {
    return this.byName.get(name) ?? [];
  }

  /** Absolute paths of a set's files, in partition order. */
  files(name: SetName): string[] {
    return this.entries(name).map((e) => path.join(this.lakeDir, e.path));
  }

  hasFiles(name: SetName): boolean {
    return this.entries(name).length > 0;
  }

  /** Partition values that hold files, sorted, e.g. ['2025-01', '2025-02']. */
  partitionValues(name: SetName): string[] {
    return [...new Set(this.entries(name).flatMap((e) => (e.partition === null ? [] : [e.partition])))].sort();
  }

  /** Absolute paths of the files of the given partitions. */
  partitionFiles(name: SetName, values: readonly string[]): string[] {
    const want = new Set(values);
    return this.entries(name)
      .filter((e) => e.partition !== null && want.has(e.partition))
      .map((e) => path.join(this.lakeDir, e.path));
  }

  /** A stable key of one set's file list: files are immutable, so equal lists mean equal content. */
  setKey(name: SetName): string {
    return this.entries(name)
      .map((e) => e.path)
      .join('|');
  }

  /**
   * The lake's change stamp at this version: answers derived from the lake as a whole are cached under it
   * (./stamp.ts). Version 0 (a lake from before versions) is listed from its directories: its file list is its identity.
   */
  get stamp(): string {
    return this.version > 0 ? `${this.lakeDir}|v${this.version}` : `${this.lakeDir}|v0|${SET_NAMES.map((n) => this.setKey(n)).join('|')}`;
  }
}

// ---------------------------------------------------------------------------------------------------------
// Resolving the current version.

/** `stat`: current.json's identity when the version came from it; null for a lake without versions (listed at `at`). */
type Resolved = { stat: string | null; at: number; version: LakeVersion };
const resolved = new Map<string, Resolved>();

function statKey(file: string): string | null {
  try {
    const st = fs.statSync(file);
    return `${st.ino}:${st.mtimeMs}:${st.size}`;
  } catch {
    return null;
  }
}

/** Reads `_versions/current.json`; null when the lake has no versions yet. */
export function readCurrentManifest(lakeDir: string): Manifest | null {
  try {
    return JSON.parse(fs.readFileSync(path.join(versionsDir(lakeDir), CURRENT), 'utf8')) as Manifest;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw err;
  }
}

/**
 * The lake's current version. One stat per call; the manifest is parsed only when
 * `current.json` was replaced (a rename gives it a new inode).
 */
export function currentVersion(lakeDir: string): LakeVersion {
  const dir = path.resolve(lakeDir);
  const key = statKey(path.join(versionsDir(dir), CURRENT));
  const hit = resolved.get(dir);
  // An unversioned lake is listed again at most every 500 ms: its files change under readers anyway.
  const now = Date.now();
  if (hit && hit.stat === key && (key !== null || now - hit.at < 500)) return hit.version;
  const manifest = key === null ? null : readCurrentManifest(dir);
  const version = new LakeVersion(dir, manifest ?? legacyManifest(dir));
  resolved.set(dir, { stat: manifest ? key : null, at: now, version });
  return version;
}

/** Absolute paths of a set's files in the current version (tests, tools). */
export function currentFiles(lakeDir: string, name: SetName): string[] {
  return currentVersion(lakeDir).files(name);
}

// ---------------------------------------------------------------------------------------------------------
// Version 0: a lake from before versions, listed from its directories.

/**
 * The files of an unversioned lake: every `*.parquet` of each partition directory (the old ingest wrote one
 * `data.parquet`; its temporary files did not end in `.parquet`) and of each catalogue directory.
 */
export function legacyManifest(lakeDir: string): Manifest {
  const sets: Partial<Record<SetName, FileEntry[]>> = {};
  // Sets born after versions: an unversioned lake never had them, so a file there is a killed first run's leftover.
  const versionedOnly: readonly SetName[] = ['tape_gaps'];
  const parquet = (rel: string): string[] => {
    try {
      return fs
        .readdirSync(path.join(lakeDir, rel), { withFileTypes: true })
        .filter((e) => e.isFile() && e.name.endsWith('.parquet'))
        .map((e) => e.name)
        .sort();
    } catch {
      return [];
    }
  };
  for (const name of SET_NAMES) {
    if (versionedOnly.includes(name)) continue;
    const dir = setDir(name);
    const kind = setPartition(name);
    const entries: FileEntry[] = [];
    const add = (rel: string, partition: string | null): void => {
      entries.push({ path: rel, partition, rows: -1, bytes: fs.statSync(path.join(lakeDir, rel)).size });
    };
    if (kind === 'none') for (const f of parquet(dir)) add(`${dir}/${f}`, null);
    else {
      let parts: string[] = [];
      try {
        parts = fs
          .readdirSync(path.join(lakeDir, dir))
          .filter((d) => d.startsWith(`${kind}=`))
          .sort();
      } catch {
        // no directory: no files
      }
      for (const p of parts) for (const f of parquet(`${dir}/${p}`)) add(`${dir}/${p}/${f}`, p.slice(kind.length + 1));
    }
    if (entries.length > 0) sets[name] = entries;
  }
  return {
    format: 1,
    version: 0,
    parent: null,
    published_at: new Date(0).toISOString(),
    kind: 'adopt',
    change: { files_added: 0, files_removed: 0, bytes_added: 0, rows_added: {}, inputs: [] },
    sets,
  };
}
