import fs from 'node:fs';
import path from 'node:path';
import { DuckDBInstance } from '@duckdb/node-api';
import type { DatasetName } from '../src/lake/layout.js';
import { sqlString } from '../src/lake/duckdb.js';
import { currentVersion } from '../src/lake/versions.js';
import { REPO, runToExit } from './server.js';
import { publishMissingIndex } from '../ingest/raw-index.js';

/**
 * The bench lake: generator output (bench/data) ingested into a lake (bench/lake), built once and reused.
 * Each directory carries a marker with the generator options it was built from; a run whose options differ
 * (another scale, another seed) rebuilds, a run whose options match reuses it. The marker is written last,
 * so an interrupted build is simply rebuilt next time.
 *
 * Both steps run the real CLI (`pmlake generate`, `pmlake ingest`) as child processes: the bench lake is built
 * exactly the way an operator builds a lake, and their time and peak memory are reported with the results.
 */

export type GenOptions = {
  markets: number;
  days: number;
  seed: number;
  busy: number;
  /** Generator activity multiplier (1 = its default event rates). */
  rate: number;
  /** Mean maker fills per match (the generator's --maker-fills); undefined = the generator's default. */
  makerFills?: number;
};

export type BuildStats = {
  generateSeconds: number;
  ingestSeconds: number;
  dataBytes: number;
  lakeBytes: number;
  generatePeakRss?: number;
  ingestPeakRss?: number;
  generateReport?: Record<string, number>;
  ingestReport?: { counts: Record<string, number>; levelUpdatesPerSecond: number; issues: number; phaseSeconds?: Record<string, number> };
  reused: boolean;
};

/** Facts about the built lake the scenarios need (busiest token, ranges); computed once, kept in the marker. */
export type LakeFacts = {
  trades: number;
  l2: number;
  candles1m: number;
  markets: number;
  tradesFrom: string;
  tradesTo: string;
  /** The token with the most trades, its market's numeric id and outcome index. */
  busiestToken: { tokenId: string; marketId: string; outcome: number; trades: number; from: string; to: string };
  /** The market (both tokens) with the most trades. */
  busiestMarket: { marketId: string; tokens: string[]; trades: number };
  /** The 25 markets with the most trades, most first (bulk downloads add them up to 10M rows). */
  topMarkets: { marketId: string; tokens: string[]; trades: number }[];
  /** The token with the most L2 rows, and its busiest calendar month. */
  busiestL2: {
    assetId: string;
    conditionId: string;
    marketId: string;
    outcome: number;
    rows: number;
    month: string;
    monthRows: number;
    from: string;
    to: string;
  };
};

export type BenchLake = {
  lakeDir: string;
  dataDir: string;
  gen: GenOptions;
  facts: LakeFacts;
  build: BuildStats;
};

const MARKER = '.bench-marker.json';
/** Bump when the way the lake is built changes, so cached lakes are rebuilt. */
const BUILD_VERSION = 2;
/** Bump when LakeFacts change shape: facts are recomputed, the lake is kept. */
const FACTS_VERSION = 3;

type Marker = { version: number; factsVersion?: number; gen: GenOptions; builtAt: string; stats?: Partial<BuildStats>; facts?: LakeFacts };

function readMarker(dir: string): Marker | null {
  try {
    return JSON.parse(fs.readFileSync(path.join(dir, MARKER), 'utf8')) as Marker;
  } catch {
    return null;
  }
}

function writeMarker(dir: string, m: Marker): void {
  const tmp = path.join(dir, `${MARKER}.tmp`);
  fs.writeFileSync(tmp, JSON.stringify(m, null, 2));
  fs.renameSync(tmp, path.join(dir, MARKER));
}

/**
 * Clears a directory the benchmark is about to (re)build — but only one that is empty or that it built itself
 * (has a marker, even a stale one), so `--lake ~/something` can never wipe a directory it does not own.
 */
function clearOwnDir(dir: string, gen: GenOptions): void {
  if (fs.existsSync(dir) && fs.readdirSync(dir).length > 0 && !fs.existsSync(path.join(dir, MARKER))) {
    throw new Error(`${dir} is not empty and was not built by pmlake bench (no ${MARKER}); remove it or choose another directory`);
  }
  fs.rmSync(dir, { recursive: true, force: true });
  fs.mkdirSync(dir, { recursive: true });
  // An "in progress" marker (version 0 never matches): an interrupted build is recognised as ours and redone.
  writeMarker(dir, { version: 0, gen, builtAt: new Date().toISOString() });
}

function sameGen(a: GenOptions, b: GenOptions): boolean {
  return (
    a.markets === b.markets &&
    a.days === b.days &&
    a.seed === b.seed &&
    a.busy === b.busy &&
    a.rate === b.rate &&
    (a.makerFills ?? null) === (b.makerFills ?? null)
  );
}

export function dirBytes(dir: string): number {
  let total = 0;
  const walk = (d: string): void => {
    let ents: fs.Dirent[];
    try {
      ents = fs.readdirSync(d, { withFileTypes: true });
    } catch {
      return;
    }
    for (const e of ents) {
      const full = path.join(d, e.name);
      if (e.isDirectory()) walk(full);
      else if (e.isFile()) total += fs.statSync(full).size;
    }
  };
  walk(dir);
  return total;
}

/** Runs a pmlake CLI command to completion as a child; resolves with its wall time and peak memory. */
async function runCli(
  args: string[],
  env: NodeJS.ProcessEnv,
  logFile: string,
  log: (m: string) => void,
): Promise<{ seconds: number; peakRss: number; stdout: string }> {
  const r = await runToExit(path.join(REPO, 'src/cli.ts'), args, env, logFile);
  log(`  ${args[0]} finished in ${r.seconds.toFixed(1)} s, peak RSS ${(r.peakRss / 2 ** 20).toFixed(0)} MiB`);
  return r;
}

export async function ensureLake(opts: {
  lakeDir: string;
  dataDir: string;
  gen: GenOptions;
  rebuild?: boolean;
  workDir: string;
  log: (m: string) => void;
}): Promise<BenchLake> {
  const { lakeDir, dataDir, gen, log } = opts;
  const dataMarker = readMarker(dataDir);
  const lakeMarker = readMarker(lakeDir);
  const build: BuildStats = { generateSeconds: 0, ingestSeconds: 0, dataBytes: 0, lakeBytes: 0, reused: true };
  const dataOk = dataMarker?.version === BUILD_VERSION && sameGen(dataMarker.gen, gen);
  // The lake stands on its own once built: bench/data may be removed to save disk (the default scale's source
  // files are tens of GB) without forcing a rebuild. Same options → same bytes, so a regenerated data dir
  // would ingest into the same lake.
  const lakeOk = !opts.rebuild && lakeMarker?.version === BUILD_VERSION && sameGen(lakeMarker.gen, gen);

  if (!dataOk && !lakeOk) {
    log(`generating bench data: ${JSON.stringify(gen)} → ${dataDir}`);
    clearOwnDir(dataDir, gen);
    const g = await runCli(
      [
        'generate',
        '--markets',
        String(gen.markets),
        '--days',
        String(gen.days),
        '--seed',
        String(gen.seed),
        '--out',
        dataDir,
        '--busy',
        String(gen.busy),
        ...(gen.rate !== 1 ? ['--rate', String(gen.rate)] : []),
        ...(gen.makerFills !== undefined ? ['--maker-fills', String(gen.makerFills)] : []),
      ],
      { ...process.env, LOG_LEVEL: 'info' },
      path.join(opts.workDir, 'generate.log'),
      log,
    );
    build.generateSeconds = g.seconds;
    build.generatePeakRss = g.peakRss;
    try {
      build.generateReport = JSON.parse(g.stdout.trim().split('\n').pop() ?? '{}') as Record<string, number>;
    } catch {
      // informational only
    }
    writeMarker(dataDir, { version: BUILD_VERSION, gen, builtAt: new Date().toISOString(), stats: { ...build } });
    build.reused = false;
  } else if (dataMarker?.stats) {
    Object.assign(build, dataMarker.stats);
  }

  if (!lakeOk) {
    log(`ingesting bench data into ${lakeDir}`);
    clearOwnDir(lakeDir, gen);
    // The source sub-directories, not the data dir itself: its manifest.json is no venue format.
    const inputs = ['markets', 'fills', 'ws', 'options'].map((d) => path.join(dataDir, d)).filter((d) => fs.existsSync(d));
    const i = await runCli(
      ['ingest', ...inputs],
      // Ingest's default memory budget (PMLAKE_INGEST_MEMORY, 4 GiB), whatever the caller's environment says:
      // the build is the proof that a 90-day batch lands within it; its peak is recorded.
      {
        ...process.env,
        PMLAKE_LAKE: lakeDir,
        PMLAKE_DUCKDB_THREADS: '2',
        PMLAKE_DUCKDB_MEMORY: '4GB',
        PMLAKE_INGEST_MEMORY: '4GiB',
        LOG_LEVEL: 'info',
      },
      path.join(opts.workDir, 'ingest.log'),
      log,
    );
    build.ingestSeconds = i.seconds;
    build.ingestPeakRss = i.peakRss;
    try {
      const rep = JSON.parse(i.stdout) as {
        counts?: Record<string, number>;
        level_updates_per_second?: number;
        issues_total?: number;
        phase_seconds?: Record<string, number>;
      };
      build.ingestReport = {
        counts: rep.counts ?? {},
        levelUpdatesPerSecond: rep.level_updates_per_second ?? 0,
        issues: rep.issues_total ?? 0,
        // Where the build's ingest time went (stage, books, candles, merge_<data set>, catalog).
        ...(rep.phase_seconds ? { phaseSeconds: rep.phase_seconds } : {}),
      };
    } catch {
      // The report is informational; the lake facts below are what scenarios use.
    }
    build.reused = false;
  } else {
    Object.assign(build, lakeMarker?.stats ?? {}, { reused: true });
  }
  await ensureRawIndex(lakeDir, opts.workDir, log);
  build.dataBytes = dirBytes(dataDir);
  build.lakeBytes = dirBytes(lakeDir);

  let facts = lakeOk && lakeMarker?.factsVersion === FACTS_VERSION ? lakeMarker.facts : undefined;
  if (!facts) {
    log('reading lake facts (busiest token and market, ranges)');
    facts = await computeFacts(lakeDir);
    writeMarker(lakeDir, {
      version: BUILD_VERSION,
      factsVersion: FACTS_VERSION,
      gen,
      builtAt: new Date().toISOString(),
      stats: { ...build },
      facts,
    });
  }
  return { lakeDir, dataDir, gen, facts, build };
}

/**
 * A lake cached before the market index (ingest/raw-index.ts) gets it for its raw days, as `pmlake compact` gives it
 * to an operator's lake, instead of a rebuild (hours at the default scale). A lake built since has it already.
 */
async function ensureRawIndex(lakeDir: string, workDir: string, log: (m: string) => void): Promise<void> {
  const version = currentVersion(lakeDir);
  const indexed = new Set(version.partitionValues('raw_by_market'));
  const missing = version.partitionValues('raw').filter((d) => !indexed.has(d));
  if (missing.length === 0) return;
  log(`indexing ${missing.length} raw days by market (a lake cached before the index)`);
  const t0 = performance.now();
  const db = await DuckDBInstance.create(':memory:', { threads: '2', memory_limit: '4GB', temp_directory: path.join(workDir, 'index-spill') });
  const conn = await db.connect();
  try {
    const r = await publishMissingIndex(conn, lakeDir);
    log(`  ${r.days} days, ${r.rows} rows in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
  } finally {
    conn.closeSync();
    db.closeSync();
  }
}

async function computeFacts(lakeDir: string): Promise<LakeFacts> {
  const db = await DuckDBInstance.create(':memory:', { threads: '2' });
  const conn = await db.connect();
  const q = async (sql: string): Promise<Record<string, unknown>[]> => (await conn.runAndReadAll(sql)).getRowObjectsJS() as Record<string, unknown>[];
  // The current version's files (every Parquet file of the partition directories on a lake without versions).
  const version = currentVersion(lakeDir);
  const exists = (name: DatasetName): boolean => version.hasFiles(name);
  const src = (name: DatasetName): string => `read_parquet([${version.files(name).map(sqlString).join(', ')}], hive_partitioning = false)`;
  try {
    const iso = (v: unknown): string => (v instanceof Date ? v.toISOString() : String(v));
    const trades = exists('trades') ? Number((await q(`SELECT count(*) AS n FROM ${src('trades')}`))[0]!.n) : 0;
    const l2 = exists('l2') ? Number((await q(`SELECT count(*) AS n FROM ${src('l2')}`))[0]!.n) : 0;
    const candles1m = exists('candles_1m') ? Number((await q(`SELECT count(*) AS n FROM ${src('candles_1m')}`))[0]!.n) : 0;
    const markets = exists('markets') ? Number((await q(`SELECT count(*) AS n FROM ${src('markets')}`))[0]!.n) : 0;
    const tokenMarket = exists('tokens')
      ? `LEFT JOIN ${src('tokens')} tk ON tk.token_id = x.tok`
      : `LEFT JOIN (SELECT NULL::VARCHAR AS token_id, NULL::VARCHAR AS market_id, NULL::INTEGER AS outcome_index) tk ON false`;
    const range = trades ? (await q(`SELECT min(ts) AS a, max(ts) AS b FROM ${src('trades')}`))[0]! : { a: '', b: '' };
    const bt = trades
      ? (
          await q(
            `SELECT x.*, tk.market_id, tk.outcome_index FROM (
             SELECT token_id AS tok, count(*) AS n, min(ts) AS a, max(ts) AS b FROM ${src('trades')}
             GROUP BY 1 ORDER BY n DESC, tok LIMIT 1) x ${tokenMarket}`,
          )
        )[0]!
      : null;
    const top =
      trades && exists('tokens')
        ? await q(
            `SELECT tk.market_id, list(DISTINCT tk.token_id ORDER BY tk.token_id) AS toks, count(*) AS n FROM ${src('trades')} t
           JOIN ${src('tokens')} tk ON tk.token_id = t.token_id GROUP BY 1 ORDER BY n DESC, 1 LIMIT 25`,
          )
        : [];
    const topMarkets = top.map((r) => ({ marketId: String(r.market_id), tokens: (r.toks as unknown[]).map(String), trades: Number(r.n) }));
    const bl = l2
      ? (
          await q(
            `WITH per AS (SELECT asset_id AS tok, strftime(recv_ts, '%Y-%m') AS m, count(*) AS n, min(recv_ts) AS a, max(recv_ts) AS b,
                               any_value(condition_id) AS cid
                        FROM ${src('l2')} GROUP BY 1, 2),
                tot AS (SELECT tok, sum(n) AS total, min(a) AS a, max(b) AS b, any_value(cid) AS cid FROM per GROUP BY 1 ORDER BY total DESC, tok LIMIT 1),
                best AS (SELECT per.tok, per.m, per.n FROM per JOIN tot USING (tok) ORDER BY per.n DESC, per.m LIMIT 1)
           SELECT x.tok, x.total, x.a, x.b, x.cid, best.m, best.n AS month_rows, tk.market_id, tk.outcome_index
           FROM tot x JOIN best USING (tok) ${tokenMarket}`,
          )
        )[0]!
      : null;
    return {
      trades,
      l2,
      candles1m,
      markets,
      tradesFrom: iso(range.a),
      tradesTo: iso(range.b),
      busiestToken: {
        tokenId: String(bt?.tok ?? ''),
        marketId: String(bt?.market_id ?? ''),
        outcome: Number(bt?.outcome_index ?? 0),
        trades: Number(bt?.n ?? 0),
        from: iso(bt?.a ?? ''),
        to: iso(bt?.b ?? ''),
      },
      busiestMarket: topMarkets[0] ?? { marketId: '', tokens: [], trades: 0 },
      topMarkets,
      busiestL2: {
        assetId: String(bl?.tok ?? ''),
        conditionId: String(bl?.cid ?? ''),
        marketId: String(bl?.market_id ?? ''),
        outcome: Number(bl?.outcome_index ?? 0),
        rows: Number(bl?.total ?? 0),
        month: String(bl?.m ?? ''),
        monthRows: Number(bl?.month_rows ?? 0),
        from: iso(bl?.a ?? ''),
        to: iso(bl?.b ?? ''),
      },
    };
  } finally {
    conn.closeSync();
    db.closeSync();
  }
}
