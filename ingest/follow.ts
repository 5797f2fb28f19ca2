import type { Logger } from '../src/log.js';
import { currentVersion } from '../src/lake/versions.js';
import { LandedFiles } from './follow-files.js';
import { FollowCompaction } from './follow-compact.js';
import { runIngest, type IngestReport } from './run.js';
import { FileHasher } from './ledger.js';

/**
 * `pmlake ingest --follow DIR…`: one long-running process that, every cycle, lands every closed file of the
 * directories not landed yet through the ordinary orchestrator (ingest/run.ts), as one lake version per cycle.
 * Closed files are the regular files whose names do not start with '.' (docs/capture-format.md: the recorder's
 * open file is `.open-…`). Which files are landed is kept in memory by name, size and mtime (seeded from the
 * ledger, so a restart carries on) so a cycle hashes only new files; the ledger stays the source of truth, since
 * every file handed to the orchestrator is hashed and checked against it there.
 *
 * A cycle that fails (a DuckDB error, the lake locked by a hand-run compaction) is logged and counted, and the
 * next cycle takes the same files again. Cycles never overlap: one that overruns its period starts the next at once.
 */

export type FollowCycleReport = {
  cycle: number;
  /** Files handed to the orchestrator this cycle. */
  files: number;
  /** The version the cycle's batch published; null when it published none (nothing new, or the cycle failed). */
  version: number | null;
  seconds: number;
  /** The served lake's newest tape receive time (epoch ms), as its manifest records it. */
  newestLandedMs: number | null;
  levelUpdates: number;
  issues: number;
  /** True when the cycle's compaction step published a version. */
  compacted?: boolean;
  /** Set when the cycle failed as a whole. */
  error?: string;
  /**
   * Where the cycle's time went: `list` (finding the new files), `ingest` (the whole orchestrator run, absent when
   * the cycle handed it nothing) and the run's own phases (IngestReport.phase_seconds).
   */
  phase_seconds: Record<string, number>;
};

export type FollowOptions = {
  dirs: string[];
  lakeDir: string;
  cycleSeconds: number;
  log: Logger;
  databaseUrl?: string;
  memoryLimit?: string;
  /** Resident memory of a cycle at most (PMLAKE_INGEST_MEMORY; ingest/memory.ts). */
  memoryBudget?: number;
  threads?: number;
  /** PMLAKE_SNAPSHOT_SECONDS (default 60). */
  snapshotSeconds?: number;
  /** PMLAKE_LAKE_GRACE_SECONDS (default a day): retired files are swept once older than this. */
  graceSeconds?: number;
  onCycle?: (r: FollowCycleReport) => void;
};

export type FollowStats = {
  cycles: number;
  failedCycles: number;
  filesLanded: number;
  filesRejected: number;
  issues: number;
  lastVersion: number | null;
  newestLandedMs: number | null;
  compactions: number;
};

/** After a period boundary, how long a cycle waits for the recorders' cut (fsync, rename) to finish. */
const SETTLE_MS = 1500;

/** How often the follow loop sweeps retired files at most (the sweep reads every manifest still kept). */
const SWEEP_EVERY_MS = 10 * 60_000;

export class Follower {
  private stopping = false;
  private wake: (() => void) | null = null;
  private loop: Promise<void> = Promise.resolve();
  private lastSweep = -Infinity;
  private readonly compaction: FollowCompaction;
  private hasher = new FileHasher();
  private readonly counters: FollowStats = {
    cycles: 0,
    failedCycles: 0,
    filesLanded: 0,
    filesRejected: 0,
    issues: 0,
    lastVersion: null,
    newestLandedMs: null,
    compactions: 0,
  };

  private constructor(
    private readonly opts: FollowOptions,
    private readonly landed: LandedFiles,
  ) {
    this.compaction = new FollowCompaction(opts.lakeDir, opts.cycleSeconds);
  }

  /** Seeds the landed set from the ledger and starts the loop; the first cycle runs at once. */
  static async start(opts: FollowOptions): Promise<Follower> {
    if (!(opts.cycleSeconds > 0)) throw new Error('cycleSeconds must be positive');
    const f = new Follower(opts, LandedFiles.fromLedger(opts.lakeDir));
    f.opts.log.info({ dirs: opts.dirs, lake: opts.lakeDir, cycle_seconds: opts.cycleSeconds, known_files: f.landed.size }, 'following');
    f.loop = f.run();
    return f;
  }

  /** Lets the cycle in progress finish (a publish is atomic either way), then returns; no cycle starts after. */
  async stop(): Promise<void> {
    this.stopping = true;
    this.wake?.();
    await this.loop;
    await this.hasher.close();
    this.opts.log.info(this.stats(), 'follow stopped');
  }

  stats(): FollowStats {
    return { ...this.counters };
  }

  private async run(): Promise<void> {
    const periodMs = this.opts.cycleSeconds * 1000;
    while (!this.stopping) {
      const t0 = performance.now();
      try {
        await this.cycle();
      } catch (err) {
        // Outside the orchestrator (a directory unreadable, a callback throwing): the role goes on all the same.
        this.counters.failedCycles += 1;
        this.opts.log.error({ err }, 'follow cycle failed');
      }
      // A cycle that overran its period starts the next at once; otherwise the next starts just after the coming
      // wall-clock multiple of the period. Recorders cut their files at multiples of their rotation, so with a
      // rotation that divides the cycle a file closed at a boundary is taken seconds later, not up to a cycle later.
      const settleMs = Math.min(SETTLE_MS, periodMs / 4);
      const overran = performance.now() - t0 >= periodMs;
      const now = Date.now();
      const wait = overran ? 0 : (Math.floor((now - settleMs) / periodMs) + 1) * periodMs + settleMs - now;
      if (wait > 0 && !this.stopping) {
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, wait);
          this.wake = () => {
            clearTimeout(timer);
            resolve();
          };
        });
        this.wake = null;
      }
    }
  }

  private async cycle(): Promise<void> {
    const t0 = performance.now();
    const n = ++this.counters.cycles;
    const { log } = this.opts;
    const files = this.landed.pending(this.opts.dirs);
    const phases: Record<string, number> = { list: secondsSince(t0) };
    const out: FollowCycleReport = {
      cycle: n,
      files: files.length,
      version: null,
      seconds: 0,
      newestLandedMs: null,
      levelUpdates: 0,
      issues: 0,
      phase_seconds: phases,
    };
    if (files.length > 0) {
      const graceSeconds = this.opts.graceSeconds ?? 86_400;
      const sweep = Date.now() - this.lastSweep >= Math.min(SWEEP_EVERY_MS, graceSeconds * 1000);
      const deadline = t0 + this.opts.cycleSeconds * 1000;
      try {
        const report: IngestReport = await runIngest(files, {
          lakeDir: this.opts.lakeDir,
          log,
          threads: this.opts.threads,
          memoryLimit: this.opts.memoryLimit,
          memoryBudget: this.opts.memoryBudget,
          databaseUrl: this.opts.databaseUrl,
          snapshotSeconds: this.opts.snapshotSeconds,
          graceSeconds,
          sweep,
          hasher: this.hasher,
          onFile: (file, outcome) => this.landed.record(file, outcome),
          compact: (conn) => this.compaction.step(conn, deadline),
        });
        if (sweep) this.lastSweep = Date.now();
        Object.assign(phases, report.phase_seconds, { ingest: report.seconds });
        const published = report.versions_published.filter((v) => v !== report.compacted?.version);
        out.version = published.length > 0 ? published[published.length - 1]! : null;
        out.levelUpdates = report.counts.level_updates ?? 0;
        out.issues = report.issues.length;
        if (report.compacted) {
          out.compacted = true;
          this.counters.compactions += 1;
        }
        for (const i of report.issues) log.warn({ file: i.file, line: i.line, count: i.count }, `ingest issue: ${i.message}`);
        this.counters.issues += report.issues.length;
        this.counters.filesLanded += report.ingested;
        this.counters.filesRejected += report.failed;
        if (out.version !== null) this.counters.lastVersion = out.version;
      } catch (err) {
        out.error = (err as Error).message.split('\n')[0];
        this.counters.failedCycles += 1;
        // The hashing thread may be what failed: the next cycle gets a fresh one.
        void this.hasher.close();
        this.hasher = new FileHasher();
        log.error({ err, cycle: n, files: files.length }, 'follow cycle failed; its files are taken again next cycle');
      }
    }
    const landedTo = currentVersion(this.opts.lakeDir).manifest.landed_to?.tape;
    out.newestLandedMs = landedTo === undefined ? null : Date.parse(landedTo);
    this.counters.newestLandedMs = out.newestLandedMs;
    out.seconds = secondsSince(t0);
    if (files.length > 0) log.info(out, 'follow cycle');
    this.opts.onCycle?.(out);
  }
}

function secondsSince(t0: number): number {
  return Math.round(performance.now() - t0) / 1000;
}
