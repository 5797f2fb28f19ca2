import fs from 'node:fs';
import path from 'node:path';
import type { DuckDBConnection } from '@duckdb/node-api';
import { sqlIdent } from '../src/lake/duckdb.js';
import { DATASETS, columnDdl, type DatasetDef, type DatasetName } from '../src/lake/layout.js';
import { createLogger, type Logger } from '../src/log.js';
import { deriveBooks } from './books.js';
import { expandInputs, gunzipTo, isGzip, pickHandler, readHead } from './detect.js';
import { acquireLakeLock, appendLedger, FileHasher, readLedger, type LedgerEntry } from './ledger.js';
import { mergeIntoPartitions, sweepTempFiles } from './partitions.js';
import { stageRawIndex } from './raw-index.js';
import type { IngestIssue, SourceHandler, SourceKind } from './types.js';
import type { TapeBatchContext } from './ws/common.js';
import { wsHandlers } from './ws/index.js';
import { archiveHandler } from './archive/index.js';
import { cataloguePollHandler } from './catalogue/polls.js';
import { chainFilesHandler } from './chain/files.js';
import { metadataHandler } from './metadata.js';
import { fillsHandler } from './fills.js';
import { optionsHandler } from './options.js';
import { deriveCandles } from './candles.js';
import { finalizeCatalog } from './catalog.js';
import { makeScratchDir, openScratchDb, scratchConnection, sweepScratch } from './scratch.js';
import { duckdbMemorySetting, planIngestMemory, releaseEmptyStaging, stagedTableBytes } from './memory.js';
import { VersionDraft } from './versions.js';
import { sweepLake, type SweepReport } from './sweep.js';
import { adoptLegacyLake } from './adopt.js';
import { compactLake, type CompactReport } from './compact.js';
import { currentVersion, type LandedSource } from '../src/lake/versions.js';
import type { IngestProgress } from './progress.js';

/**
 * The ingest orchestrator. One run: sweep temp files a killed run left, lock the lake, open the scratch
 * DuckDB (in memory, spilling to the scratch directory), hash every input and skip what the ledger already holds,
 * detect each file's format, stage it, and flush in bounded batches: derive books and candles (while a second
 * connection merges the data sets nothing derived touches), merge every data set into the batch's draft version,
 * rebuild the catalogue, publish the draft, then record the batch's files in the ledger.
 */

export type IngestOptions = {
  lakeDir: string;
  snapshotSeconds?: number;
  log?: Logger;
  threads?: number;
  /** DuckDB's memory_limit at most (PMLAKE_DUCKDB_MEMORY); the budget's share of DuckDB when lower. */
  memoryLimit?: string;
  /** Bytes the process may hold resident whatever the batch (PMLAKE_INGEST_MEMORY; default 4 GiB; ingest/memory.ts). */
  memoryBudget?: number;
  /** Trades per candles chunk (default: one per KiB of DuckDB's memory limit; ingest/candles.ts). */
  candleChunkRows?: number;
  /** Flush a batch once this many rows are staged (bounds temp disk), or sooner when they outgrow the memory budget. */
  batchRows?: number;
  /** Progress lines on stderr every few seconds (the CLI turns this on). */
  progress?: boolean;
  /** Replace the format handlers (tests). */
  handlers?: SourceHandler[];
  /** Derive candles and rebuild the catalogue after each batch (default true; off only in isolated tests). */
  derived?: boolean;
  /** Retired files older than this are deleted (src/config.ts PMLAKE_LAKE_GRACE_SECONDS; default a day). */
  graceSeconds?: number;
  /** Compact partitions with more small files than this after the run; 0 never (default 16). */
  compactSmallFiles?: number;
  /** PostgreSQL whose advisory lock keeps one writer across machines (PMLAKE_DATABASE_URL; ingest/ledger.ts). */
  databaseUrl?: string;
  /**
   * Sweep retired and orphaned lake files at the start (default true). The follow loop sweeps on its own
   * schedule: the sweep reads every kept manifest, and a lake published every cycle keeps a day of them.
   */
  sweep?: boolean;
  /**
   * Replaces the automatic compaction after the run (the follow loop's bounded policy, ingest/follow-compact.ts):
   * called under the lake lock with the run's scratch connection; returns what it published, or null.
   */
  compact?: (conn: DuckDBConnection) => Promise<CompactReport | null>;
  /** A hashing thread kept by the caller across runs (the follow loop: starting one costs more than a small batch's hashing). */
  hasher?: FileHasher;
  /** Told each input's outcome: `landed` once it is in the ledger, `skipped` (the ledger had it), `failed`. */
  onFile?: (file: string, outcome: 'landed' | 'skipped' | 'failed') => void;
  /** Told the run's figures when the inputs are known, a phase begins, an input is done, a batch is published, and at the end (ingest/progress.ts renders them). */
  onProgress?: (p: IngestProgress) => void;
  /**
   * Queue workers (ingest/queue/worker.ts): stage without the lake lock and take it (this returns its release)
   * only when the first batch is about to be derived and published. Nothing is swept or adopted at the start
   * then (other workers stage meanwhile; the worker sweeps under the lock), and nothing is compacted unless the
   * lock was taken.
   */
  lockWhenPublishing?: () => Promise<() => Promise<void>>;
};

export type IngestReport = {
  files: number;
  ingested: number;
  skipped: number;
  failed: number;
  batches: number;
  rows_added: Record<string, number>;
  issues: IngestIssue[];
  counts: Record<string, number>;
  seconds: number;
  /** Where the time went: stage, books, candles, merge, catalog. */
  phase_seconds: Record<string, number>;
  level_updates_per_second: number;
  /** Lake versions this run published (one per batch, plus adoption and compaction), and the current one after it. */
  versions_published: number[];
  version: number;
  /** Bytes of new Parquet files the run wrote (data and catalogue). */
  bytes_written: number;
  /** What the sweep at the start removed: files of killed runs, files retired longer than the grace period. */
  swept: SweepReport;
  compacted?: CompactReport;
};

export const KIND_ORDER: Record<SourceKind, number> = { metadata: 0, fills: 1, options: 2, ws: 3 };

/** Every format handler, statically imported: a broken handler is a type or load error, never a skipped source. */
// The roles' own files first: their page bodies and decoded logs would also match the metadata and fills detectors.
export const defaultHandlers: readonly SourceHandler[] = [
  cataloguePollHandler,
  chainFilesHandler,
  metadataHandler,
  fillsHandler,
  optionsHandler,
  archiveHandler,
  ...wsHandlers,
];

const STAGED: DatasetName[] = Object.keys(DATASETS) as DatasetName[];
/**
 * Staged as views over other staging tables, not filled: the market index is raw's frames again
 * (ingest/raw-index.ts), and a second copy of a batch's frame text would take its share of the memory budget.
 */
const STAGED_VIEWS: readonly DatasetName[] = ['raw_by_market'];
const STAGED_TABLES = STAGED.filter((d) => !STAGED_VIEWS.includes(d));
/** Partitioned data sets are merged here; the catalogue files are rebuilt by finalizeCatalog. */
const MERGED = STAGED.filter((d) => (DATASETS[d] as DatasetDef).partition !== 'none');
/**
 * Data sets whose staged rows are final once staged: nothing the book replay (ingest/books.ts, and the integrity
 * checks in it) or the candles step writes or updates touches them. They are merged on a second connection while
 * the replay runs on the first (the replay's JavaScript leaves a core idle, the merges' ZSTD and sorting fill it),
 * so their staging tables are plain tables every connection sees, not TEMP ones. l2 is not among them: the
 * replay marks its rows after a detected gap. A data set the derived steps write to must never be listed here.
 */
const REPLAY_FREE: readonly DatasetName[] = ['raw', 'raw_by_market', 'last_trades'];
/**
 * Data sets only the book replay writes (with its integrity checks), final once it returns: merged on the second
 * connection while the first merges l2, the largest, so they too are plain tables. Not the candles' or the
 * options' staging tables: their own modules create them as TEMP tables, which the second connection cannot see.
 */
const REPLAY_OUTPUT: readonly DatasetName[] = ['book_snapshots', 'top_of_book', 'checkpoints', 'incidents', 'coverage'];

async function count(conn: DuckDBConnection, sql: string): Promise<number> {
  return Number((await conn.runAndReadAll(sql)).getRows()[0]?.[0] ?? 0);
}

/** TEMP staging tables and the shared ones (REPLAY_FREE) alike. */
const STAGING_TABLES = `SELECT DISTINCT table_name FROM duckdb_tables() WHERE (temporary OR schema_name = 'main') AND table_name LIKE 'stg\\_%' ESCAPE '\\'`;

/**
 * Where each staging table ends before a file is staged. A file whose handler throws has its rows removed
 * again (rowids only grow within a batch), so a failed file leaves nothing behind. Not a transaction: a
 * handler must be able to recover from a failed statement (e.g. malformed JSON → line-by-line salvage),
 * which an aborted DuckDB transaction would not allow.
 */
async function stagingMarks(conn: DuckDBConnection): Promise<Map<string, number>> {
  const marks = new Map<string, number>();
  const tables = (await conn.runAndReadAll(STAGING_TABLES)).getRows();
  for (const [t] of tables) {
    const name = String(t);
    marks.set(name, await count(conn, `SELECT coalesce(max(rowid), -1) FROM ${sqlIdent(name)}`));
  }
  return marks;
}

/**
 * The capture handler's lists of what the batch holds (ingest/ws/capture-redundancy.ts): they describe staged rows
 * and are emptied with each new batch, but land nothing themselves (a header-only capture file lists its spans).
 */
const BATCH_LISTS: readonly string[] = ['stg_capture_seen', 'stg_capture_spans'];

/** Rows staged for the lake: every staging table, the handlers' own (catalogue records, options) included. */
async function stagedForLake(conn: DuckDBConnection): Promise<number> {
  let n = 0;
  for (const [t] of (await conn.runAndReadAll(STAGING_TABLES)).getRows()) {
    if (!BATCH_LISTS.includes(String(t))) n += await count(conn, `SELECT count(*) FROM ${sqlIdent(String(t))}`);
  }
  return n;
}

async function undoStaging(conn: DuckDBConnection, marks: Map<string, number>): Promise<void> {
  const tables = (await conn.runAndReadAll(STAGING_TABLES)).getRows();
  for (const [t] of tables) {
    const name = String(t);
    await conn.run(`DELETE FROM ${sqlIdent(name)} WHERE rowid > $m`, { m: marks.get(name) ?? -1 });
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

export async function runIngest(paths: string[], opts: IngestOptions): Promise<IngestReport> {
  const t0 = performance.now();
  const lakeDir = path.resolve(opts.lakeDir);
  const log = opts.log ?? createLogger('silent');
  const batchRows = opts.batchRows ?? 20_000_000;
  const memory = planIngestMemory(opts.memoryBudget, opts.memoryLimit);
  fs.mkdirSync(lakeDir, { recursive: true });
  let release = opts.lockWhenPublishing ? undefined : await acquireLakeLock(lakeDir, { databaseUrl: opts.databaseUrl });
  const report: IngestReport = {
    files: 0,
    ingested: 0,
    skipped: 0,
    failed: 0,
    batches: 0,
    rows_added: {},
    issues: [],
    counts: {},
    seconds: 0,
    phase_seconds: {},
    level_updates_per_second: 0,
    versions_published: [],
    version: 0,
    bytes_written: 0,
    swept: { orphans: 0, retired: 0, manifests: 0, bytes: 0 },
  };
  let phaseNow = 'hash';
  let progress: (event: IngestProgress['event']) => void = () => {};
  const timed = async <T>(phase: string, fn: () => Promise<T>): Promise<T> => {
    const t = performance.now();
    phaseNow = phase;
    progress('phase');
    try {
      return await fn();
    } finally {
      const s = (performance.now() - t) / 1000;
      report.phase_seconds[phase] = Math.round(((report.phase_seconds[phase] ?? 0) + s) * 100) / 100;
    }
  };
  let workDir: string | undefined;
  let progressTimer: NodeJS.Timeout | undefined;
  let hasher: FileHasher | undefined;
  try {
    // Only under the lock: another running ingest's temp files are not leftovers.
    const swept = release ? (sweepTempFiles(lakeDir), sweepScratch(lakeDir)) : 0;
    if (swept > 0) log.info({ bytes: swept }, 'removed scratch files a killed ingest left');
    workDir = makeScratchDir(lakeDir, 'run');
    const { files, missing } = expandInputs(paths);
    for (const m of missing) report.issues.push({ file: m, message: 'no such file or directory' });
    report.files = files.length;
    const handlers = opts.handlers ?? defaultHandlers;
    const withDerived = opts.derived !== false;

    // Detect first, then stage by kind (catalogue before fills before tape) so a batch's trades and tape
    // find the metadata that arrived with them. Files are hashed on a worker thread in staging order, each
    // while the files before it are staged; the ledger check happens just before a file would be staged.
    const ledger = readLedger(lakeDir);
    const seen = new Set<string>();
    type Item = { file: string; bytes: number; mtimeMs: number; handler: SourceHandler; gz: boolean; sha256: Promise<string> };
    const items: Item[] = [];
    for (const file of files) {
      const gz = isGzip(file);
      const head = await readHead(file);
      const handler = pickHandler(handlers, file, head);
      if (!handler) {
        report.failed += 1;
        report.issues.push({ file, message: 'format not recognised; file skipped' });
        opts.onFile?.(file, 'failed');
        continue;
      }
      const st = fs.statSync(file);
      items.push({ file, bytes: st.size, mtimeMs: st.mtimeMs, handler, gz, sha256: Promise.resolve('') });
    }
    items.sort((a, b) => KIND_ORDER[a.handler.kind] - KIND_ORDER[b.handler.kind]);
    hasher = opts.hasher ?? new FileHasher();
    for (const item of items) item.sha256 = hasher.hash(item.file);
    const bytes = { total: items.reduce((a, i) => a + i.bytes, 0), done: 0, skipped: 0 };
    let done = 0;
    if (opts.onProgress) {
      const onProgress = opts.onProgress;
      progress = (event) =>
        onProgress({
          event,
          phase: phaseNow,
          inputs: report.files,
          inputs_done: report.files - items.length + done,
          bytes: bytes.total,
          bytes_done: bytes.done,
          bytes_skipped: bytes.skipped,
          level_updates: report.counts.level_updates ?? 0,
          batches: report.batches,
        });
    }
    progress('plan');

    // A file of a size no ledger entry and no earlier input has cannot be either of them: it is staged while
    // its hash is still being computed (then needed only for its ledger entry), so the first file's hash does
    // not hold up the whole run.
    const sizes = new Set<number>();
    let sizesKnown = true;
    for (const e of ledger.values()) {
      if (typeof e.bytes === 'number') sizes.add(e.bytes);
      else sizesKnown = false;
    }
    type Decision = { held: true } | { held: false; known: string | undefined };
    /** Whether the ledger (or an earlier input) holds the item already; a held item is counted as skipped here. */
    const decide = async (item: Item): Promise<Decision> => {
      const mayBeHeld = item.gz || !sizesKnown || sizes.has(item.bytes);
      sizes.add(item.bytes);
      const known = mayBeHeld ? await item.sha256 : undefined;
      if (known === undefined || !(ledger.has(known) || seen.has(known))) return { held: false, known };
      report.skipped += 1;
      done += 1;
      bytes.done += item.bytes;
      bytes.skipped += item.bytes;
      progress('input');
      opts.onFile?.(item.file, 'skipped');
      return { held: true };
    };
    // The inputs the ledger holds already, up to the first it does not: when that is all of them, the run needs no
    // DuckDB (a follow cycle handed only files that landed under other names), unless the lake is to be adopted or
    // compacted by file count after the run (the one-shot policy; the follow's runs only after a publish).
    let next = 0;
    let first: Decision | undefined;
    while (next < items.length) {
      const d = await decide(items[next]!);
      if (!d.held) {
        first = d;
        break;
      }
      next += 1;
    }
    const small = opts.compactSmallFiles ?? 16;
    const base = currentVersion(lakeDir);
    const mustAdopt = base.version === 0 && Object.keys(base.manifest.sets).length > 0;
    const needDb = first !== undefined || (release !== undefined && (mustAdopt || (!opts.compact && small > 0)));
    if (!needDb) {
      if (release && opts.sweep !== false) report.swept = sweepLake(lakeDir, (opts.graceSeconds ?? 86_400) * 1000);
      report.version = base.version;
      phaseNow = 'done';
      progress('end');
    } else {
      const { instance, conn } = await timed('open', () =>
        openScratchDb(lakeDir, workDir!, {
          threads: opts.threads,
          memoryLimit: duckdbMemorySetting(memory.duckdbLimit),
          readDirs: [...new Set(files.map((f) => path.dirname(f)))],
        }),
      );
      let side: DuckDBConnection | undefined;
      try {
        // The second connection: merges of REPLAY_FREE data sets while the first one replays books.
        side = await scratchConnection(instance);
        const sideConn = side;
        const adopted = release ? await adoptLegacyLake(conn, lakeDir) : null;
        if (adopted) report.versions_published.push(adopted.version);
        if (release && opts.sweep !== false) report.swept = sweepLake(lakeDir, (opts.graceSeconds ?? 86_400) * 1000);
        const shared = [...REPLAY_FREE, ...REPLAY_OUTPUT];
        for (const d of STAGED_TABLES) await conn.run(`CREATE ${shared.includes(d) ? '' : 'TEMP '}TABLE IF NOT EXISTS stg_${d} (${columnDdl(d)})`);
        const ctx: TapeBatchContext = {
          conn,
          lakeDir,
          lake: new VersionDraft(lakeDir),
          log,
          snapshotSeconds: opts.snapshotSeconds ?? 60,
          candleChunkRows: opts.candleChunkRows,
          issues: report.issues,
          counts: report.counts,
          landed: {},
          tapeChunkBytes: memory.tapeChunkBytes,
        };
        const stagedRows = async (): Promise<number> => {
          let staged = 0;
          for (const d of STAGED_TABLES) staged += await count(conn, `SELECT count(*) FROM stg_${d}`);
          return staged;
        };
        const batchFull = async (): Promise<boolean> => (await stagedRows()) >= batchRows || (await stagedTableBytes(conn)) >= memory.stagedBytes;
        let marks = new Map<string, number>();
        let pending: LedgerEntry[] = [];
        if (opts.progress) {
          progressTimer = setInterval(() => {
            const s = (performance.now() - t0) / 1000;
            const lu = report.counts.level_updates ?? 0;
            process.stderr.write(
              `pmlake ingest: ${done}/${items.length} files, ${report.batches} batches written, ${lu} level updates staged, ${s.toFixed(1)} s (${phaseNow})\n`,
            );
          }, 3000);
          progressTimer.unref();
        }

        const flush = async (): Promise<void> => {
          if (pending.length === 0 && (await stagedRows()) === 0) return;
          if (!release && opts.lockWhenPublishing) release = await opts.lockWhenPublishing();
          if ((await stagedForLake(conn)) === 0 && Object.keys(ctx.landed).length === 0 && currentVersion(lakeDir).version > 0) {
            // Inputs that staged nothing (a capture file of a silent period: its header lines only) change no data
            // set and no freshness: every derived step would find nothing to do and the draft nothing to publish.
            // They only enter the ledger; the next batch starts afresh as after any other (a draft of its own).
            ctx.lake = new VersionDraft(lakeDir);
            appendLedger(lakeDir, pending);
            for (const e of pending) opts.onFile?.(e.file, 'landed');
            report.ingested += pending.length;
            pending = [];
            return;
          }
          // Everything the batch writes goes into one draft, published whole after the catalogue.
          ctx.lake = new VersionDraft(lakeDir);
          const added: Record<string, number> = {};
          // Before the merges, against this draft: which days' frames the market index takes (ingest/raw-index.ts).
          const index = await stageRawIndex(conn, ctx.lake, ctx.deferRawIndex === true);
          if (index.left > 0) report.counts.raw_index_days_left = (report.counts.raw_index_days_left ?? 0) + index.left;
          const pauseMs = Number(process.env.PMLAKE_TEST_PAUSE_BETWEEN_MERGES_MS ?? 0);
          const merge = async (c: DuckDBConnection, d: DatasetName): Promise<void> => {
            if ((await count(c, `SELECT count(*) FROM stg_${d}`)) === 0) return;
            const r = await timed(`merge_${d}`, () => mergeIntoPartitions(c, ctx.lake, d, `stg_${d}`));
            report.rows_added[d] = (report.rows_added[d] ?? 0) + r.rowsAdded;
            if (r.rowsAdded > 0) added[d] = r.rowsAdded;
            if (pauseMs > 0) {
              // Test hook (kill test): announce each merged data set and leave time to be killed between writes.
              process.stderr.write(`pmlake-test: merged ${d}\n`);
              await sleep(pauseMs);
            }
          };
          // Both paths write into the one draft; nothing is visible before the publish below, so a failure in
          // either leaves only unnamed files (swept by the next run). Both are always waited for: a statement
          // still running on one connection must not outlive the batch.
          const early = MERGED.filter((d) => REPLAY_FREE.includes(d));
          const settled = await Promise.allSettled([
            (async () => {
              for (const d of early) await merge(sideConn, d);
            })(),
            (async () => {
              await timed('books', () => deriveBooks(ctx));
              if (withDerived) await timed('candles', () => deriveCandles(ctx));
            })(),
          ]);
          for (const s of settled) if (s.status === 'rejected') throw s.reason;
          const late = MERGED.filter((d) => !early.includes(d));
          const mainLate = async (): Promise<void> => {
            for (const d of late) if (!REPLAY_OUTPUT.includes(d)) await merge(conn, d);
          };
          const sideLate = async (): Promise<void> => {
            for (const d of late) if (REPLAY_OUTPUT.includes(d)) await merge(sideConn, d);
          };
          if (pauseMs > 0) {
            // The kill tests stop the run at each merge's marker in turn: that needs the same order every run.
            await mainLate();
            await sideLate();
          } else {
            const lateSettled = await Promise.allSettled([mainLate(), sideLate()]);
            for (const s of lateSettled) if (s.status === 'rejected') throw s.reason;
          }
          if (withDerived) await timed('catalog', () => finalizeCatalog(ctx));
          // Freshness (/v1/status): the newest receive time the tape holds, carried by every later version.
          const tapeTo = (await conn.runAndReadAll('SELECT epoch_ms(max(recv_ts)) FROM stg_raw')).getRows()[0]?.[0];
          if (tapeTo !== null && tapeTo !== undefined) ctx.lake.noteLanded('tape', Number(tapeTo));
          for (const [source, ms] of Object.entries(ctx.landed) as [LandedSource, number][]) ctx.lake.noteLanded(source, ms);
          ctx.landed = {};
          if (pauseMs > 0) {
            process.stderr.write(`pmlake-test: publishing\n`);
            await sleep(pauseMs);
          }
          const published = ctx.lake.publish(
            'ingest',
            added,
            pending.map((e) => e.sha256),
          );
          if (published) {
            report.versions_published.push(published.version);
            report.bytes_written += published.change.bytes_added;
          }
          // After the publish: a crash in between re-ingests the files, which adds nothing (natural keys).
          appendLedger(lakeDir, pending);
          for (const e of pending) opts.onFile?.(e.file, 'landed');
          report.ingested += pending.length;
          report.batches += 1;
          progress('batch');
          pending = [];
          for (const d of STAGED_TABLES) await conn.run(`DELETE FROM stg_${d}`);
          for (const d of STAGED_VIEWS) await conn.run(`DROP VIEW IF EXISTS stg_${d}`);
          await releaseEmptyStaging(conn);
        };
        // Between chunks of one big file: write what is staged so far. The file itself enters the ledger only
        // with the batch that holds its last chunk; a crash before that re-stages it whole, which de-duplicates.
        ctx.maybeFlush = async () => {
          if (!(await batchFull())) return;
          await flush();
          marks = await stagingMarks(conn);
        };

        for (let i = next; i < items.length; i += 1) {
          const item = items[i]!;
          const d = i === next && first !== undefined ? first : await decide(item);
          if (d.held) continue;
          const known = d.known;
          const before = report.issues.length;
          let stagePath = item.file;
          if (item.gz) {
            stagePath = path.join(workDir, `${(known ?? '').slice(0, 16)}-${path.basename(item.file).replace(/\.gz$/i, '')}`);
            await gunzipTo(item.file, stagePath);
          }
          let ok = true;
          marks = await stagingMarks(conn);
          try {
            await timed('stage', () => item.handler.stage(ctx, stagePath));
          } catch (err) {
            ok = false;
            await undoStaging(conn, marks);
            report.failed += 1;
            const line = (err as { line?: unknown }).line;
            report.issues.push({
              file: item.file,
              ...(typeof line === 'number' ? { line } : {}),
              message: `not ingested (${item.handler.name}): ${(err as Error).message.split('\n')[0]}`,
            });
          } finally {
            if (stagePath !== item.file) fs.rmSync(stagePath, { force: true });
          }
          const sha256 = known ?? (await item.sha256);
          seen.add(sha256);
          // Handlers name the file they were given; name the input instead.
          for (let i = before; i < report.issues.length; i += 1) {
            if (report.issues[i]!.file === stagePath) report.issues[i] = { ...report.issues[i]!, file: item.file };
          }
          done += 1;
          bytes.done += item.bytes;
          if (!ok) bytes.skipped += item.bytes;
          progress('input');
          if (!ok) {
            opts.onFile?.(item.file, 'failed');
            continue;
          }
          pending.push({
            sha256,
            file: item.file,
            bytes: item.bytes,
            mtime_ms: item.mtimeMs,
            handler: item.handler.name,
            ingested_at: new Date().toISOString(),
          });
          if (await batchFull()) await flush();
        }
        await flush();
        const policy = opts.compact ?? (small > 0 ? (c: DuckDBConnection) => compactLake(c, lakeDir, { smallFiles: small }) : null);
        // The follow's policy looks at what the run published: a run that published nothing leaves it nothing new.
        if (policy && release && (!opts.compact || report.versions_published.length > 0)) {
          const c = await timed('compact', () => policy(conn));
          if (c !== null && c.version !== null) {
            report.compacted = c;
            report.versions_published.push(c.version);
          }
        }
        report.version = currentVersion(lakeDir).version;
        phaseNow = 'done';
        progress('end');
      } finally {
        side?.closeSync();
        conn.closeSync();
        instance.closeSync();
      }
    }
  } finally {
    if (progressTimer) clearInterval(progressTimer);
    if (hasher !== opts.hasher) await hasher?.close();
    if (workDir) fs.rmSync(workDir, { recursive: true, force: true });
    await release?.();
  }
  report.seconds = Math.round((performance.now() - t0) / 10) / 100;
  report.level_updates_per_second = report.seconds > 0 ? Math.round((report.counts.level_updates ?? 0) / report.seconds) : 0;
  return report;
}
