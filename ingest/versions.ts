import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import {
  CURRENT,
  LakeVersion,
  currentVersion,
  manifestName,
  parseManifestName,
  SET_NAMES,
  setDir,
  setPartition,
  versionsDir,
  type FileEntry,
  type Manifest,
  type SetName,
  type VersionKind,
} from '../src/lake/versions.js';

/**
 * Writing lake versions (readers: src/lake/versions.ts). Only ever under the lake lock (ingest/ledger.ts).
 *
 * A draft starts from the current version; a batch or a compaction adds files (new names, written and fsynced
 * first) and retires files, then `publish` writes `vN.json` and renames a copy over `current.json`. Until that
 * rename nothing of the draft is visible; a crash before it leaves files no manifest names, which `sweepLake`
 * removes on the next run. Retired files stay on disk for the grace period, so a reader that resolved an older
 * version before the publish can still read every file it names.
 */
export class VersionDraft {
  readonly base: LakeVersion;
  /** The number this draft publishes as (the lock makes it ours). */
  readonly version: number;
  private readonly sets = new Map<SetName, FileEntry[]>();
  private added: FileEntry[] = [];
  private addedBy = new Map<SetName, FileEntry[]>();
  private retiredSets = new Set<SetName>();
  private removed = 0;
  private seq = 0;

  constructor(readonly lakeDir: string) {
    this.base = currentVersion(lakeDir);
    this.version = nextVersionNumber(lakeDir, this.base.version);
    for (const [name, entries] of Object.entries(this.base.manifest.sets)) this.sets.set(name as SetName, [...(entries ?? [])]);
  }

  /** The draft as a reader would see it if published now. */
  view(): LakeVersion {
    return new LakeVersion(this.lakeDir, this.toManifest('ingest', {}, []));
  }

  entries(name: SetName): readonly FileEntry[] {
    return this.sets.get(name) ?? [];
  }

  files(name: SetName): string[] {
    return this.entries(name).map((e) => path.join(this.lakeDir, e.path));
  }

  partitionFiles(name: SetName, values: readonly string[]): string[] {
    const want = new Set(values);
    return this.entries(name).filter((e) => e.partition !== null && want.has(e.partition)).map((e) => path.join(this.lakeDir, e.path));
  }

  partitionValues(name: SetName): string[] {
    return [...new Set(this.entries(name).flatMap((e) => (e.partition === null ? [] : [e.partition])))].sort();
  }

  /** A fresh absolute path for a new file of a set's partition: never an existing name. */
  newFile(name: SetName, partition: string | null): string {
    const kind = setPartition(name);
    const dir = kind === 'none' ? setDir(name) : `${setDir(name)}/${kind}=${partition}`;
    const file = `v${String(this.version).padStart(8, '0')}-${this.seq++}-${crypto.randomBytes(3).toString('hex')}.parquet`;
    return path.join(this.lakeDir, dir, file);
  }

  /** Adds a written file (absolute path from `newFile`) with its row count. */
  add(name: SetName, partition: string | null, absPath: string, rows: number): void {
    const entry: FileEntry = { path: this.rel(absPath), partition, rows, bytes: fs.statSync(absPath).size };
    const list = this.sets.get(name) ?? [];
    list.push(entry);
    list.sort((a, b) => (a.partition ?? '').localeCompare(b.partition ?? '') || a.path.localeCompare(b.path));
    this.sets.set(name, list);
    this.added.push(entry);
    this.addedBy.set(name, [...(this.addedBy.get(name) ?? []), entry]);
  }

  /** Absolute paths of the files this draft added to a set (not in the version it started from). */
  addedFiles(name: SetName): string[] {
    return (this.addedBy.get(name) ?? []).filter((e) => this.entries(name).includes(e)).map((e) => path.join(this.lakeDir, e.path));
  }

  /** Whether this draft retired any file of the set it started from. */
  retiredFrom(name: SetName): boolean {
    return this.retiredSets.has(name);
  }

  /** Retires files (absolute or relative paths) from the draft; they stay on disk until swept. */
  retire(name: SetName, files: readonly string[]): void {
    const drop = new Set(files.map((f) => (path.isAbsolute(f) ? this.rel(f) : f)));
    const list = this.sets.get(name) ?? [];
    const kept = list.filter((e) => !drop.has(e.path));
    this.removed += list.length - kept.length;
    const own = new Set((this.addedBy.get(name) ?? []).map((e) => e.path));
    if (list.some((e) => drop.has(e.path) && !own.has(e.path))) this.retiredSets.add(name);
    this.sets.set(name, kept);
  }

  /** Replaces a single-file set (catalogue) with one new file. */
  replaceSingle(name: SetName, absPath: string, rows: number): void {
    this.retire(name, this.entries(name).map((e) => e.path));
    this.add(name, null, absPath, rows);
  }

  /** Row counts of adopted files (an unversioned lake's manifest does not know them). */
  setRows(name: SetName, relPath: string, rows: number): void {
    const e = this.sets.get(name)?.find((x) => x.path === relPath);
    if (e) e.rows = rows;
  }

  changed(): boolean {
    return this.added.length > 0 || this.removed > 0;
  }

  /** Publishes the draft as the lake's current version; returns it, or null when it changed nothing. */
  publish(kind: VersionKind, rowsAdded: Record<string, number>, inputs: string[]): Manifest | null {
    if (!this.changed() && this.base.version > 0) return null;
    const manifest = this.toManifest(kind, rowsAdded, inputs);
    const dir = versionsDir(this.lakeDir);
    fs.mkdirSync(dir, { recursive: true });
    const text = `${JSON.stringify(manifest)}\n`;
    // The numbered manifest first (history; O_EXCL: two writers can never publish one number), then the rename of
    // current.json, which is the publication itself.
    writeDurable(path.join(dir, manifestName(manifest.version)), text, 'wx');
    const tmp = path.join(dir, `${CURRENT}.tmp-${process.pid}`);
    writeDurable(tmp, text, 'w');
    fs.renameSync(tmp, path.join(dir, CURRENT));
    fsyncDir(dir);
    appendHistory(this.lakeDir, manifest);
    return manifest;
  }

  private toManifest(kind: VersionKind, rowsAdded: Record<string, number>, inputs: string[]): Manifest {
    const sets: Manifest['sets'] = {};
    for (const [name, list] of [...this.sets.entries()].sort(([a], [b]) => a.localeCompare(b))) if (list.length > 0) sets[name] = list;
    return {
      format: 1,
      version: this.version,
      parent: this.base.version,
      published_at: new Date().toISOString(),
      kind,
      change: {
        files_added: this.added.length,
        files_removed: this.removed,
        bytes_added: this.added.reduce((s, e) => s + e.bytes, 0),
        rows_added: rowsAdded,
        inputs,
      },
      sets,
    };
  }

  private rel(absPath: string): string {
    return path.relative(this.lakeDir, absPath).split(path.sep).join('/');
  }
}

/** Above every numbered manifest on disk, published or not (an unpublished one is swept, its number not reused). */
function nextVersionNumber(lakeDir: string, current: number): number {
  let max = current;
  try {
    for (const n of fs.readdirSync(versionsDir(lakeDir))) max = Math.max(max, parseManifestName(n) ?? 0);
  } catch {
    // no versions yet
  }
  return max + 1;
}

function writeDurable(file: string, text: string, flag: 'w' | 'wx'): void {
  const fd = fs.openSync(file, flag);
  try {
    fs.writeSync(fd, text);
    fs.fsyncSync(fd);
  } finally {
    fs.closeSync(fd);
  }
}

export const HISTORY = 'history.jsonl';

/** The operators' log (`pmlake lake versions`): numbered manifests are deleted once expired, this line stays. */
function appendHistory(lakeDir: string, manifest: Manifest): void {
  const { sets: _sets, ...head } = manifest;
  fs.appendFileSync(path.join(versionsDir(lakeDir), HISTORY), `${JSON.stringify({ ...head, change: { ...head.change, inputs: head.change.inputs.length } })}\n`);
}

/** A run killed between the publishing rename and its history line: the next sweep writes the line. */
function repairHistory(lakeDir: string, current: Manifest): void {
  let text = '';
  try {
    text = fs.readFileSync(path.join(versionsDir(lakeDir), HISTORY), 'utf8');
  } catch {
    // no history yet
  }
  const last = text.trimEnd().split('\n').pop() ?? '';
  let logged = -1;
  try {
    logged = (JSON.parse(last) as { version: number }).version;
  } catch {
    // torn or empty: rewrite below
  }
  if (logged !== current.version) appendHistory(lakeDir, current);
}

export function fsyncDir(dir: string): void {
  const fd = fs.openSync(dir, 'r');
  try {
    fs.fsyncSync(fd);
  } finally {
    fs.closeSync(fd);
  }
}

export type SweepReport = { orphans: number; retired: number; manifests: number; bytes: number };

/**
 * Removes, under the lake lock, every data file no live manifest names: files of a run killed before it published
 * (never visible) and files retired by a version superseded more than `graceMs` ago (no request can still hold
 * them). A manifest stays live until its successor has been current for `graceMs`; expired manifests are deleted
 * with their files, unpublished ones (numbered above the current) at once. Does nothing on an unversioned lake.
 */
export function sweepLake(lakeDir: string, graceMs: number, now: number = Date.now()): SweepReport {
  const report: SweepReport = { orphans: 0, retired: 0, manifests: 0, bytes: 0 };
  const dir = versionsDir(lakeDir);
  const cur = currentVersion(lakeDir);
  if (cur.version === 0) return report;
  repairHistory(lakeDir, cur.manifest);
  const numbered = fs.readdirSync(dir).flatMap((n) => {
    const v = parseManifestName(n);
    return v === null ? [] : [v];
  }).sort((a, b) => a - b);
  const live = new Set<string>();
  const everNamed = new Set<string>();
  const expired: number[] = [];
  // Versions in order: version v was superseded when v+1's successor in the list was published.
  const manifests = new Map<number, Manifest>();
  for (const v of numbered) {
    if (v > cur.version) {
      fs.rmSync(path.join(dir, manifestName(v)), { force: true });
      report.manifests += 1;
      continue;
    }
    try {
      manifests.set(v, JSON.parse(fs.readFileSync(path.join(dir, manifestName(v)), 'utf8')) as Manifest);
    } catch {
      // A torn numbered manifest was never published (current.json is written after it): remove it.
      fs.rmSync(path.join(dir, manifestName(v)), { force: true });
      report.manifests += 1;
    }
  }
  const versions = [...manifests.keys()].sort((a, b) => a - b);
  for (let i = 0; i < versions.length; i += 1) {
    const m = manifests.get(versions[i]!)!;
    const next = i + 1 < versions.length ? manifests.get(versions[i + 1]!)! : null;
    const names = Object.values(m.sets).flatMap((l) => (l ?? []).map((e) => e.path));
    for (const n of names) everNamed.add(n);
    const supersededAt = next ? Date.parse(next.published_at) : Infinity;
    if (m.version !== cur.version && now - supersededAt > graceMs) expired.push(m.version);
    else for (const n of names) live.add(n);
  }
  for (const n of Object.values(cur.manifest.sets).flatMap((l) => (l ?? []).map((e) => e.path))) live.add(n);
  for (const rel of dataFilesOnDisk(lakeDir)) {
    if (live.has(rel)) continue;
    const full = path.join(lakeDir, rel);
    report.bytes += fs.statSync(full, { throwIfNoEntry: false })?.size ?? 0;
    fs.rmSync(full, { force: true });
    if (everNamed.has(rel)) report.retired += 1;
    else report.orphans += 1;
  }
  for (const v of expired) {
    fs.rmSync(path.join(dir, manifestName(v)), { force: true });
    report.manifests += 1;
  }
  for (const n of fs.readdirSync(dir)) if (n.startsWith(`${CURRENT}.tmp-`)) fs.rmSync(path.join(dir, n), { force: true });
  removeEmptyPartitionDirs(lakeDir);
  return report;
}

/** Every `.parquet` file under the sets' directories, relative to the lake (`_ingest/`, `_versions/` are not data). */
function dataFilesOnDisk(lakeDir: string): string[] {
  const out: string[] = [];
  const seen = new Set<string>();
  const walk = (rel: string): void => {
    let ents: fs.Dirent[];
    try {
      ents = fs.readdirSync(path.join(lakeDir, rel), { withFileTypes: true });
    } catch {
      return;
    }
    for (const e of ents) {
      const r = `${rel}/${e.name}`;
      if (e.isDirectory()) walk(r);
      else if (e.name.endsWith('.parquet') && !seen.has(r)) {
        seen.add(r);
        out.push(r);
      }
    }
  };
  for (const r of new Set(SET_NAMES.map((n) => setDir(n).split('/')[0]!))) walk(r);
  return out;
}

function removeEmptyPartitionDirs(lakeDir: string): void {
  for (const name of SET_NAMES.filter((n) => setPartition(n) !== 'none')) {
    const root = path.join(lakeDir, setDir(name));
    let parts: string[] = [];
    try {
      parts = fs.readdirSync(root);
    } catch {
      continue;
    }
    for (const p of parts) {
      const d = path.join(root, p);
      try {
        if (fs.readdirSync(d).length === 0) fs.rmdirSync(d);
      } catch {
        // not a directory, or not empty after all
      }
    }
  }
}
