import fs from 'node:fs';
import path from 'node:path';
import type { ItemCost, WorkerReport } from '../../ingest/queue/worker.js';
import { startTestPostgres } from '../../test/helpers/postgres.js';
import { NotAvailable, sideBySide, type BenchContext, type Sample, type Scenario, type ScenarioRow } from '../runner.js';
import { REPO, runToExit } from '../server.js';
import { atLeast } from '../stats.js';

/**
 * ingest-queue-2w: the same generated days (catalogue, fills and websocket JSONL, one queue item per file)
 * landed by two `pmlake ingest --worker` processes against one, each round into a fresh lake queued with
 * `pmlake ingest --queue` over a throwaway PostgreSQL (state and the lake's advisory lock). The ratio is one
 * worker's wall time over two workers'. The notes give the per-item costs the backfill projection is built from:
 * wall seconds per item, staging seconds (outside the lake lock), seconds under the lock (replay, merges,
 * publish), seconds waiting for the turn and the lock, level updates/s per worker. Target: two ≥ 1.6× one.
 */

const NAME = 'ingest-queue-2w';

async function queueInput(ctx: BenchContext, markets: number, days: number): Promise<string[]> {
  const dir = path.join(ctx.lake.dataDir, 'ingest-queue');
  const opts = `markets=${markets} days=${days} seed=${ctx.lake.gen.seed} busy=1 rate=1`;
  const marker = path.join(dir, '.bench-input');
  if (!fs.existsSync(marker) || fs.readFileSync(marker, 'utf8') !== opts) {
    fs.rmSync(dir, { recursive: true, force: true });
    ctx.log(`  generating the ${NAME} input (${opts})`);
    await runToExit(
      path.join(REPO, 'src/cli.ts'),
      ['generate', '--markets', String(markets), '--days', String(days), '--seed', String(ctx.lake.gen.seed), '--busy', '1', '--out', dir],
      { ...process.env },
      path.join(ctx.workDir, `generate-${NAME}.log`),
    );
    fs.writeFileSync(marker, opts);
  }
  return ['markets', 'fills', 'ws'].map((k) => path.join(dir, k));
}

type Round = { seconds: number; workers: WorkerReport[] };

export function ingestQueue(maxReps: number, markets: number, days: number): Scenario {
  return {
    name: NAME,
    async run(ctx: BenchContext): Promise<ScenarioRow[]> {
      const inputs = await queueInput(ctx, markets, days);
      const bytes = inputs.flatMap((d) => fs.readdirSync(d).map((f) => fs.statSync(path.join(d, f)).size)).reduce((a, b) => a + b, 0);
      const reps = Math.max(1, Math.min(ctx.reps, maxReps));
      let pg;
      try {
        pg = await startTestPostgres();
      } catch (err) {
        throw new NotAvailable(`no PostgreSQL for the queue: ${(err as Error).message.split('\n')[0]}`);
      }
      const rounds: Record<number, Round[]> = { 1: [], 2: [] };
      const cli = path.join(REPO, 'src/cli.ts');
      const log = path.join(ctx.workDir, `${NAME}.log`);
      let n = 0;
      const round = (workers: number) => async (): Promise<Sample> => {
        const lake = path.join(ctx.workDir, `${NAME}-lake-${(n += 1)}`);
        fs.rmSync(lake, { recursive: true, force: true });
        const env = { ...process.env, PMLAKE_LAKE: lake, PMLAKE_DATABASE_URL: pg.url, PMLAKE_STATE: path.join(lake, '_state'), LOG_LEVEL: 'warn' };
        try {
          await runToExit(cli, ['ingest', '--queue', ...inputs], env, log);
          const t0 = process.hrtime.bigint();
          const runs = await Promise.all(Array.from({ length: workers }, () => runToExit(cli, ['ingest', '--worker'], env, log)));
          const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
          const reports = runs.map((r) => JSON.parse(r.stdout) as WorkerReport);
          rounds[workers]!.push({ seconds, workers: reports });
          const levelUpdates = reports.reduce((s, r) => s + r.level_updates, 0);
          return { seconds, rows: levelUpdates, bytes, peakRss: Math.max(...runs.map((r) => r.peakRss)) };
        } finally {
          fs.rmSync(lake, { recursive: true, force: true });
        }
      };
      try {
        const r = await sideBySide(reps, round(2), round(1), { warmup: false });
        const notes = [1, 2].map((w) => describeCosts(w, rounds[w]!));
        const spread = (w: number): string => rounds[w]!.map((x) => x.seconds.toFixed(1)).join(', ');
        notes.push(`wall seconds per round: 1 worker ${spread(1)}; 2 workers ${spread(2)} (shared 2-core machine)`);
        return [
          {
            scenario: NAME,
            status: 'ok',
            pmlakeDoes: `2 queue workers land ${inputs.length} inputs' files (${(bytes / 1e6).toFixed(0)} MB) into a fresh lake`,
            baselineDoes: '1 queue worker lands the same queue',
            rows: r.pmlake.rows,
            pmlake: r.pmlake,
            baseline: r.baseline,
            ratio: r.ratio,
            targets: [atLeast('2 workers ≥1.6× one', r.ratio, 1.6)],
            notes,
          },
        ];
      } finally {
        await pg.close();
      }
    },
  };
}

/** Per-item costs over every round with `workers` workers (landed items only), overall and per format. */
function describeCosts(workers: number, rounds: Round[]): string {
  const costs = rounds.flatMap((r) => r.workers.flatMap((w) => w.costs)).filter((c) => c.outcome === 'landed');
  const perWorker = rounds.flatMap((r) => r.workers.map((w) => w.level_updates_per_second));
  const cpu = rounds.map((r) => r.workers.reduce((s, w) => s + w.cpu_seconds, 0).toFixed(0));
  const formats = [...new Set(costs.map((c) => c.handler))].map((h) => `${h.split(' ')[0]}: ${itemCosts(costs.filter((c) => c.handler === h))}`);
  return (
    `${workers} worker(s), per item ${itemCosts(costs)}; by format ${formats.join('; ')}; ` +
    `level updates/s per worker ${perWorker.map((v) => Math.round(v)).join(', ')}; CPU seconds per round (all workers) ${cpu.join(', ')}`
  );
}

function itemCosts(costs: ItemCost[]): string {
  const mean = (f: (c: ItemCost) => number): string => (costs.reduce((s, c) => s + f(c), 0) / Math.max(1, costs.length)).toFixed(2);
  return (
    `${mean((c) => c.seconds)} s wall, ${mean((c) => c.stage_seconds)} s staging (no lock), ${mean((c) => c.locked_seconds)} s under the lock, ` +
    `${mean((c) => c.turn_wait_seconds + c.lock_wait_seconds)} s waiting for turn and lock, ${mean((c) => c.level_updates)} level updates (${costs.length} items)`
  );
}
