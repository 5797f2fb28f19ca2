import { versionSources } from '../../src/lake/sources.js';
import { currentVersion } from '../../src/lake/versions.js';
import { l2LevelsDownload } from '../../src/query/downloads.js';
import path from 'node:path';
import { requestJson } from '../http.js';
import { peakTracker } from '../proc.js';
import { NotAvailable, sideBySide, type BenchContext, type Sample, type Scenario, type ScenarioRow } from '../runner.js';
import { atLeast } from '../stats.js';
import { baselineCopy, withBaselineDb } from './common.js';

/**
 * export-l2-month: `POST /v1/exports` of a month of the busiest market's normalized L2 tape as Parquet into the
 * S3-compatible server (s3rver on loopback), timed from submit until a poll sees `succeeded`, against DuckDB
 * `COPY` of the same query (pmlake's own builder) to a local Parquet file. Target: ≥0.8× the COPY throughput.
 * Polls run every 100 ms over a pool of the user's keys (60 requests/min/key).
 */
type Job = { id: string; status: string; record_count: number | null; size_bytes: number | null; error: string | null };

const RAW_L2 = 'polymarket:l2-delta-tape';

function monthWindow(month: string, from: string, to: string): { start: string; end: string } {
  const [y, m] = month.split('-').map(Number) as [number, number];
  const start = new Date(Date.UTC(y, m - 1, 1));
  const end = new Date(Date.UTC(y, m, 1));
  // Clip to the data so a partial first or last month is not padded with nothing.
  const s = new Date(Math.max(start.getTime(), Date.parse(from.slice(0, 10))));
  const e = new Date(Math.min(end.getTime(), Date.parse(to.slice(0, 10)) + 86_400_000));
  return { start: s.toISOString(), end: e.toISOString() };
}

export const exportL2Month: Scenario = {
  name: 'export-l2-month',
  async run(ctx: BenchContext): Promise<ScenarioRow[]> {
    const b = ctx.lake.facts.busiestL2;
    if (!b.assetId || !b.marketId || !b.month) throw new NotAvailable('no L2 tape in the bench lake');
    const { start, end } = monthWindow(b.month, b.from, b.to);
    const lake = versionSources(currentVersion(ctx.lake.lakeDir));
    const q = l2LevelsDownload(lake, b.conditionId, { start: BigInt(Date.parse(start)) * 1000n, end: BigInt(Date.parse(end)) * 1000n }, null, 'parquet');
    let round = 0;

    const pmlake = async (): Promise<Sample> => {
      const keys = await ctx.newKeys('export', 40);
      let k = 0;
      const key = (): string => keys[k++ % keys.length]!;
      const peak = peakTracker(ctx.server.pid);
      const t0 = process.hrtime.bigint();
      const submitted = await requestJson<Job>(`${ctx.server.url}/v1/exports`, key(), {
        method: 'POST',
        body: {
          kind: 'raw',
          series_id: RAW_L2,
          market_id: b.marketId,
          shape: 'normalized',
          start,
          end,
          format: 'parquet',
          idempotency_key: `bench-${Date.now()}-${round++}`,
        },
      });
      let job = submitted.json;
      while (job.status !== 'succeeded') {
        if (job.status === 'failed' || job.status === 'expired') throw new Error(`export ${job.id} ${job.status}: ${job.error ?? ''}`);
        await new Promise((r) => setTimeout(r, 100));
        job = (await requestJson<Job>(`${ctx.server.url}/v1/exports/${job.id}`, key())).json;
      }
      const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
      return { seconds, rows: job.record_count ?? 0, bytes: job.size_bytes ?? 0, peakRss: peak.stop() };
    };

    return withBaselineDb(async (db) => {
      const file = path.join(ctx.workDir, 'export-baseline.parquet');
      const r = await sideBySide(
        Math.min(ctx.reps, 3),
        pmlake,
        () => baselineCopy(db, q.sql, { ...q.params }, file, 'FORMAT parquet, COMPRESSION zstd, ROW_GROUP_SIZE 122880'),
        { warmup: true },
      );
      return [
        {
          scenario: 'export-l2-month',
          status: 'ok',
          pmlakeDoes: `POST /v1/exports raw L2 normalized parquet ${start.slice(0, 10)}..${end.slice(0, 10)} → S3 (s3rver), poll until succeeded`,
          baselineDoes: 'DuckDB COPY of the same query to a local Parquet file',
          rows: r.pmlake.rows ?? 0,
          pmlake: r.pmlake,
          baseline: r.baseline,
          ratio: r.ratio,
          targets: [atLeast('≥0.8× DuckDB COPY throughput', r.ratio, 0.8)],
          notes: [`market ${b.marketId} (${b.conditionId.slice(0, 10)}…), month ${b.month}; baseline rows ${r.baseline.rows}`],
        },
      ];
    });
  },
};
