import { checkStatus, qs, request } from '../http.js';
import { peakTracker } from '../proc.js';
import { NotAvailable, QUERY_ROUNDS, queryReps, sideBySide, timed, type BenchContext, type Sample, type Scenario, type ScenarioRow } from '../runner.js';
import type { ChildServer } from '../server.js';
import { roundDiffs, signed, spread } from './http-rounds.js';
import { itemsFor, ONE_M } from './downloads.js';
import { startPgReplica } from './pg-replica.js';

/**
 * download-csv-1m-pg: download-csv-1m's request — `GET /v1/download/trades` of the busiest market as
 * CSV, up to 1M rows — sent to a replica on PostgreSQL + Redis (./pg-replica.ts), against the same download from
 * the bench's own server (embedded SQLite, limits in process) in the same run. Every download passes the download
 * rate limit and burst (Redis on the replica) and the usage meter (a PostgreSQL transaction at the start, another
 * at the end), so the difference is the meter path's; the DuckDB work and the bytes are the same on both sides.
 * Both servers start fresh. A key serves up to PER_KEY downloads (the Professional plan allows 20 a minute), so after
 * the warm-up the key lookup is a cache hit on both sides, as on a client's repeated pulls. The rounds are
 * the short queries' (QUERY_ROUNDS): the meter's difference is small beside a whole download's time.
 */
// Downloads per key (one user each): three warm-ups and 15 rounds, under the plan's 20 a minute.
const PER_KEY = 18;

export const downloadCsv1mPg: Scenario = {
  name: 'download-csv-1m-pg',
  async run(ctx: BenchContext): Promise<ScenarioRow[]> {
    if (ctx.lake.facts.topMarkets.length === 0) throw new NotAvailable('no trades in the bench lake');
    const item = itemsFor(ctx, ONE_M)[0]!;
    const query = `/v1/download/trades?${qs({ market_id: item.marketId, format: 'csv', limit: item.limit })}`;
    // A fresh bench server, like download-csv-1m's: neither side inherits memory or caches from earlier scenarios.
    await ctx.restartServer();
    const replica = await startPgReplica(ctx, 'download-csv-1m-pg');
    ctx.log(`download-csv-1m-pg: ${replica.describe}`);
    try {
      const keys = (newKeys: (label: string, n: number) => Promise<string[]>) => {
        let n = 0;
        let key = '';
        return async (): Promise<string> => {
          if (n++ % PER_KEY === 0) key = (await newKeys('dl-csv', 1))[0]!;
          return key;
        };
      };
      const download = (server: () => ChildServer, nextKey: () => Promise<string>) => async (): Promise<Sample> => {
        const url = `${server().url}${query}`;
        const key = await nextKey();
        const peak = peakTracker(server().pid);
        const pg0 = replica.postgresCpuMs();
        const { seconds, value } = await timed(() => request(url, { headers: { 'x-api-key': key } }));
        checkStatus(url, value);
        return { seconds, rows: item.limit, bytes: value.bytes, peakRss: peak.stop(), extra: { postgres_cpu_ms: replica.postgresCpuMs() - pg0 } };
      };
      const pg = download(() => replica.server, keys(replica.newKeys));
      const mem = download(() => ctx.server, keys(ctx.newKeys));
      // Samples are kept as well as summarised: the notes give each side's spread over the rounds.
      const ps: Sample[] = [];
      const ms: Sample[] = [];
      const keep = (out: Sample[], f: () => Promise<Sample>) => async (rep: number) => {
        const s = await f();
        if (rep >= 0) out.push({ ...s, extra: { ...s.extra, ms: s.seconds * 1000, mb_per_s: s.bytes! / 1e6 / s.seconds } });
        return s;
      };
      // The meter's cost is small beside a whole download's: the short-query rounds (three warm-ups, ≥15 measured).
      const r = await sideBySide(queryReps(ctx.reps), keep(ps, pg), keep(ms, mem), { warmups: QUERY_ROUNDS.warmups });
      const meterMs = (r.pmlake.seconds - r.baseline.seconds) * 1000;
      const notes = [
        `market ${item.marketId}, ${item.limit} rows, ${((r.pmlake.bytes ?? 0) / 1e6).toFixed(1)} MB of CSV`,
        `PostgreSQL+Redis replica ${r.pmlake.seconds.toFixed(3)} s, ${r.pmlake.mbPerSec?.toFixed(1)} MB/s (rounds ${spread(ps, 'mb_per_s', 1)}); embedded ${r.baseline.seconds.toFixed(3)} s, ${r.baseline.mbPerSec?.toFixed(1)} MB/s (rounds ${spread(ms, 'mb_per_s', 1)}); difference ${signed(meterMs, 1)} ms per download (per round, ms: ${roundDiffs(ps, ms, 'ms', 1)})`,
        `PostgreSQL CPU per download (mean over the rounds; 10 ms ticks): ${meanCpu(ps)} ms during the replica's, ${meanCpu(ms)} ms during the embedded server's (the idle floor); peak RSS replica ${mib(r.pmlake.peakRss)} MiB, embedded ${mib(r.baseline.peakRss)} MiB`,
        'ratio = embedded s / replica s (above 1: the replica faster)',
      ];
      for (const n of notes) ctx.log(`download-csv-1m-pg: ${n}`);
      return [
        {
          scenario: 'download-csv-1m-pg',
          status: 'ok',
          pmlakeDoes: `GET /v1/download/trades format=csv limit=${item.limit} on a replica with PostgreSQL state and Redis limits`,
          baselineDoes: 'the same download from the bench server (embedded SQLite state, limits in process)',
          rows: r.pmlake.rows ?? 0,
          pmlake: r.pmlake,
          baseline: r.baseline,
          ratio: r.ratio,
          targets: [],
          notes,
        },
      ];
    } finally {
      await replica.close();
    }
  },
};

function meanCpu(samples: Sample[]): string {
  return (samples.reduce((t, s) => t + (s.extra?.postgres_cpu_ms ?? Number.NaN), 0) / samples.length).toFixed(1);
}

function mib(b: number | undefined): string {
  return b === undefined ? '?' : (b / 2 ** 20).toFixed(0);
}
