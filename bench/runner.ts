import type { DuckDBInstance } from '@duckdb/node-api';
import { median, speedRatio, mbPerSecond, type TargetCheck } from './stats.js';
import type { ChildServer } from './server.js';
import type { BenchLake } from './lake.js';

/**
 * Scenario model. A scenario measures pmlake and its baseline side by side in the same run: one unmeasured
 * warm-up of each (page cache, Parquet footers, JIT), then `reps` rounds alternating pmlake and baseline so
 * drift on the shared 2-core machine hits both alike; the medians are reported.
 */

/** One timed execution. */
export type Sample = {
  seconds: number;
  /** Rows the run produced (or consumed, for ingest). */
  rows?: number;
  /** Bytes it produced (response body, file, object). */
  bytes?: number;
  /** Peak resident memory of the process doing the work during this run. */
  peakRss?: number;
  /** Scenario-specific numbers (req/s, p99 ms, …). */
  extra?: Record<string, number>;
};

export type SideSummary = {
  seconds: number;
  samples: number[];
  rows?: number;
  bytes?: number;
  peakRss?: number;
  mbPerSec?: number;
  extra?: Record<string, number>;
};

export type ScenarioRow = {
  scenario: string;
  status: 'ok' | 'n/a' | 'error';
  reason?: string;
  /** What each side did, in words, for the JSON record. */
  pmlakeDoes?: string;
  baselineDoes?: string;
  rows?: number;
  pmlake?: SideSummary;
  baseline?: SideSummary;
  /** baseline s / pmlake s (above 1: pmlake faster); for http: pmlake req/s / baseline req/s. */
  ratio?: number;
  targets: TargetCheck[];
  notes?: string[];
};

/** Thrown by a scenario that cannot run yet (endpoint missing, data set absent): reported as "n/a: reason". */
export class NotAvailable extends Error {}

export type BenchContext = {
  lake: BenchLake;
  server: ChildServer;
  /** Replaces `server` with a freshly started one (memory measurements that must not inherit history). */
  restartServer(): Promise<void>;
  /** A professional key — the next of a pool on every read, so no key reaches the per-key request limit. */
  readonly key: string;
  newKey(label: string): Promise<string>;
  /** Several keys of one fresh user (polling an export without hitting the per-key request limit). */
  newKeys(label: string, n: number): Promise<string[]>;
  /** A fresh plain DuckDB instance (threads=2) for a baseline; closed by the caller. */
  baselineDb(): Promise<DuckDBInstance>;
  reps: number;
  workDir: string;
  /** --profile DIR: servers a scenario starts of its own run with --cpu-prof into it too. */
  cpuProfDir?: string | undefined;
  log(msg: string): void;
};

export type Scenario = {
  name: string;
  /** Rows for the table; one scenario may report sub-rows (e.g. 1M and 10M). */
  run(ctx: BenchContext): Promise<ScenarioRow[]>;
};

export function summarize(samples: Sample[]): SideSummary {
  const secs = samples.map((s) => s.seconds);
  const pick = (f: (s: Sample) => number | undefined): number | undefined => {
    const xs = samples.map(f).filter((v): v is number => v !== undefined && Number.isFinite(v));
    return xs.length ? median(xs) : undefined;
  };
  const seconds = median(secs);
  const bytes = pick((s) => s.bytes);
  const rows = pick((s) => s.rows);
  const peaks = samples.map((s) => s.peakRss).filter((v): v is number => v !== undefined && Number.isFinite(v));
  const extraKeys = new Set(samples.flatMap((s) => Object.keys(s.extra ?? {})));
  const extra: Record<string, number> = {};
  for (const k of extraKeys) extra[k] = pick((s) => s.extra?.[k]) ?? Number.NaN;
  return {
    seconds,
    samples: secs,
    ...(rows !== undefined ? { rows } : {}),
    ...(bytes !== undefined ? { bytes, mbPerSec: mbPerSecond(bytes, seconds) } : {}),
    // Peak is the worst run, not the median: "flat memory" is about the maximum.
    ...(peaks.length ? { peakRss: Math.max(...peaks) } : {}),
    ...(extraKeys.size ? { extra } : {}),
  };
}

export type SideBySide = { pmlake: SideSummary; baseline: SideSummary; ratio: number };

/**
 * Short queries (tens of ms): the steady state of a long-running server is what a user meets, so both sides
 * get three unmeasured rounds (the server's first requests on a path run before V8 has optimised it, several
 * times slower than later ones), and more measured rounds, because a median of five short samples on a shared
 * machine moves a lot between runs.
 */
export const QUERY_ROUNDS = { warmups: 3, minReps: 15 } as const;

export function queryReps(reps: number): number {
  return Math.max(reps, QUERY_ROUNDS.minReps);
}

/**
 * Runs both sides: warm-up, then `reps` alternating rounds. `rep` is passed so a scenario can vary its input
 * per round (a different random instant) while both sides of a round see the same one.
 */
export async function sideBySide(
  reps: number,
  pmlake: (rep: number) => Promise<Sample>,
  baseline: (rep: number) => Promise<Sample>,
  opts: { warmup?: boolean; warmups?: number } = {},
): Promise<SideBySide> {
  const warmups = opts.warmup === false ? 0 : (opts.warmups ?? 1);
  for (let w = 0; w < warmups; w++) {
    await pmlake(-1);
    await baseline(-1);
  }
  const p: Sample[] = [];
  const b: Sample[] = [];
  for (let i = 0; i < reps; i++) {
    // Alternate which side goes first so neither always inherits the other's warm cache.
    if (i % 2 === 0) {
      p.push(await pmlake(i));
      b.push(await baseline(i));
    } else {
      b.push(await baseline(i));
      p.push(await pmlake(i));
    }
  }
  const ps = summarize(p);
  const bs = summarize(b);
  return { pmlake: ps, baseline: bs, ratio: speedRatio(ps.seconds, bs.seconds) };
}

/** Wall-clock seconds of an async function, with its result. */
export async function timed<T>(fn: () => Promise<T>): Promise<{ seconds: number; value: T }> {
  const t0 = process.hrtime.bigint();
  const value = await fn();
  return { seconds: Number(process.hrtime.bigint() - t0) / 1e9, value };
}

export function naRow(scenario: string, reason: string): ScenarioRow {
  return { scenario, status: 'n/a', reason, targets: [] };
}

export function errorRow(scenario: string, err: unknown): ScenarioRow {
  const msg = err instanceof Error ? err.message : String(err);
  return { scenario, status: 'error', reason: msg.split('\n')[0]!.slice(0, 300), targets: [] };
}
