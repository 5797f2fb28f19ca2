import fs from 'node:fs';
import path from 'node:path';
import { CURRENT, SET_NAMES, currentVersion, manifestName, parseManifestName, setDir, setPartition, versionsDir, type Manifest } from '../src/lake/versions.js';
import { appendHistory, HISTORY } from './versions.js';

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
  if (logged === current.version) return;
  // A torn last line (a kill mid-append) is closed first, or the new line would be glued to it.
  if (text !== '' && !text.endsWith('\n')) fs.appendFileSync(path.join(versionsDir(lakeDir), HISTORY), '\n');
  appendHistory(lakeDir, current);
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
  const numbered = fs
    .readdirSync(dir)
    .flatMap((n) => {
      const v = parseManifestName(n);
      return v === null ? [] : [v];
    })
    .sort((a, b) => a - b);
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
export function dataFilesOnDisk(lakeDir: string): string[] {
  const out: string[] = [];
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
      else if (e.name.endsWith('.parquet')) out.push(r);
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
