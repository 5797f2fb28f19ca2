import path from 'node:path';
import { startTestRedis, type TestRedis } from '../../test/helpers/redis.js';
import { requestJson } from '../http.js';
import { NotAvailable, summarize, type BenchContext, type Sample, type Scenario, type ScenarioRow } from '../runner.js';
import { startPmlakeServer } from '../server.js';
import { atMost } from '../stats.js';
import { cpuMs, httpRounds, SEQUENTIAL, signed, spread } from './http-rounds.js';

/**
 * http-small-redis: what limits in Redis (PMLAKE_REDIS_URL) cost per request. The bench's own server (limits in
 * process) is the baseline; a second `pmlake serve` over the same lake and state counts its limits in a throwaway
 * loopback redis-server. Per round, each side gets: SEQUENTIAL requests of `GET /v1/markets/{id}` (a cache hit)
 * on one keep-alive connection — the per-request overhead at p50/p99, whose target is at most 1 ms — then the
 * http-small load (64 connections, a fresh key pool), whose req/s gives the ratio. The CPU time redis-server
 * spent per request is reported too. Rounds alternate sides so drift on the 2-core machine hits both alike
 * (./http-rounds.ts, shared with http-small-pg).
 */

export function httpSmallRedis(seconds: number): Scenario {
  return {
    name: 'http-small-redis',
    async run(ctx: BenchContext): Promise<ScenarioRow[]> {
      const marketId = ctx.lake.facts.busiestToken.marketId;
      if (!marketId) throw new NotAvailable('no market in the bench lake');
      let redis: TestRedis;
      try {
        redis = await startTestRedis();
      } catch (err) {
        throw new NotAvailable(`no redis-server (bash scripts/ensure-system-deps.sh installs it): ${(err as Error).message}`);
      }
      const srv = await startPmlakeServer({
        lakeDir: ctx.lake.lakeDir,
        stateDir: path.join(ctx.workDir, 'state'),
        env: { PMLAKE_REDIS_URL: redis.url },
        logFile: path.join(ctx.workDir, 'redis-server-pmlake.log'),
      });
      ctx.log(`http-small-redis: pmlake pid ${srv.pid} at ${srv.url}, redis-server pid ${redis.pid} on port ${redis.port}`);
      try {
        const memUrl = `${ctx.server.url}/v1/markets/${marketId}`;
        const redisUrl = `${srv.url}/v1/markets/${marketId}`;
        await requestJson(memUrl, ctx.key);
        await requestJson(redisUrl, ctx.key);
        // Both servers share the bench's state: the same keys work on either.
        const rounds = await httpRounds(
          ctx,
          seconds,
          [
            { name: 'redis', url: redisUrl, pid: srv.pid, newKeys: ctx.newKeys },
            { name: 'mem', url: memUrl, pid: ctx.server.pid, newKeys: ctx.newKeys },
          ],
          [{ name: 'redis', cpuMs: () => cpuMs(redis.pid) }],
        );
        const [p, b] = rounds.samples as [Sample[], Sample[]];
        const refused = rounds.refused;
        const ps = summarize(p);
        const bs = summarize(b);
        const x = (s: typeof ps, k: string) => s.extra?.[k] ?? Number.NaN;
        const overheadP50 = x(ps, 'seq_p50_ms') - x(bs, 'seq_p50_ms');
        const overheadP99 = x(ps, 'seq_p99_ms') - x(bs, 'seq_p99_ms');
        return [
          {
            scenario: 'http-small-redis',
            status: 'ok',
            pmlakeDoes: `GET /v1/markets/{id} with limits in Redis: ${SEQUENTIAL} sequential keep-alive requests, then ${seconds} s at 64 connections, per round`,
            baselineDoes: 'the same on the bench server, limits in process',
            rows: ps.rows ?? 0,
            pmlake: ps,
            baseline: bs,
            ratio: x(ps, 'rps') / x(bs, 'rps'),
            targets: [
              atMost('Redis limits add ≤1 ms per request at p50 (sequential, cache hit)', overheadP50, 1),
              atMost('no refused/failed requests', refused, 0),
            ],
            notes: [
              `sequential p50 ${x(ps, 'seq_p50_ms').toFixed(3)} ms (rounds ${spread(p, 'seq_p50_ms')}) vs ${x(bs, 'seq_p50_ms').toFixed(3)} ms (${spread(b, 'seq_p50_ms')}) in process: ${signed(overheadP50)} ms`,
              `sequential p99 ${x(ps, 'seq_p99_ms').toFixed(3)} ms (${spread(p, 'seq_p99_ms')}) vs ${x(bs, 'seq_p99_ms').toFixed(3)} ms (${spread(b, 'seq_p99_ms')}): ${signed(overheadP99)} ms`,
              `64 connections: ${x(ps, 'rps').toFixed(0)} vs ${x(bs, 'rps').toFixed(0)} req/s, p50 ${x(ps, 'p50_ms')} vs ${x(bs, 'p50_ms')} ms, p99 ${x(ps, 'p99_ms')} vs ${x(bs, 'p99_ms')} ms`,
              `redis-server CPU ${x(ps, 'redis_cpu_us_per_req').toFixed(1)} µs per request under load; non-2xx or errors: ${refused}`,
              'ratio is req/s with limits in Redis / in process; pmlake/baseline s are seconds per request (1/rate)',
            ],
          },
        ];
      } finally {
        await srv.stop();
        await redis.close();
      }
    },
  };
}
