import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { DuckDBInstance } from '@duckdb/node-api';
import { generate } from '../../sim/generate/index.js';
import { adoptLegacyLake } from '../../ingest/adopt.js';
import type { CompactReport } from '../../ingest/compact.js';
import { dataFilesOnDisk } from '../../ingest/sweep.js';
import { currentVersion, readCurrentManifest, versionsDir, type Manifest } from '../../src/lake/versions.js';
import type { BenchLake } from '../lake.js';
import { dirBytes } from '../lake.js';
import { NotAvailable, sideBySide, summarize, type BenchContext, type Sample, type Scenario, type ScenarioRow } from '../runner.js';
import { REPO, runToExit } from '../server.js';
import { atMost, median } from '../stats.js';
import { fileList } from './common.js';

/**
 * ingest-append: one small day of new tape — 3 markets, ≈12k level updates, ≈1.2k
 * trades, ≈2.2 MB of source, generated with a seed of its own and dated the day after the bench lake's last
 * day (inside the lake's last month, so its trades land in the lake's biggest month partition) — appended with
 * `pmlake ingest` (a child process, automatic compaction off) to a hard-link clone of the bench lake, a fresh
 * clone per round. Targets: ≤5 s, and bytes written ≤10× the batch's own Parquet size (the same day ingested
 * alone into an empty lake, which is also the baseline column).
 *
 * The first ingest into a lake written before versions adopts it (reads every file's footer for its row
 * count): timed on its own, in-process, before the append. After the rounds, `pmlake compact` folds the last
 * clone's append into its partitions: its throughput is the third row.
 *
 * The clone: every file hard-linked (files are immutable: batches and compactions write new names), except
 * `_ingest/` (the ledger is appended in place) and `_versions/` (history.jsonl is), which are copied. The bench
 * lake itself is fingerprinted (inode, size, mtime of every file) before and after: a change is an error.
 *
 * `pmlake bench --appended N` uses the same pieces (prepareAppendedLake) to run query scenarios on a lake that
 * had N such appends and no compaction, and, with --then-compact, again after `pmlake compact`.
 */

const MARKETS = 3;
const MARKER = '.bench-marker.json';

// ---------------------------------------------------------------------------------------------------------
// Clones.

/** Hard-link clone of a lake at `dst` (which must not exist, on the lake's file system); returns seconds. */
export function cloneLake(src: string, dst: string): number {
  const t0 = performance.now();
  if (fs.existsSync(dst)) throw new Error(`clone target ${dst} exists`);
  fs.mkdirSync(path.dirname(dst), { recursive: true });
  if (fs.statSync(src).dev !== fs.statSync(path.dirname(dst)).dev) {
    throw new NotAvailable(`work dir ${path.dirname(dst)} is on another file system than the lake ${src}: no hard-link clone (set TMPDIR)`);
  }
  execFileSync('cp', ['-al', src, dst]);
  // Appended in place: real copies, so the clone's appends never reach the source's files.
  for (const d of ['_ingest', '_versions']) {
    const t = path.join(dst, d);
    if (!fs.existsSync(t)) continue;
    fs.rmSync(t, { recursive: true, force: true });
    execFileSync('cp', ['-a', path.join(src, d), t]);
  }
  // The bench's own marker: the clone is no bench lake (ensureLake never rebuilds it).
  fs.rmSync(path.join(dst, MARKER), { force: true });
  return (performance.now() - t0) / 1000;
}

/** inode, size and mtime of every file and directory under `dir`: compared before and after to prove a lake untouched. */
export function fingerprint(dir: string): Map<string, string> {
  const out = new Map<string, string>();
  const walk = (rel: string): void => {
    for (const e of fs.readdirSync(path.join(dir, rel), { withFileTypes: true })) {
      const r = rel ? `${rel}/${e.name}` : e.name;
      const st = fs.lstatSync(path.join(dir, r));
      out.set(r, `${st.ino}:${st.size}:${e.isDirectory() ? '' : st.mtimeMs}`);
      if (e.isDirectory()) walk(r);
    }
  };
  walk('');
  return out;
}

export function fingerprintChanges(before: Map<string, string>, after: Map<string, string>): string[] {
  const changes: string[] = [];
  for (const [k, v] of before) if (after.get(k) !== v) changes.push(after.has(k) ? `changed ${k}` : `removed ${k}`);
  for (const k of after.keys()) if (!before.has(k)) changes.push(`added ${k}`);
  return changes;
}

/** Parquet files under a lake's data directories (not `_ingest/`, `_versions/`), relative path → bytes. */
function parquetFiles(lakeDir: string): Map<string, number> {
  return new Map(dataFilesOnDisk(lakeDir).map((r) => [r, fs.statSync(path.join(lakeDir, r)).size]));
}

// ---------------------------------------------------------------------------------------------------------
// The day.

function shiftDate(date: string, days: number): string {
  return new Date(Date.parse(`${date}T00:00:00Z`) + days * 86_400_000).toISOString().slice(0, 10);
}

/** The lake's last day of tape: its last L2 date partition, or the day of its last trade. */
export function lastTapeDay(lakeDir: string, tradesTo: string): string {
  const l2 = currentVersion(lakeDir).partitionValues('l2').at(-1) ?? '';
  const t = tradesTo.slice(0, 10);
  return l2 > t ? l2 : t;
}

/** The day after the lake's last day, or that last day itself when the next one starts a new month. */
export function appendDate(lakeDir: string, tradesTo: string): string {
  const last = lastTapeDay(lakeDir, tradesTo);
  if (!/^\d{4}-\d{2}-\d{2}$/.test(last)) throw new NotAvailable('the bench lake has no tape');
  const next = shiftDate(last, 1);
  return next.slice(0, 7) === last.slice(0, 7) ? next : last;
}

export type SmallDay = {
  date: string;
  seed: number;
  dir: string;
  /** What `pmlake ingest` is given: the generator's source directories. */
  inputs: string[];
  levelUpdates: number;
  trades: number;
  wsMessages: number;
  sourceBytes: number;
};

/** Market and event ids the lake's catalogue already holds. */
async function catalogueIds(lakeDir: string): Promise<{ markets: Set<string>; events: Set<string> }> {
  const files = currentVersion(lakeDir).files('markets');
  const ids = { markets: new Set<string>(), events: new Set<string>() };
  if (files.length === 0) return ids;
  const db = await DuckDBInstance.create(':memory:', { threads: '1' });
  try {
    const conn = await db.connect();
    const rows = (await conn.runAndReadAll(`SELECT id, event_id FROM read_parquet(${fileList(files)})`)).getRowObjectsJS();
    conn.closeSync();
    for (const r of rows) {
      if (r.id !== null) ids.markets.add(String(r.id));
      if (r.event_id !== null) ids.events.add(String(r.event_id));
    }
  } finally {
    db.closeSync();
  }
  return ids;
}

/**
 * Generates one small day (`MARKETS` markets, the generator's default activity) into `dir`. The generator's
 * market and event ids are small numbers drawn from its seed: a seed whose day would reuse an id the lake's
 * catalogue holds (another market's metadata under the same id) is skipped for the next one, deterministically.
 */
export async function makeSmallDay(lakeDir: string, date: string, seed: number, dir: string): Promise<SmallDay> {
  const taken = await catalogueIds(lakeDir);
  for (let attempt = 0; attempt < 20; attempt++) {
    const s = seed + attempt * 1000;
    fs.rmSync(dir, { recursive: true, force: true });
    const rep = await generate({ markets: MARKETS, days: 1, seed: s, start: date, out: dir, workers: 0 });
    const gamma = JSON.parse(fs.readFileSync(path.join(dir, 'markets', 'gamma_markets.json'), 'utf8')) as { id: string; events?: { id: string }[] }[];
    const clash = gamma.some((m) => taken.markets.has(String(m.id)) || (m.events ?? []).some((e) => taken.events.has(String(e.id))));
    if (clash) continue;
    return {
      date,
      seed: s,
      dir,
      inputs: ['markets', 'fills', 'ws'].map((d) => path.join(dir, d)).filter((d) => fs.existsSync(d)),
      levelUpdates: rep.counts.level_updates,
      trades: rep.counts.trades,
      wsMessages: rep.counts.ws_messages,
      sourceBytes: rep.bytes.total,
    };
  }
  throw new Error(`no seed near ${seed} gives a day whose market ids are new to the lake`);
}

function describeDay(d: SmallDay): string {
  return `${d.date} (seed ${d.seed}): ${MARKETS} markets, ${d.levelUpdates.toLocaleString('en-US')} level updates, ${d.trades.toLocaleString('en-US')} trades, ${d.wsMessages.toLocaleString('en-US')} ws messages, ${(d.sourceBytes / 1e6).toFixed(2)} MB of source`;
}

// ---------------------------------------------------------------------------------------------------------
// pmlake ingest / compact as child processes.

type IngestJson = {
  failed: number;
  ingested: number;
  skipped: number;
  seconds: number;
  rows_added: Record<string, number>;
  phase_seconds: Record<string, number>;
  bytes_written: number;
  versions_published: number[];
  version: number;
  issues_total?: number;
};

/** What `pmlake compact` prints (ingest/lake-cli.ts). */
export type CompactJson = CompactReport & { mb_per_second: number; rows_per_second: number };

function childEnv(lakeDir: string): NodeJS.ProcessEnv {
  // Automatic compaction off: the append alone is measured (compaction is its own step and row).
  return { ...process.env, PMLAKE_LAKE: lakeDir, PMLAKE_COMPACT_SMALL_FILES: '0', PMLAKE_DUCKDB_THREADS: '2', LOG_LEVEL: process.env.LOG_LEVEL ?? 'warn' };
}

export async function pmlakeIngest(lakeDir: string, inputs: string[], logFile: string): Promise<{ report: IngestJson; wall: number; peakRss: number }> {
  const r = await runToExit(path.join(REPO, 'src/cli.ts'), ['ingest', ...inputs], childEnv(lakeDir), logFile);
  const report = JSON.parse(r.stdout) as IngestJson;
  if (report.failed > 0) throw new Error(`pmlake ingest failed on ${report.failed} input(s); log ${logFile}`);
  return { report, wall: r.seconds, peakRss: r.peakRss };
}

export async function pmlakeCompact(lakeDir: string, logFile: string): Promise<{ report: CompactJson; wall: number; peakRss: number }> {
  const r = await runToExit(path.join(REPO, 'src/cli.ts'), ['compact'], childEnv(lakeDir), logFile);
  return { report: JSON.parse(r.stdout) as CompactJson, wall: r.seconds, peakRss: r.peakRss };
}

/** Adopts a lake written before versions (what its first ingest would do first), in-process; seconds and files, or null if versioned. */
async function adopt(lakeDir: string): Promise<{ seconds: number; files: number } | null> {
  if (currentVersion(lakeDir).version !== 0) return null;
  const db = await DuckDBInstance.create(':memory:', { threads: '2' });
  try {
    const conn = await db.connect();
    const t0 = performance.now();
    const m = await adoptLegacyLake(conn, lakeDir);
    const seconds = (performance.now() - t0) / 1000;
    conn.closeSync();
    const files = m ? Object.values(m.sets).reduce((s, l) => s + (l?.length ?? 0), 0) : 0;
    return { seconds, files };
  } finally {
    db.closeSync();
  }
}

/** What a version added against an earlier manifest, per set: files, bytes. */
function addedBySet(before: Manifest | null, after: Manifest | null): Record<string, { files: number; bytes: number }> {
  const had = new Set(Object.values(before?.sets ?? {}).flatMap((l) => (l ?? []).map((e) => e.path)));
  const out: Record<string, { files: number; bytes: number }> = {};
  for (const [name, list] of Object.entries(after?.sets ?? {})) {
    for (const e of list ?? []) {
      if (had.has(e.path)) continue;
      const o = (out[name] ??= { files: 0, bytes: 0 });
      o.files += 1;
      o.bytes += e.bytes;
    }
  }
  return out;
}

function kb(n: number): string {
  return n >= 1e6 ? `${(n / 1e6).toFixed(2)} MB` : `${(n / 1e3).toFixed(0)} kB`;
}

function phases(p: Record<string, number>): string {
  return Object.entries(p)
    .sort((a, b) => b[1] - a[1])
    .map(([k, v]) => `${k} ${v.toFixed(2)}`)
    .join(', ');
}

/** The most files any partition of any data set holds in the lake's current version, e.g. "21 files (trades 2025-10)". */
function mostFragmented(lakeDir: string): string {
  const v = currentVersion(lakeDir);
  let best = { n: 0, where: '' };
  for (const [name, list] of Object.entries(v.manifest.sets)) {
    const per = new Map<string, number>();
    for (const e of list ?? []) if (e.partition !== null) per.set(e.partition, (per.get(e.partition) ?? 0) + 1);
    for (const [p, n] of per) if (n > best.n) best = { n, where: `${name} ${p}` };
  }
  return best.n ? `${best.n} file${best.n === 1 ? '' : 's'} (${best.where})` : 'no partition';
}

export function compactRow(scenario: string, c: { report: CompactJson; wall: number; peakRss: number }, what: string): ScenarioRow {
  const r = c.report;
  return {
    scenario,
    status: 'ok',
    pmlakeDoes: `pmlake compact ${what}`,
    rows: r.rows,
    pmlake: {
      seconds: r.seconds,
      samples: [r.seconds],
      rows: r.rows,
      bytes: r.bytes_in,
      mbPerSec: r.mb_per_second,
      peakRss: c.peakRss,
      extra: { rows_per_s: r.rows_per_second, files_in: r.files_in, files_out: r.files_out, partitions: r.partitions, bytes_out: r.bytes_out, wall_s: c.wall },
    },
    targets: [],
    notes: [
      `${r.partitions} partitions, ${r.files_in} files → ${r.files_out}, ${kb(r.bytes_in)} in → ${kb(r.bytes_out)} out, ${r.rows.toLocaleString('en-US')} rows in ${r.seconds.toFixed(2)} s: ${r.mb_per_second} MB/s, ${r.rows_per_second.toLocaleString('en-US')} rows/s (process wall ${c.wall.toFixed(1)} s)`,
    ],
  };
}

// ---------------------------------------------------------------------------------------------------------
// The scenario.

export function ingestAppend(maxReps: number): Scenario {
  return {
    name: 'ingest-append',
    async run(ctx: BenchContext): Promise<ScenarioRow[]> {
      const lakeDir = ctx.lake.lakeDir;
      const work = path.join(ctx.workDir, 'ingest-append');
      const logFile = path.join(ctx.workDir, 'ingest-append.log');
      fs.mkdirSync(work, { recursive: true });
      const before = fingerprint(lakeDir);
      const date = appendDate(lakeDir, ctx.lake.facts.tradesTo);
      const day = await makeSmallDay(lakeDir, date, ctx.lake.gen.seed + 1, path.join(work, 'day'));
      ctx.log(`  the day: ${describeDay(day)}`);
      const reps = Math.max(1, Math.min(ctx.reps, maxReps));

      type AppendRun = {
        wall: number;
        report: IngestJson;
        newBytes: number;
        newFiles: number;
        manifestBytes: number;
        added: Record<string, { files: number; bytes: number }>;
        adopt: { seconds: number; files: number } | null;
        cloneSeconds: number;
      };
      const runs: AppendRun[] = [];
      // Filled in by the rounds (closures): the batch alone, and the clone kept for compaction.
      const own = { bytes: Number.NaN, dataBytes: Number.NaN, seconds: Number.NaN };
      const keep: { clone: string | null } = { clone: null };

      const pmlake = async (rep: number): Promise<Sample> => {
        const clone = path.join(work, `clone-${rep + 1}`);
        if (keep.clone) fs.rmSync(keep.clone, { recursive: true, force: true });
        keep.clone = clone;
        const cloneSeconds = cloneLake(lakeDir, clone);
        const adopted = await adopt(clone);
        const filesBefore = parquetFiles(clone);
        const manifestBefore = readCurrentManifest(clone);
        const versionsBefore = dirBytes(versionsDir(clone));
        const r = await pmlakeIngest(clone, day.inputs, logFile);
        const filesAfter = parquetFiles(clone);
        let newBytes = 0;
        let newFiles = 0;
        for (const [f, b] of filesAfter) {
          if (filesBefore.has(f)) continue;
          newBytes += b;
          newFiles += 1;
        }
        runs.push({
          wall: r.wall,
          report: r.report,
          newBytes,
          newFiles,
          manifestBytes: dirBytes(versionsDir(clone)) - versionsBefore,
          added: addedBySet(manifestBefore, readCurrentManifest(clone)),
          adopt: adopted,
          cloneSeconds,
        });
        const rows = Object.values(r.report.rows_added).reduce((s, n) => s + n, 0);
        // Bytes as extras, not `bytes`: an MB/s of an append says nothing.
        return {
          seconds: r.wall,
          rows,
          peakRss: r.peakRss,
          extra: { report_s: r.report.seconds, bytes_written: r.report.bytes_written, new_file_bytes: newBytes },
        };
      };
      const baseline = async (rep: number): Promise<Sample> => {
        const empty = path.join(work, `empty-${rep + 1}`);
        fs.rmSync(empty, { recursive: true, force: true });
        try {
          const r = await pmlakeIngest(empty, day.inputs, logFile);
          const files = parquetFiles(empty);
          own.bytes = [...files.values()].reduce((s, b) => s + b, 0);
          own.dataBytes = [...files].filter(([f]) => !f.startsWith('catalog/')).reduce((s, [, b]) => s + b, 0);
          own.seconds = r.report.seconds;
          const rows = Object.values(r.report.rows_added).reduce((s, n) => s + n, 0);
          return { seconds: r.wall, rows, peakRss: r.peakRss, extra: { report_s: r.report.seconds, parquet_bytes: own.bytes } };
        } finally {
          fs.rmSync(empty, { recursive: true, force: true });
        }
      };

      const rows: ScenarioRow[] = [];
      try {
        // Each round is a whole ingest (and a fresh clone): no warm-up round.
        const r = await sideBySide(reps, pmlake, baseline, { warmup: false });
        const written = runs.map((x) => x.report.bytes_written);
        const bytesWritten = median(written);
        const ratio = bytesWritten / own.bytes;
        const mid = [...runs].sort((a, b) => a.wall - b.wall)[Math.floor(runs.length / 2)]!;
        const inProcess = median(runs.map((x) => x.report.seconds));
        const added = Object.entries(mid.added)
          .sort((a, b) => b[1].bytes - a[1].bytes)
          .map(([n, a]) => `${n} ${a.files}×${kb(a.bytes)}`)
          .join(', ');
        const catalogueBytes = Object.entries(mid.added)
          .filter(([n]) => ['markets', 'tokens', 'series', 'market_records', 'series_records'].includes(n))
          .reduce((s, [, a]) => s + a.bytes, 0);
        rows.push({
          scenario: 'ingest-append',
          status: 'ok',
          pmlakeDoes: `pmlake ingest of one small day (${MARKETS} markets) appended to a hard-link clone of the bench lake (version ${currentVersion(lakeDir).version}${currentVersion(lakeDir).version === 0 ? ', adopted first' : ''}), automatic compaction off`,
          baselineDoes: "pmlake ingest of the same day into an empty lake (the batch's own Parquet size)",
          rows: r.pmlake.rows,
          pmlake: { ...r.pmlake, extra: { ...r.pmlake.extra, bytes_ratio: ratio, new_files: mid.newFiles, manifest_bytes: mid.manifestBytes } },
          baseline: r.baseline,
          ratio: r.ratio,
          targets: [atMost('≤5 s (pmlake ingest process, wall)', r.pmlake.seconds, 5), atMost("bytes written ≤10× the batch's own Parquet", ratio, 10)],
          notes: [
            `the day: ${describeDay(day)}`,
            `append: ${r.pmlake.seconds.toFixed(2)} s wall (process start included), ${inProcess.toFixed(2)} s inside runIngest; rounds ${runs.map((x) => x.wall.toFixed(2)).join(', ')} s`,
            `phases (median round): ${phases(mid.report.phase_seconds)}`,
            `bytes_written ${kb(bytesWritten)} (new Parquet on disk ${kb(mid.newBytes)} in ${mid.newFiles} files; manifests +${kb(mid.manifestBytes)}) vs the batch alone ${kb(own.bytes)} (${kb(own.dataBytes)} without its catalogue): ${ratio.toFixed(1)}×; without the catalogue on both sides ${((bytesWritten - catalogueBytes) / own.dataBytes).toFixed(1)}×`,
            `added: ${added}`,
            `the batch into an empty lake: ${r.baseline.seconds.toFixed(2)} s wall, ${own.seconds.toFixed(2)} s inside runIngest`,
            `clone ${median(runs.map((x) => x.cloneSeconds)).toFixed(2)} s (hard links; _ingest/ and _versions/ copied)`,
          ],
        });
        const adoptions = runs.flatMap((x) => (x.adopt ? [x.adopt] : []));
        if (adoptions.length > 0) {
          const secs = adoptions.map((a) => a.seconds);
          rows.push({
            scenario: 'ingest-append (adopt v0)',
            status: 'ok',
            pmlakeDoes:
              'adoptLegacyLake: a lake written before versions becomes version 1 (footers read for row counts, nothing copied), what its first ingest does first',
            rows: adoptions[0]!.files,
            pmlake: summarize(secs.map((s) => ({ seconds: s }))),
            targets: [],
            notes: [`${adoptions[0]!.files} files adopted; rounds ${secs.map((s) => s.toFixed(2)).join(', ')} s; not part of the append's time`],
          });
        }
        // Compaction throughput: the last clone's append folded into its partitions.
        if (keep.clone) {
          ctx.log('  pmlake compact on the last clone');
          const c = await pmlakeCompact(keep.clone, logFile);
          rows.push(compactRow('ingest-append (compact)', c, 'of the clone after the append: every partition with 2+ files merged'));
        }
      } finally {
        if (keep.clone) fs.rmSync(keep.clone, { recursive: true, force: true });
        fs.rmSync(work, { recursive: true, force: true });
      }
      const changes = fingerprintChanges(before, fingerprint(lakeDir));
      if (changes.length > 0) throw new Error(`the bench lake changed during ingest-append: ${changes.slice(0, 5).join('; ')}`);
      rows[0]!.notes!.push(`the bench lake itself is unchanged (${before.size} entries: inode, size, mtime)`);
      return rows;
    },
  };
}

// ---------------------------------------------------------------------------------------------------------
// --appended N: a clone with N appended small days, no compaction.

export type AppendedLake = { lakeDir: string; rows: ScenarioRow[]; dates: string[] };

/**
 * A hard-link clone of the bench lake at `dir` with `n` small days appended by `n` separate `pmlake ingest` runs
 * (automatic compaction off): the days run back from the append day (the day after the lake's last day), one a
 * day, so the lake's last month partitions hold n+1 files each and its last days two. Each day has its own seed
 * (other markets than ingest-append's). The clone is adopted first (in-process, timed apart).
 */
export async function prepareAppendedLake(opts: { lake: BenchLake; n: number; dir: string; workDir: string; log: (m: string) => void }): Promise<AppendedLake> {
  const { lake, n, dir, log } = opts;
  const logFile = path.join(opts.workDir, 'appended.log');
  fs.rmSync(dir, { recursive: true, force: true });
  const before = fingerprint(lake.lakeDir);
  const cloneSeconds = cloneLake(lake.lakeDir, dir);
  const adopted = await adopt(dir);
  const first = currentVersion(lake.lakeDir).partitionValues('l2')[0] ?? lake.facts.tradesFrom.slice(0, 10);
  const start = appendDate(dir, lake.facts.tradesTo);
  const span = Math.max(1, Math.round((Date.parse(`${start}T00:00:00Z`) - Date.parse(`${first}T00:00:00Z`)) / 86_400_000) + 1);
  const samples: Sample[] = [];
  const dates: string[] = [];
  const phaseTotals: Record<string, number[]> = {};
  let levelUpdates = 0;
  let trades = 0;
  for (let k = 0; k < n; k++) {
    const date = shiftDate(start, -(k % span));
    const day = await makeSmallDay(dir, date, lake.gen.seed + 100 + k, path.join(opts.workDir, 'appended-day'));
    const r = await pmlakeIngest(dir, day.inputs, logFile);
    fs.rmSync(day.dir, { recursive: true, force: true });
    const rows = Object.values(r.report.rows_added).reduce((s, x) => s + x, 0);
    samples.push({ seconds: r.wall, rows, peakRss: r.peakRss, extra: { report_s: r.report.seconds, bytes_written: r.report.bytes_written } });
    for (const [p, s] of Object.entries(r.report.phase_seconds)) (phaseTotals[p] ??= []).push(s);
    dates.push(date);
    levelUpdates += day.levelUpdates;
    trades += day.trades;
    log(`  append ${k + 1}/${n}: ${date} seed ${day.seed}, ${r.wall.toFixed(1)} s, ${kb(r.report.bytes_written)} written, version ${r.report.version}`);
  }
  const changes = fingerprintChanges(before, fingerprint(lake.lakeDir));
  if (changes.length > 0) throw new Error(`the bench lake changed while preparing the appended clone: ${changes.slice(0, 5).join('; ')}`);
  const s = summarize(samples);
  const medPhases = Object.fromEntries(Object.entries(phaseTotals).map(([p, xs]) => [p, median(xs)]));
  const row: ScenarioRow = {
    scenario: `append x${n}`,
    status: 'ok',
    pmlakeDoes: `${n} small days (${MARKETS} markets each) appended by ${n} pmlake ingest runs to a hard-link clone of the bench lake, no compaction`,
    rows: samples.reduce((t, x) => t + (x.rows ?? 0), 0),
    pmlake: { ...s, extra: { ...s.extra, max_s: Math.max(...samples.map((x) => x.seconds)) } },
    targets: [atMost('≤5 s per append (median, process wall)', s.seconds, 5)],
    notes: [
      `days ${dates.at(-1)} … ${dates[0]}, ${levelUpdates.toLocaleString('en-US')} level updates and ${trades.toLocaleString('en-US')} trades in all; per append ${samples.map((x) => x.seconds.toFixed(1)).join(', ')} s`,
      `median phases: ${phases(medPhases)}`,
      `most files in one partition after the appends: ${mostFragmented(dir)}; lake version ${currentVersion(dir).version}`,
      `clone ${cloneSeconds.toFixed(2)} s${adopted ? `, adoption ${adopted.seconds.toFixed(2)} s (${adopted.files} files)` : ''}`,
    ],
  };
  return { lakeDir: dir, rows: [row], dates };
}

/** `pmlake compact` of the appended clone: the compaction row. */
export async function compactAppendedLake(lakeDir: string, n: number, workDir: string): Promise<ScenarioRow> {
  const before = mostFragmented(lakeDir);
  const c = await pmlakeCompact(lakeDir, path.join(workDir, 'appended.log'));
  const row = compactRow(`compact after ${n} appends`, c, `after ${n} appends (every partition with 2+ files merged)`);
  row.notes!.push(`before: most files in one partition ${before}; after: ${mostFragmented(lakeDir)}`);
  return row;
}
