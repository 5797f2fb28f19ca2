import fs from 'node:fs';
import path from 'node:path';
import { sqlString } from '../../src/lake/duckdb.js';
import { NotAvailable, sideBySide, type BenchContext, type Sample, type Scenario, type ScenarioRow } from '../runner.js';
import { peakTracker } from '../proc.js';
import { REPO, runToExit } from '../server.js';
import { atLeast } from '../stats.js';
import { withBaselineDb } from './common.js';

/**
 * ingest-ws: `runIngest` of one day of generated websocket JSONL (see wsInput) into a
 * fresh lake — parse, normalise, derive books / top of book, write partitions — against DuckDB's bare
 * `read_json` of the same file into a table. Both rates are level updates per second of the same file.
 * Targets: ≥0.5× the read_json rate and ≥500,000 level updates/s.
 */

/**
 * The input: one day of websocket JSONL from the generator, made for this scenario (and cached next to the
 * bench data) so its size does not depend on how thin the lake's own days are: `markets` long-running and
 * short markets at the generator's default activity. Returns the ws file of that day.
 */
export async function wsInput(ctx: BenchContext, markets: number): Promise<string> {
  const dir = path.join(ctx.lake.dataDir, 'ingest-ws');
  const opts = `markets=${markets} days=1 seed=${ctx.lake.gen.seed} busy=1 rate=1`;
  const marker = path.join(dir, '.bench-input');
  const wsDir = path.join(dir, 'ws');
  const existing = (): string | null => {
    if (!fs.existsSync(marker) || fs.readFileSync(marker, 'utf8') !== opts || !fs.existsSync(wsDir)) return null;
    const f = fs.readdirSync(wsDir).find((n) => n.endsWith('.jsonl'));
    return f ? path.join(wsDir, f) : null;
  };
  const have = existing();
  if (have) return have;
  fs.rmSync(dir, { recursive: true, force: true });
  ctx.log(`  generating the ingest-ws input (${opts})`);
  await runToExit(
    path.join(REPO, 'src/cli.ts'),
    ['generate', '--markets', String(markets), '--days', '1', '--seed', String(ctx.lake.gen.seed), '--busy', '1', '--out', dir],
    { ...process.env },
    path.join(ctx.workDir, 'generate-ingest-ws.log'),
  );
  fs.writeFileSync(marker, opts);
  const f = existing();
  if (!f) throw new NotAvailable('the generator wrote no websocket JSONL');
  return f;
}

export function ingestWs(maxReps: number, markets: number): Scenario {
  return {
    name: 'ingest-ws',
    async run(ctx: BenchContext): Promise<ScenarioRow[]> {
      const file = await wsInput(ctx, markets);
      const bytes = fs.statSync(file).size;
      const reps = Math.max(1, Math.min(ctx.reps, maxReps));
      let levelUpdates = 0;
      const pmlake = async (rep: number): Promise<Sample> => {
        const lake = path.join(ctx.workDir, `ingest-lake-${rep + 1}`);
        fs.rmSync(lake, { recursive: true, force: true });
        try {
          const r = await runToExit(path.join(REPO, 'bench/ingest-child.ts'), [lake, file], { ...process.env }, path.join(ctx.workDir, 'ingest-ws.log'));
          const line = r.stdout.trim().split('\n').pop() ?? '{}';
          const out = JSON.parse(line) as { seconds: number; level_updates: number; failed: number };
          if (out.failed > 0) throw new Error(`ingest of ${path.basename(file)} failed; see ${path.join(ctx.workDir, 'ingest-ws.log')}`);
          levelUpdates = out.level_updates;
          return { seconds: out.seconds, rows: out.level_updates, bytes, peakRss: r.peakRss };
        } finally {
          fs.rmSync(lake, { recursive: true, force: true });
        }
      };
      return withBaselineDb(async (db) => {
        const baseline = async (): Promise<Sample> => {
          const conn = await db.connect();
          try {
            await conn.run('DROP TABLE IF EXISTS ws_bare');
            const peak = peakTracker('self');
            const t0 = process.hrtime.bigint();
            // sample_size = -1: the schema must cover every message type; rare ones (tick_size_change) appear
            // after the default 20,480-record sample and would otherwise fail the read.
            const res = await conn.run(`CREATE TABLE ws_bare AS SELECT * FROM read_json(${sqlString(file)}, format = 'newline_delimited', sample_size = -1)`);
            const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
            void res;
            return { seconds, rows: levelUpdates || undefined, bytes, peakRss: peak.stop() } as Sample;
          } finally {
            await conn.run('DROP TABLE IF EXISTS ws_bare').catch(() => undefined);
            conn.closeSync();
          }
        };
        // Ingest is the slow side and a whole day per round: no extra warm-up round for it.
        const r = await sideBySide(reps, pmlake, baseline, { warmup: false });
        const pRate = levelUpdates / r.pmlake.seconds;
        const bRate = levelUpdates / r.baseline.seconds;
        return [
          {
            scenario: 'ingest-ws',
            status: 'ok',
            pmlakeDoes: `runIngest of ${path.basename(file)} (${(bytes / 1e6).toFixed(0)} MB) into a fresh lake`,
            baselineDoes: 'DuckDB: CREATE TABLE AS SELECT * FROM read_json(file)',
            rows: levelUpdates,
            pmlake: { ...r.pmlake, extra: { level_updates_per_s: pRate } },
            baseline: { ...r.baseline, extra: { level_updates_per_s: bRate } },
            ratio: r.ratio,
            targets: [atLeast('≥0.5× bare read_json', r.ratio, 0.5), atLeast('≥500k level updates/s', pRate, 500_000)],
            notes: [`${Math.round(pRate)} level updates/s vs read_json ${Math.round(bRate)}/s; ${reps} round(s), no warm-up round`],
          },
        ];
      });
    },
  };
}
