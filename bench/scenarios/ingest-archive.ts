import fs from 'node:fs';
import path from 'node:path';
import { sqlString } from '../../src/lake/duckdb.js';
import { archiveHour } from '../../sim/generate/archive-hour.js';
import { sideBySide, type BenchContext, type Sample, type Scenario, type ScenarioRow } from '../runner.js';
import { peakTracker } from '../proc.js';
import { REPO, runToExit } from '../server.js';
import { atLeast } from '../stats.js';
import { withBaselineDb } from './common.js';

/**
 * ingest-archive: `runIngest` of one hour of the public archive's v2 layout (ingest/archive/) into a fresh lake —
 * stage, derive books / top of book / checkpoints / coverage, write partitions — against DuckDB's bare scan of the
 * same file into a table. Both rates are level updates per second of the same file. The input is a synthetic
 * venue hour (sim/generate/archive-hour.ts): one UTC hour, sorted by market, asset, receive time, ~99.8 %
 * price_change rows, a book per token at its first event and after each trade — the archive's shape. Its size
 * is the venue's hour (25M rows) at the issue scale's 2,000 markets and in proportion below;
 * PMLAKE_BENCH_ARCHIVE_ROWS sets it.
 * Target: ≥2,000,000 level updates/s (a venue hour of ≈25M in ≤15 s).
 */

/** Rows of the hour: the venue's 25M at 2,000 markets, in proportion to the bench lake's markets. */
function hourRows(ctx: BenchContext): number {
  const env = Number(process.env.PMLAKE_BENCH_ARCHIVE_ROWS);
  if (Number.isFinite(env) && env > 0) return Math.round(env);
  return Math.round((25_000_000 * ctx.lake.gen.markets) / 2000);
}

/** The archive hour, cached next to the bench data (rebuilt when its size or the writer's version changes). */
export async function archiveInput(ctx: BenchContext): Promise<{ file: string; rows: number }> {
  const want = hourRows(ctx);
  const dir = path.join(ctx.lake.dataDir, 'ingest-archive-hour');
  const file = path.join(dir, 'polymarket_orderbook_2026-04-20T14.parquet');
  const marker = path.join(dir, '.bench-input');
  const key = `archive-hour/1 rows=${want} seed=${ctx.lake.gen.seed}`;
  if (fs.existsSync(file) && fs.existsSync(marker)) {
    const [k, n] = fs.readFileSync(marker, 'utf8').split('\n');
    if (k === key) return { file, rows: Number(n) };
  }
  fs.rmSync(dir, { recursive: true, force: true });
  fs.mkdirSync(dir, { recursive: true });
  ctx.log(`  writing the ingest-archive input: a synthetic archive hour of ${want} rows`);
  const rows = await archiveHour({ rows: want, seed: ctx.lake.gen.seed, hour: '2026-04-20T14' }, file);
  fs.writeFileSync(marker, `${key}\n${rows}`);
  return { file, rows };
}

export function ingestArchive(maxReps: number): Scenario {
  return {
    name: 'ingest-archive',
    async run(ctx: BenchContext): Promise<ScenarioRow[]> {
      const { file, rows } = await archiveInput(ctx);
      const bytes = fs.statSync(file).size;
      // A venue-size hour takes minutes a round: two rounds give its spread.
      const reps = Math.max(1, Math.min(ctx.reps, maxReps, rows > 10_000_000 ? 2 : maxReps));
      let levelUpdates = 0;
      const phases: Record<string, number>[] = [];
      const log = path.join(ctx.workDir, 'ingest-archive.log');
      const pmlake = async (rep: number): Promise<Sample> => {
        const lake = path.join(ctx.workDir, `ingest-archive-lake-${rep + 1}`);
        fs.rmSync(lake, { recursive: true, force: true });
        try {
          const r = await runToExit(path.join(REPO, 'bench/ingest-child.ts'), [lake, file], { ...process.env }, log);
          const line = r.stdout.trim().split('\n').pop() ?? '{}';
          const out = JSON.parse(line) as { seconds: number; level_updates: number; failed: number; phase_seconds?: Record<string, number> };
          if (out.failed > 0) throw new Error(`ingest of ${path.basename(file)} failed; see ${log}`);
          levelUpdates = out.level_updates;
          if (out.phase_seconds) phases.push(out.phase_seconds);
          return { seconds: out.seconds, rows: out.level_updates, bytes, peakRss: r.peakRss };
        } finally {
          fs.rmSync(lake, { recursive: true, force: true });
        }
      };
      return withBaselineDb(async (db) => {
        const baseline = async (): Promise<Sample> => {
          const conn = await db.connect();
          try {
            await conn.run('DROP TABLE IF EXISTS archive_bare');
            const peak = peakTracker('self');
            const t0 = process.hrtime.bigint();
            await conn.run(`CREATE TABLE archive_bare AS SELECT * FROM read_parquet(${sqlString(file)})`);
            const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
            return { seconds, rows: levelUpdates || undefined, bytes, peakRss: peak.stop() } as Sample;
          } finally {
            await conn.run('DROP TABLE IF EXISTS archive_bare').catch(() => undefined);
            conn.closeSync();
          }
        };
        const r = await sideBySide(reps, pmlake, baseline, { warmup: false });
        const pRate = levelUpdates / r.pmlake.seconds;
        const bRate = levelUpdates / r.baseline.seconds;
        const phase = phases.at(-1) ?? {};
        const top = Object.entries(phase)
          .sort((a, b) => b[1] - a[1])
          .slice(0, 6)
          .map(([k, v]) => `${k} ${v.toFixed(2)} s`)
          .join(', ');
        return [
          {
            scenario: 'ingest-archive',
            status: 'ok',
            pmlakeDoes: `runIngest of one archive hour (${rows} rows, ${(bytes / 1e6).toFixed(0)} MB) into a fresh lake`,
            baselineDoes: 'DuckDB: CREATE TABLE AS SELECT * FROM read_parquet(file)',
            rows: levelUpdates,
            pmlake: { ...r.pmlake, extra: { level_updates_per_s: pRate } },
            baseline: { ...r.baseline, extra: { level_updates_per_s: bRate } },
            ratio: r.ratio,
            targets: [atLeast('≥2M level updates/s', pRate, 2_000_000)],
            notes: [
              `${Math.round(pRate)} level updates/s vs bare read_parquet ${Math.round(bRate)}/s; ${reps} round(s), no warm-up round`,
              `phases of the last round: ${top}`,
            ],
          },
        ];
      });
    },
  };
}
