import { requestJson } from '../http.js';
import { NotAvailable, summarize, type BenchContext, type Sample, type Scenario, type ScenarioRow, type SideSummary } from '../runner.js';
import { atLeast, atMost } from '../stats.js';
import { startBareExpress } from './http.js';
import { httpRounds, roundDiffs, SEQUENTIAL, signed, spread } from './http-rounds.js';
import { startPgReplica } from './pg-replica.js';

/**
 * http-small-pg: what a replica on PostgreSQL + Redis costs per request against the embedded default.
 * Three sides in the same run: a replica with its state in a throwaway PostgreSQL and its limits in a throwaway
 * redis-server (./pg-replica.ts), the bench's own server (embedded SQLite, limits in process) and the bare Express
 * route of http-small. Each round measures every side the way http-small-redis does (./http-rounds.ts):
 * SEQUENTIAL keep-alive requests of `GET /v1/markets/{id}` (a cache hit: the key's principal is cached, so the
 * request touches PostgreSQL only through the buffered key-touch and request-count writes, Redis once for the
 * limiter) — target: ≤1 ms added at p50 — then the http-small load at 64 connections. Rows: the replica against
 * the embedded server, and each of them against bare Express (req/s ratios). The CPU PostgreSQL (postmaster and
 * backends) and redis-server spend per request under load is reported.
 */
export function httpSmallPg(seconds: number): Scenario {
  return {
    name: 'http-small-pg',
    async run(ctx: BenchContext): Promise<ScenarioRow[]> {
      const marketId = ctx.lake.facts.busiestToken.marketId;
      if (!marketId) throw new NotAvailable('no market in the bench lake');
      const route = `/v1/markets/${marketId}`;
      const replica = await startPgReplica(ctx, 'http-small-pg');
      ctx.log(`http-small-pg: ${replica.describe}`);
      let bare: Awaited<ReturnType<typeof startBareExpress>> | null = null;
      try {
        const pgUrl = `${replica.server.url}${route}`;
        const memUrl = `${ctx.server.url}${route}`;
        await requestJson(memUrl, ctx.key);
        await requestJson(pgUrl, (await replica.newKeys('first', 1))[0]!);
        bare = await startBareExpress(ctx);
        const rounds = await httpRounds(
          ctx,
          seconds,
          [
            { name: 'pg', url: pgUrl, pid: replica.server.pid, newKeys: replica.newKeys },
            { name: 'mem', url: memUrl, pid: ctx.server.pid, newKeys: ctx.newKeys },
            { name: 'bare', url: `${bare.url}${route}`, pid: bare.pid, newKeys: null },
          ],
          [
            { name: 'postgres', cpuMs: replica.postgresCpuMs },
            { name: 'redis', cpuMs: replica.redisCpuMs },
          ],
        );
        const [p, m, b] = rounds.samples as [Sample[], Sample[], Sample[]];
        const ps = summarize(p);
        const ms = summarize(m);
        const bs = summarize(b);
        const x = (s: SideSummary, k: string) => s.extra?.[k] ?? Number.NaN;
        const overheadP50 = x(ps, 'seq_p50_ms') - x(ms, 'seq_p50_ms');
        const overheadP99 = x(ps, 'seq_p99_ms') - x(ms, 'seq_p99_ms');
        const pgVsMem = x(ps, 'rps') / x(ms, 'rps');
        const pgVsBare = x(ps, 'rps') / x(bs, 'rps');
        const memVsBare = x(ms, 'rps') / x(bs, 'rps');
        const seq = (s: SideSummary, samples: Sample[], k: 'seq_p50_ms' | 'seq_p99_ms') => `${x(s, k).toFixed(3)} ms (rounds ${spread(samples, k)})`;
        const load = (s: SideSummary, samples: Sample[]) =>
          `${x(s, 'rps').toFixed(0)} req/s (rounds ${spread(samples, 'rps', 0)}), p50 ${x(s, 'p50_ms')} ms, p99 ${x(s, 'p99_ms')} ms`;
        const notes = [
          `sequential p50: PostgreSQL+Redis ${seq(ps, p, 'seq_p50_ms')}, embedded ${seq(ms, m, 'seq_p50_ms')}, bare Express ${seq(bs, b, 'seq_p50_ms')}: ${signed(overheadP50)} ms over embedded (per round: ${roundDiffs(p, m, 'seq_p50_ms')})`,
          `sequential p99: PostgreSQL+Redis ${seq(ps, p, 'seq_p99_ms')}, embedded ${seq(ms, m, 'seq_p99_ms')}, bare Express ${seq(bs, b, 'seq_p99_ms')}: ${signed(overheadP99)} ms over embedded (per round: ${roundDiffs(p, m, 'seq_p99_ms')})`,
          `64 connections: PostgreSQL+Redis ${load(ps, p)}; embedded ${load(ms, m)}; bare Express ${load(bs, b)}`,
          `req/s ratios: PostgreSQL+Redis / embedded ${pgVsMem.toFixed(2)}×, PostgreSQL+Redis / bare Express ${pgVsBare.toFixed(2)}×, embedded / bare Express ${memVsBare.toFixed(2)}×`,
          `under load, per request: PostgreSQL CPU ${x(ps, 'postgres_cpu_us_per_req').toFixed(1)} µs (rounds ${spread(p, 'postgres_cpu_us_per_req', 1)}), redis-server CPU ${x(ps, 'redis_cpu_us_per_req').toFixed(1)} µs (counts and key touches are flushed every 2 s, so part of a load's lands in the next side's window); non-2xx or errors: ${rounds.refused}`,
          `key pool ${rounds.perRound} fresh keys per side per round, ≈${((ps.rows ?? Number.NaN) / rounds.perRound).toFixed(0)} loaded requests per key on the replica: the first request of each key resolves it from the state (a cache miss; on PostgreSQL 3 queries), the rest are hits`,
          'pmlake/baseline s are seconds per request (1/rate)',
        ];
        for (const n of notes) ctx.log(`http-small-pg: ${n}`);
        const does = (side: string) =>
          `GET /v1/markets/{id} on ${side}: ${SEQUENTIAL} sequential keep-alive requests, then ${seconds} s at 64 connections, per round`;
        const pgDoes = does('a replica with PostgreSQL state and Redis limits');
        const memDoes = does('the bench server (embedded SQLite state, limits in process)');
        const bareDoes = 'bare Express route returning a constant, measured the same way';
        const row = (scenario: string, pmlakeDoes: string, pmlake: SideSummary, baselineDoes: string, baseline: SideSummary, ratio: number) => ({
          scenario,
          status: 'ok' as const,
          pmlakeDoes,
          baselineDoes,
          rows: pmlake.rows ?? 0,
          pmlake,
          baseline,
          ratio,
        });
        return [
          {
            ...row('http-small-pg', pgDoes, ps, memDoes, ms, pgVsMem),
            targets: [
              atMost(`PostgreSQL state + Redis limits add ≤1 ms per request at p50 (sequential, cache hit): ${signed(overheadP50)} ms`, overheadP50, 1),
              atMost('no refused/failed requests', rounds.refused, 0),
            ],
            notes,
          },
          {
            ...row('http-small-pg (PG+Redis vs bare Express)', pgDoes, ps, bareDoes, bs, pgVsBare),
            targets: [atLeast('≥0.5× bare Express req/s', pgVsBare, 0.5)],
            notes: ['ratio is req/s of the PostgreSQL+Redis replica / bare Express'],
          },
          {
            ...row('http-small-pg (embedded vs bare Express)', memDoes, ms, bareDoes, bs, memVsBare),
            targets: [atLeast('≥0.5× bare Express req/s', memVsBare, 0.5)],
            notes: ['ratio is req/s of the embedded bench server / bare Express, same rounds as the replica'],
          },
        ];
      } finally {
        await bare?.stop();
        await replica.close();
      }
    },
  };
}
