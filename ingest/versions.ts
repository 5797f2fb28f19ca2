import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import {
  CURRENT,
  LakeVersion,
  currentVersion,
  manifestName,
  parseManifestName,
  setDir,
  setPartition,
  versionsDir,
  type FileEntry,
  type LandedSource,
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
  private landed: Partial<Record<LandedSource, number>> = {};

  constructor(readonly lakeDir: string) {
    this.base = currentVersion(lakeDir);
    this.version = nextVersionNumber(lakeDir, this.base.version);
    for (const [name, entries] of Object.entries(this.base.manifest.sets)) this.sets.set(name as SetName, [...(entries ?? [])]);
  }

  entries(name: SetName): readonly FileEntry[] {
    return this.sets.get(name) ?? [];
  }

  files(name: SetName): string[] {
    return this.entries(name).map((e) => path.join(this.lakeDir, e.path));
  }

  partitionFiles(name: SetName, values: readonly string[]): string[] {
    const want = new Set(values);
    return this.entries(name)
      .filter((e) => e.partition !== null && want.has(e.partition))
      .map((e) => path.join(this.lakeDir, e.path));
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

  /** Adds a written file (absolute path from `newFile`) with its row count; returns its entry. */
  add(name: SetName, partition: string | null, absPath: string, rows: number): FileEntry {
    const entry: FileEntry = { path: this.rel(absPath), partition, rows, bytes: fs.statSync(absPath).size };
    const list = this.sets.get(name) ?? [];
    list.push(entry);
    list.sort((a, b) => (a.partition ?? '').localeCompare(b.partition ?? '') || a.path.localeCompare(b.path));
    this.sets.set(name, list);
    this.added.push(entry);
    this.addedBy.set(name, [...(this.addedBy.get(name) ?? []), entry]);
    return entry;
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
    this.retire(
      name,
      this.entries(name).map((e) => e.path),
    );
    this.add(name, null, absPath, rows);
  }

  /** Row counts of adopted files (an unversioned lake's manifest does not know them). */
  setRows(name: SetName, relPath: string, rows: number): void {
    const e = this.sets.get(name)?.find((x) => x.path === relPath);
    if (e) e.rows = rows;
  }

  /** Records that this draft lands a source's data up to `ms` (the manifest keeps the newest seen so far). */
  noteLanded(source: LandedSource, ms: number): void {
    this.landed[source] = Math.max(this.landed[source] ?? -Infinity, ms);
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
    const landedTo = { ...this.base.manifest.landed_to };
    for (const [source, ms] of Object.entries(this.landed) as [LandedSource, number][]) {
      const before = landedTo[source] === undefined ? -Infinity : Date.parse(landedTo[source]);
      if (ms > before) landedTo[source] = new Date(ms).toISOString();
    }
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
      ...(Object.keys(landedTo).length > 0 ? { landed_to: landedTo } : {}),
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
export function appendHistory(lakeDir: string, manifest: Manifest): void {
  const { sets: _sets, ...head } = manifest;
  fs.appendFileSync(
    path.join(versionsDir(lakeDir), HISTORY),
    `${JSON.stringify({ ...head, change: { ...head.change, inputs: head.change.inputs.length } })}\n`,
  );
}

export function fsyncDir(dir: string): void {
  const fd = fs.openSync(dir, 'r');
  try {
    fs.fsyncSync(fd);
  } finally {
    fs.closeSync(fd);
  }
}
