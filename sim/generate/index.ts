import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Worker } from 'node:worker_threads';
import { buildPlan, NEW_SHAPE_FROM, isoDate, type GenerateOptions, type Plan } from './plan.js';
import { emptyCounts, runDay, type DayCounts, type DayResult } from './day.js';
import { gammaMarkets, type MarketTotals } from './gamma.js';
import { injectFaults, type FaultOptions } from './faults.js';

export type { GenerateOptions } from './plan.js';

export type GenerateReport = {
  out: string;
  options: { markets: number; days: number; seed: number; start: string; busy: number; options: boolean; rate: number; makerFills: number };
  range: { from: string; to: string };
  counts: DayCounts & { markets: number; tokens: number; events: number; series: number; days: number };
  bytes: { ws: number; fills: number; options: number; markets: number; total: number };
  files: { markets: string; ws: string[]; fills: string[]; options: string[]; faults?: string };
  /** Present only when faults were injected: what was injected (counts describe the clean tape). */
  faults?: { options: FaultOptions; drops: number; silences: number; lines_lost: number; duplicates: number; crossed: number; checkpoints_failed: number };
  timing: { seconds: number; workers: number; messages_per_s: number; level_updates_per_s: number; mb_per_s: number };
};

export type ProgressFn = (r: DayResult, done: number, total: number) => void;

/** Names the generator's output in its manifest: bumped when the same options give other data (2: token ids are uint256). */
export const GENERATOR = 'pmlake-generate/2';
/**
 * Writes a synthetic venue data set to `opts.out` (see lake/README.md "Generator"): Gamma markets JSON,
 * one websocket JSONL and one OrderFilled JSONL per day, optionally options trades, and manifest.json.
 * Days are independent given the plan, so they run on worker threads; the bytes are the same for any number
 * of workers because each day draws from its own seeded stream and writes its own files.
 */
export async function generate(o: GenerateOptions, onProgress?: ProgressFn): Promise<GenerateReport> {
  const started = process.hrtime.bigint();
  const plan = buildPlan(o);
  const { opts } = plan;
  const out = opts.out;
  fs.mkdirSync(path.join(out, 'markets'), { recursive: true });
  fs.mkdirSync(path.join(out, 'ws'), { recursive: true });
  fs.mkdirSync(path.join(out, 'fills'), { recursive: true });
  if (opts.options) fs.mkdirSync(path.join(out, 'options'), { recursive: true });

  const workers = opts.workers >= 0 ? Math.min(opts.workers, opts.days) : Math.min(os.availableParallelism(), opts.days);
  const results: DayResult[] = new Array(opts.days);
  let done = 0;
  const finish = (r: DayResult): void => {
    results[r.day] = r;
    done++;
    onProgress?.(r, done, opts.days);
  };
  if (workers <= 1) {
    for (let d = 0; d < opts.days; d++) finish(runDay(plan, d));
  } else {
    await runOnWorkers(o, opts.days, workers, finish);
  }

  // Aggregate in day order so the totals (and the markets file) do not depend on completion order.
  const counts = emptyCounts();
  const bytes = { ws: 0, fills: 0, options: 0, markets: 0, total: 0 };
  const totals: MarketTotals[] = plan.markets.map(() => ({ volumeMicro: 0, trades: 0, lastYesMilli: -1, lastTradeMs: 0, bestBid: 0, bestAsk: 0 }));
  for (const r of results) {
    for (const k of Object.keys(counts) as (keyof DayCounts)[]) counts[k] += r.counts[k];
    bytes.ws += r.bytes.ws;
    bytes.fills += r.bytes.fills;
    bytes.options += r.bytes.options;
    for (const m of r.markets) {
      const t = totals[m.idx]!;
      t.volumeMicro += m.volumeMicro;
      t.trades += m.trades;
      if (m.lastYesMilli >= 0) {
        t.lastYesMilli = m.lastYesMilli;
        t.lastTradeMs = m.lastTradeMs;
      }
      t.bestBid = m.bestBid;
      t.bestAsk = m.bestAsk;
    }
  }
  // Faults rewrite the finished day files (their own seeded stream), so the clean tape is the same either way.
  // Fault options that inject nothing still write the truth (of a clean tape), leaving the tape untouched.
  let faults: GenerateReport['faults'];
  if (o.faults) {
    const ws = plan.dayStarts.map((d) => `ws/${isoDate(d)}.jsonl`);
    const truth = injectFaults(out, opts.seed, ws, plan.dayStarts, o.faults);
    const n = (k: string): number => truth.faults.filter((x) => x.kind === k).length;
    faults = {
      options: o.faults,
      drops: n('drop'),
      silences: n('silence'),
      lines_lost: truth.faults.reduce((a, x) => a + (x.kind === 'silence' ? x.lines_lost : 0), 0),
      duplicates: n('duplicate'),
      crossed: n('crossed'),
      checkpoints_failed: truth.checkpoints.failed,
    };
    bytes.ws = ws.reduce((a, f) => a + fs.statSync(path.join(out, f)).size, 0);
  }
  const marketsFile = path.join(out, 'markets', 'gamma_markets.json');
  const text = `${JSON.stringify(gammaMarkets(plan, totals), null, 2)}\n`;
  fs.writeFileSync(marketsFile, text);
  bytes.markets = Buffer.byteLength(text);
  bytes.total = bytes.ws + bytes.fills + bytes.options + bytes.markets;

  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  const dates = plan.dayStarts.map(isoDate);
  const report: GenerateReport = {
    out,
    options: {
      markets: opts.markets,
      days: opts.days,
      seed: opts.seed,
      start: opts.start,
      busy: opts.busy,
      options: opts.options,
      rate: opts.rate,
      makerFills: opts.makerFills,
    },
    range: { from: isoDate(plan.startMs), to: isoDate(plan.endMs - 1) },
    counts: {
      ...counts,
      markets: plan.markets.length,
      tokens: plan.markets.length * 2,
      events: plan.events.length,
      series: plan.series.length,
      days: opts.days,
    },
    bytes,
    files: {
      markets: 'markets/gamma_markets.json',
      ws: dates.map((d) => `ws/${d}.jsonl`),
      fills: dates.map((d) => `fills/${d}.jsonl`),
      options: opts.options ? dates.map((d) => `options/${d}.jsonl`) : [],
      ...(faults ? { faults: 'faults.json' } : {}),
    },
    ...(faults ? { faults } : {}),
    timing: {
      seconds: round(seconds, 3),
      workers: Math.max(1, workers),
      messages_per_s: Math.round(counts.ws_messages / seconds),
      level_updates_per_s: Math.round(counts.level_updates / seconds),
      mb_per_s: round(bytes.total / 1e6 / seconds, 1),
    },
  };
  // Everything but `timing` is a function of the options, so two runs with one seed differ only there.
  fs.writeFileSync(
    path.join(out, 'manifest.json'),
    `${JSON.stringify(
      { generator: GENERATOR, price_change_shape: { old_before: NEW_SHAPE_FROM, new_from: NEW_SHAPE_FROM }, ...report, out: undefined },
      null,
      2,
    )}\n`,
  );
  return report;
}

function round(x: number, digits: number): number {
  const f = 10 ** digits;
  return Math.round(x * f) / f;
}

/** Hands days to a pool of worker threads, each of which rebuilds the plan from the same options. */
async function runOnWorkers(o: GenerateOptions, days: number, n: number, finish: (r: DayResult) => void): Promise<void> {
  let nextDay = 0;
  const pool = Array.from({ length: n }, () => new Worker(new URL('./worker-boot.mjs', import.meta.url), { workerData: o }));
  try {
    await Promise.all(
      pool.map(
        (w) =>
          new Promise<void>((resolve, reject) => {
            const feed = (): void => {
              if (nextDay >= days) {
                resolve();
                return;
              }
              w.postMessage(nextDay++);
            };
            w.on('message', (r: DayResult) => {
              finish(r);
              feed();
            });
            w.on('error', reject);
            w.on('exit', (code) => {
              if (code !== 0) reject(new Error(`generator worker exited with code ${code}`));
            });
            feed();
          }),
      ),
    );
  } finally {
    await Promise.all(pool.map((w) => w.terminate()));
  }
}

export type { Plan };
