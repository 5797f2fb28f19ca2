import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { DuckDBInstance } from '@duckdb/node-api';
import { ensureLake, type GenOptions } from './lake.js';
import { errorRow, naRow, NotAvailable, type BenchContext, type Scenario, type ScenarioRow } from './runner.js';
import { StateStore } from '../src/state/store.js';
import { createLogger } from '../src/log.js';
import { createBenchKeys, REPO, startPmlakeServer, type ChildServer } from './server.js';
import { machineInfo, renderMarkdown, renderText, writeResults } from './table.js';
import { ohlcvScenarios } from './scenarios/ohlcv.js';
import { tradesPage1k, tradesPageDeep, tradesPageFirst } from './scenarios/trades.js';
import { mixedLoad } from './scenarios/mixed.js';
import { marketsListMixed } from './scenarios/markets-list.js';
import { mixedClasses } from './scenarios/mixed-classes.js';
import { bookAtInstant } from './scenarios/orderbook.js';
import { replayWs } from './scenarios/replay-ws.js';
import { ingestWs } from './scenarios/ingest.js';
import { ingestArchive } from './scenarios/ingest-archive.js';
import { lakeBytesArchive } from './scenarios/lake-bytes.js';
import { ingestQueue } from './scenarios/ingest-queue.js';
import { compactAppendedLake, ingestAppend, prepareAppendedLake } from './scenarios/ingest-append.js';
import { httpSmall } from './scenarios/http.js';
import { httpSmallRedis } from './scenarios/http-redis.js';
import { httpSmallPg } from './scenarios/http-pg.js';
import { downloadScenarios } from './scenarios/downloads.js';
import { downloadCsv1mPg } from './scenarios/downloads-pg.js';
import { exportL2Month } from './scenarios/exports.js';
import { freshDuckDb } from './scenarios/common.js';
import { liveFollow, type LiveFollowScale } from './scenarios/live-follow.js';

/**
 * `make bench`, `npm run bench` (`node --import tsx bench/cli.ts`), `pmlake bench` (runs this file as a child
 * process): builds (once, cached) the bench lake at a scale, starts the real server as a child process, runs
 * every scenario side by side with its DuckDB / bare-Express baseline, prints one table and writes
 * bench/results/latest.json. Missed targets are reported, not turned into a failing exit code:
 * the exit code says whether the benchmark itself could run.
 */

type Scale = { gen: GenOptions; httpSeconds: number; mixedSeconds: number; ingestReps: number; ingestMarkets: number; live: LiveFollowScale; note: string };

export const SCALES: Record<'default' | 'small' | 'tiny', Scale> = {
  // The target scale: ≥20M trades and ≥100M L2 level updates over 90 days across 2,000 markets, two of them
  // very busy. --rate scales the book messages to just over 100M level updates; --maker-fills 5 (a taker order
  // fills ≈5 resting orders instead of ≈2.9) brings trades past 20M without adding book messages.
  default: {
    gen: { markets: 2000, days: 90, seed: 20250915, busy: 2, rate: 0.53, makerFills: 5 },
    httpSeconds: 8,
    mixedSeconds: 20,
    ingestReps: 3,
    ingestMarkets: 200,
    // The venue's average is ≈7,000 level updates/s; the issue asks ≥50,000 sustained, then the highest rate that holds.
    live: { seconds: 300, rates: [50_000, 75_000, 100_000], markets: 300 },
    note: 'the issue scale',
  },
  small: {
    gen: { markets: 300, days: 30, seed: 20250915, busy: 2, rate: 0.1 },
    httpSeconds: 5,
    mixedSeconds: 10,
    ingestReps: 3,
    ingestMarkets: 100,
    live: { seconds: 180, rates: [50_000], markets: 300 },
    note: 'a few minutes',
  },
  tiny: {
    gen: { markets: 40, days: 5, seed: 20250915, busy: 2, rate: 1 },
    httpSeconds: 2,
    mixedSeconds: 4,
    ingestReps: 1,
    ingestMarkets: 40,
    live: { seconds: 75, rates: [10_000], markets: 50 },
    note: 'seconds; harness check',
  },
};

const USAGE = `usage: pmlake bench [--scale default|small|tiny] [--reps N] [--only a,b] [--lake DIR] [--data DIR]
                   [--markets N] [--days D] [--seed S] [--busy K] [--rate X] [--maker-fills F] [--rebuild] [--profile DIR]
                   [--out FILE] [--keep-work] [--list] [--appended N [--then-compact]] [--live-rates R,R] [--live-seconds S]
  --appended N     run the scenarios on a hard-link clone of the bench lake after N small-day appends (pmlake ingest,
                   no compaction; rows marked "@N appends"); with --then-compact, pmlake compact the clone and run
                   them again (rows marked "@compacted"). The bench lake itself is never written.
  --live-rates R,R, --live-seconds S
                   live-follow's rates (level updates/s) and seconds per rate instead of the scale's
`;

function allScenarios(scale: Scale): Scenario[] {
  return [
    ...ohlcvScenarios,
    tradesPageDeep,
    tradesPageFirst,
    tradesPage1k,
    bookAtInstant,
    replayWs,
    ...downloadScenarios,
    downloadCsv1mPg,
    exportL2Month,
    ingestWs(scale.ingestReps, scale.ingestMarkets),
    ingestArchive(scale.ingestReps),
    lakeBytesArchive(scale.ingestMarkets),
    // Items big enough that a worker's start and each item's DuckDB do not dominate: four days of 3× the markets.
    ingestQueue(scale.ingestReps, scale.ingestMarkets * 3, 4),
    ingestAppend(scale.ingestReps),
    httpSmall(scale.httpSeconds),
    httpSmallRedis(scale.httpSeconds),
    httpSmallPg(scale.httpSeconds),
    mixedLoad(scale.mixedSeconds),
    marketsListMixed(scale.mixedSeconds),
    mixedClasses(scale.mixedSeconds),
    liveFollow(scale.live),
  ];
}

export async function benchCommand(args: string[]): Promise<number> {
  let values;
  try {
    ({ values } = parseArgs({
      args,
      options: {
        scale: { type: 'string', default: 'default' },
        reps: { type: 'string' },
        only: { type: 'string' },
        lake: { type: 'string' },
        data: { type: 'string' },
        markets: { type: 'string' },
        days: { type: 'string' },
        seed: { type: 'string' },
        busy: { type: 'string' },
        rate: { type: 'string' },
        'maker-fills': { type: 'string' },
        rebuild: { type: 'boolean', default: false },
        profile: { type: 'string' },
        out: { type: 'string' },
        'keep-work': { type: 'boolean', default: false },
        appended: { type: 'string' },
        'live-rates': { type: 'string' },
        'live-seconds': { type: 'string' },
        'then-compact': { type: 'boolean', default: false },
        list: { type: 'boolean', default: false },
        help: { type: 'boolean', default: false },
      },
      strict: true,
    }));
  } catch (err) {
    process.stderr.write(`${(err as Error).message}\n${USAGE}`);
    return 2;
  }
  if (values.help) {
    process.stdout.write(USAGE);
    return 0;
  }
  const scaleName = values.scale as keyof typeof SCALES;
  const base = SCALES[scaleName];
  if (!base) {
    process.stderr.write(`unknown scale ${values.scale}\n${USAGE}`);
    return 2;
  }
  const num = (v: string | undefined, name: string, fallback: number): number => {
    if (v === undefined) return fallback;
    const n = Number(v);
    if (!Number.isFinite(n) || n <= 0) throw new Error(`--${name} must be a positive number`);
    return n;
  };
  let gen: GenOptions;
  let reps: number;
  let appended = 0;
  try {
    appended = values.appended === undefined ? 0 : Math.round(num(values.appended, 'appended', 0));
    gen = {
      markets: num(values.markets, 'markets', base.gen.markets),
      days: num(values.days, 'days', base.gen.days),
      seed: num(values.seed, 'seed', base.gen.seed),
      busy: num(values.busy, 'busy', base.gen.busy),
      rate: num(values.rate, 'rate', base.gen.rate),
      ...(values['maker-fills'] !== undefined || base.gen.makerFills !== undefined
        ? { makerFills: num(values['maker-fills'], 'maker-fills', base.gen.makerFills ?? 0) }
        : {}),
    };
    reps = Math.round(num(values.reps, 'reps', 5));
  } catch (err) {
    process.stderr.write(`${(err as Error).message}\n`);
    return 2;
  }
  if (values['then-compact'] && appended === 0) {
    process.stderr.write(`--then-compact needs --appended N\n${USAGE}`);
    return 2;
  }
  // --live-rates 50000,100000 / --live-seconds S: the live-follow rates and run length without the scale's bench lake.
  const liveRates = values['live-rates']?.split(',').map(Number);
  if (liveRates && liveRates.some((r) => !Number.isFinite(r) || r <= 0)) {
    process.stderr.write(`--live-rates: positive numbers, comma-separated\n${USAGE}`);
    return 2;
  }
  const live: LiveFollowScale = {
    ...base.live,
    ...(liveRates ? { rates: liveRates } : {}),
    ...(values['live-seconds'] !== undefined ? { seconds: Math.max(30, Number(values['live-seconds']) || base.live.seconds) } : {}),
  };
  const scale: Scale = { ...base, gen, live };
  const scenarios = allScenarios(scale);
  if (values.list) {
    process.stdout.write(`${scenarios.map((s) => s.name).join('\n')}\n`);
    return 0;
  }
  const only = values.only
    ? new Set(
        values.only
          .split(',')
          .map((s) => s.trim())
          .filter(Boolean),
      )
    : null;
  if (only) {
    const unknown = [...only].filter((n) => !scenarios.some((s) => s.name === n));
    if (unknown.length) {
      process.stderr.write(`unknown scenario(s): ${unknown.join(', ')}; --list shows them\n`);
      return 2;
    }
  }
  const selected = only ? scenarios.filter((s) => only.has(s.name)) : scenarios;

  const t0 = Date.now();
  const log = (m: string): void => {
    process.stderr.write(`[bench ${((Date.now() - t0) / 1000).toFixed(0).padStart(4)} s] ${m}\n`);
  };
  const lakeDir = path.resolve(values.lake ?? path.join(REPO, 'bench/lake'));
  const dataDir = path.resolve(values.data ?? path.join(REPO, 'bench/data'));
  const workDir = fs.mkdtempSync(path.join(os.tmpdir(), 'pmlake-bench-'));
  log(`scale ${scaleName} ${JSON.stringify(gen)}, ${reps} reps, work dir ${workDir}`);

  let server: ChildServer | null = null;
  const stops: (() => Promise<void>)[] = [];
  const rows: ScenarioRow[] = [];
  try {
    const benchLake = await ensureLake({ lakeDir, dataDir, gen, rebuild: values.rebuild, workDir, log });
    const f = benchLake.facts;
    log(
      `lake: ${f.trades} trades, ${f.l2} L2 level updates, ${f.candles1m} 1m candles, ${f.markets} markets (${benchLake.build.reused ? 'cached' : `built: generate ${benchLake.build.generateSeconds.toFixed(0)} s, ingest ${benchLake.build.ingestSeconds.toFixed(0)} s`})`,
    );
    // --appended N: every scenario (server and baselines) runs on a hard-link clone with N appends; the facts (busiest
    // token, ranges) stay the bench lake's, so the queries are the same ones as on the bench lake.
    let lake = benchLake;
    if (appended > 0) {
      log(`preparing a hard-link clone of the bench lake with ${appended} appended small days`);
      const prep = await prepareAppendedLake({ lake: benchLake, n: appended, dir: path.join(workDir, 'appended-lake'), workDir, log });
      rows.push(...prep.rows);
      lake = { ...benchLake, lakeDir: prep.lakeDir };
      log(`appended clone ready at ${prep.lakeDir}`);
    }

    const stateDir = path.join(workDir, 'state');
    const env: Record<string, string> = {};
    if (selected.some((s) => s.name === 'export-l2-month')) {
      const { startLocalS3 } = await import('../src/s3/local.js');
      const bucket = process.env.PMLAKE_S3_BUCKET ?? 'pmlake-exports';
      const s3 = await startLocalS3({ directory: path.join(workDir, 's3'), buckets: [bucket] });
      stops.push(() => s3.close());
      Object.assign(env, { PMLAKE_S3_ENDPOINT: s3.endpoint, PMLAKE_S3_BUCKET: bucket });
      log(`local S3 at ${s3.endpoint}`);
    }
    const store = StateStore.open(stateDir);
    stops.push(async () => store.close());
    const start = async (): Promise<ChildServer> => {
      const s = await startPmlakeServer({
        lakeDir: lake.lakeDir,
        stateDir,
        env,
        logFile: path.join(workDir, 'server.log'),
        cpuProfDir: values.profile ? path.resolve(values.profile) : undefined,
      });
      log(`pmlake server pid ${s.pid} at ${s.url}`);
      return s;
    };
    server = await start();
    let keyNo = 0;
    // pmlake allows 60 requests a minute per key: query scenarios take the next key of a pool on every request.
    const pool = await createBenchKeys(store, 'main', 200);
    let next = 0;
    const ctx: BenchContext = {
      lake,
      server,
      async restartServer() {
        await server?.stop();
        server = await start();
        ctx.server = server;
      },
      get key() {
        return pool[next++ % pool.length]!;
      },
      newKey: async (label) => (await createBenchKeys(store, `${label}-${++keyNo}`, 1))[0]!,
      newKeys: (label, n) => createBenchKeys(store, `${label}-${++keyNo}`, n),
      baselineDb: freshDuckDb,
      reps,
      workDir,
      cpuProfDir: values.profile ? path.resolve(values.profile) : undefined,
      log,
    };
    // With --appended, each row's scenario name says which lake it ran on.
    const runSelected = async (phase: string): Promise<void> => {
      const tag = (name: string): string => (phase ? `${name} ${phase}` : name);
      for (const s of selected) {
        const ts = Date.now();
        log(`${tag(s.name)} …`);
        try {
          const out = await s.run(ctx);
          rows.push(...out.map((r) => ({ ...r, scenario: tag(r.scenario) })));
        } catch (err) {
          if (err instanceof NotAvailable) rows.push(naRow(tag(s.name), err.message));
          else {
            rows.push(errorRow(tag(s.name), err));
            log(`${s.name} failed: ${(err as Error).stack ?? String(err)}`);
          }
        }
        log(`${tag(s.name)} done in ${((Date.now() - ts) / 1000).toFixed(1)} s`);
      }
    };
    await runSelected(appended > 0 ? `@${appended} appends` : '');
    if (appended > 0 && values['then-compact']) {
      log('pmlake compact of the appended clone');
      try {
        rows.push(await compactAppendedLake(lake.lakeDir, appended, workDir));
      } catch (err) {
        rows.push(errorRow(`compact after ${appended} appends`, err));
        log(`compact failed: ${(err as Error).stack ?? String(err)}`);
      }
      // A fresh server: neither side inherits caches from the uncompacted phase.
      await ctx.restartServer();
      await runSelected('@compacted');
    }

    const text = renderText(rows);
    process.stdout.write(`\n${text}\n\n`);
    const checks = rows.flatMap((r) => r.targets.map((t) => ({ scenario: r.scenario, ...t })));
    const met = checks.filter((c) => c.met === true).length;
    const missed = checks.filter((c) => c.met === false);
    process.stdout.write(
      `targets: ${met} met, ${missed.length} missed${missed.length ? `: ${missed.map((m) => `${m.scenario} (${m.text})`).join('; ')}` : ''}\n`,
    );
    const na = rows.filter((r) => r.status !== 'ok');
    if (na.length) process.stdout.write(`not measured: ${na.map((r) => `${r.scenario} (${r.status}: ${r.reason})`).join('; ')}\n`);

    const duckdbVersion = await (async () => {
      const db = await DuckDBInstance.create(':memory:');
      try {
        const c = await db.connect();
        const v = (await c.runAndReadAll('SELECT version()')).getRows()[0]![0];
        c.closeSync();
        return String(v);
      } finally {
        db.closeSync();
      }
    })();
    // Only a full run at the default scale replaces the committed table: a partial run (--only) or a smaller
    // scale (a harness check) writes beside it in the temp directory.
    const full = !only && scaleName === 'default' && appended === 0;
    const outFile = path.resolve(
      values.out ??
        (full
          ? path.join(REPO, 'bench/results/latest.json')
          : path.join(os.tmpdir(), `pmlake-bench-${appended ? `appended${appended}-` : ''}${only ? 'partial' : scaleName}.json`)),
    );
    writeResults(outFile, {
      generatedAt: new Date().toISOString(),
      scale: scaleName,
      generator: gen,
      reps,
      machine: machineInfo(duckdbVersion),
      lake: { facts: lake.facts, build: lake.build },
      ...(appended > 0 ? { appended: { appends: appended, thenCompact: values['then-compact'], lakeDir: lake.lakeDir } } : {}),
      totalSeconds: Math.round((Date.now() - t0) / 1000),
      ratioMeaning: 'baseline seconds / pmlake seconds for the same work (above 1: pmlake faster); http-small: pmlake req/s / bare Express req/s',
      results: rows,
      markdown: renderMarkdown(rows),
    });
    log(`wrote ${path.relative(process.cwd(), outFile)}; total ${((Date.now() - t0) / 1000).toFixed(0)} s`);
    return 0;
  } finally {
    if (server) await server.stop();
    for (const s of stops.reverse()) await s().catch(() => undefined);
    if (values['keep-work']) log(`work dir kept: ${workDir}`);
    else fs.rmSync(workDir, { recursive: true, force: true });
  }
}

// The entry point (`pmlake bench` spawns this file, so the service never imports the bench); a failure is
// logged as the pmlake CLI logs one.
if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  benchCommand(process.argv.slice(2)).then(
    (code) => {
      process.exitCode = code;
    },
    (err: unknown) => {
      createLogger().fatal({ err }, 'bench failed');
      process.exitCode = 1;
    },
  );
}
