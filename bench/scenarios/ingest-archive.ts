import fs from 'node:fs';
import path from 'node:path';
import { sqlString } from '../../src/lake/duckdb.js';
import { captureRows, writeArchiveFile } from '../../ingest/generate/archive.js';
import { NotAvailable, sideBySide, type BenchContext, type Sample, type Scenario, type ScenarioRow } from '../runner.js';
import { peakTracker } from '../proc.js';
import { REPO, runToExit } from '../server.js';
import { atLeast } from '../stats.js';
import { withBaselineDb } from './common.js';

/**
 * ingest-archive: `runIngest` of one file in the public archive's v2 layout (ingest/archive/), built from the
 * bench lake's whole generated tape (every day of its ws/ input, ingest/generate/archive.ts), into a fresh lake —
 * stage, derive books / top of book / checkpoints / coverage, write partitions — against DuckDB's bare scan of the
 * same file into a table. Both rates are level updates per second of the same file.
 * Target: ≥2,000,000 level updates/s (a venue hour of ≈25M in ≤15 s).
 */

/** The archive file, cached next to the bench data (rebuilt when the tape's day files change). */
async function archiveInput(ctx: BenchContext): Promise<{ file: string; rows: number }> {
  const wsDir = path.join(ctx.lake.dataDir, 'ws');
  if (!fs.existsSync(wsDir)) throw new NotAvailable('the bench data has no ws/ tape');
  const days = fs
    .readdirSync(wsDir)
    .filter((n) => n.endsWith('.jsonl'))
    .sort()
    .map((n) => path.join(wsDir, n));
  const dir = path.join(ctx.lake.dataDir, 'ingest-archive');
  const file = path.join(dir, 'polymarket_orderbook_bench.parquet');
  const marker = path.join(dir, '.bench-input');
  const key = days.map((d) => `${path.basename(d)}:${fs.statSync(d).size}`).join(',');
  if (fs.existsSync(file) && fs.existsSync(marker)) {
    const [k, n] = fs.readFileSync(marker, 'utf8').split('\n');
    if (k === key) return { file, rows: Number(n) };
  }
  fs.rmSync(dir, { recursive: true, force: true });
  fs.mkdirSync(dir, { recursive: true });
  ctx.log(`  writing the ingest-archive input from ${days.length} day(s) of tape`);
  const rows = await writeArchiveFile(captureRows(days), file);
  fs.writeFileSync(marker, `${key}\n${rows}`);
  return { file, rows };
}

export function ingestArchive(maxReps: number): Scenario {
  return {
    name: 'ingest-archive',
    async run(ctx: BenchContext): Promise<ScenarioRow[]> {
      const { file, rows } = await archiveInput(ctx);
      const bytes = fs.statSync(file).size;
      const reps = Math.max(1, Math.min(ctx.reps, maxReps));
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
            pmlakeDoes: `runIngest of one archive-layout file (${rows} rows, ${(bytes / 1e6).toFixed(0)} MB) into a fresh lake`,
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
