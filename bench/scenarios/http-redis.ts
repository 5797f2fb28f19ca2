import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { startTestRedis, type TestRedis } from '../../test/helpers/redis.js';
import { requestJson } from '../http.js';
import { peakTracker } from '../proc.js';
import { NotAvailable, summarize, type BenchContext, type Sample, type Scenario, type ScenarioRow } from '../runner.js';
import { startPmlakeServer } from '../server.js';
import { atMost } from '../stats.js';
import { cannon } from './http.js';

/**
 * http-small-redis: what limits in Redis (PMLAKE_REDIS_URL) cost per request. The bench's own server (limits in
 * process) is the baseline; a second `pmlake serve` over the same lake and state counts its limits in a throwaway
 * loopback redis-server. Per round, each side gets: SEQUENTIAL requests of `GET /v1/markets/{id}` (a cache hit)
 * on one keep-alive connection — the per-request overhead at p50/p99, which the issue bounds at 1 ms — then the
 * http-small load (64 connections, a fresh key pool), whose req/s gives the ratio. The CPU time redis-server
 * spent per request is reported too. Rounds alternate sides so drift on the 2-core machine hits both alike.
 */
const SEQUENTIAL = 500;

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
      const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
      try {
        const memUrl = `${ctx.server.url}/v1/markets/${marketId}`;
        const redisUrl = `${srv.url}/v1/markets/${marketId}`;
        await requestJson(memUrl, ctx.key);
        await requestJson(redisUrl, ctx.key);
        // Warm-up of both (JIT, connections, the script cache), which also sizes the key pool as http-small does.
        const warm = await cannon(redisUrl, Math.min(3, seconds), await ctx.newKeys('redis-warm', 400));
        await cannon(memUrl, Math.min(3, seconds), await ctx.newKeys('mem-warm', 400));
        const perRound = Math.ceil((Math.max(warm.rps * 3, 3000) * seconds) / 45);
        const p: Sample[] = [];
        const b: Sample[] = [];
        let refused = 0;
        for (let rep = 0; rep < ctx.reps; rep++) {
          const sides = [
            { url: redisUrl, pid: srv.pid, out: p },
            { url: memUrl, pid: ctx.server.pid, out: b },
          ];
          for (const side of rep % 2 ? sides.reverse() : sides) {
            const seq = await sequential(agent, side.url, await ctx.newKeys(`seq-${rep}`, Math.ceil(SEQUENTIAL / 40)));
            const peak = peakTracker(side.pid);
            const redisCpu0 = cpuMs(redis.pid);
            const load = await cannon(side.url, seconds, await ctx.newKeys(`load-${rep}`, perRound));
            const redisCpuUs = ((cpuMs(redis.pid) - redisCpu0) * 1000) / Math.max(1, load.requests);
            refused += seq.bad + load.non2xx + load.errors;
            side.out.push({
              seconds: 1 / load.rps,
              rows: load.requests,
              peakRss: peak.stop(),
              extra: {
                rps: load.rps,
                p50_ms: load.p50,
                p99_ms: load.p99,
                seq_p50_ms: seq.p50,
                seq_p99_ms: seq.p99,
                redis_cpu_us_per_req: redisCpuUs,
              },
            });
          }
        }
        const ps = summarize(p);
        const bs = summarize(b);
        const x = (s: typeof ps, k: string) => s.extra?.[k] ?? Number.NaN;
        const overheadP50 = x(ps, 'seq_p50_ms') - x(bs, 'seq_p50_ms');
        const overheadP99 = x(ps, 'seq_p99_ms') - x(bs, 'seq_p99_ms');
        const spread = (samples: Sample[], k: string) => {
          const v = samples.map((s) => s.extra?.[k] ?? Number.NaN);
          return `${Math.min(...v).toFixed(3)}–${Math.max(...v).toFixed(3)}`;
        };
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
              `sequential p50 ${x(ps, 'seq_p50_ms').toFixed(3)} ms (rounds ${spread(p, 'seq_p50_ms')}) vs ${x(bs, 'seq_p50_ms').toFixed(3)} ms (${spread(b, 'seq_p50_ms')}) in process: +${overheadP50.toFixed(3)} ms`,
              `sequential p99 ${x(ps, 'seq_p99_ms').toFixed(3)} ms (${spread(p, 'seq_p99_ms')}) vs ${x(bs, 'seq_p99_ms').toFixed(3)} ms (${spread(b, 'seq_p99_ms')}): +${overheadP99.toFixed(3)} ms`,
              `64 connections: ${x(ps, 'rps').toFixed(0)} vs ${x(bs, 'rps').toFixed(0)} req/s, p50 ${x(ps, 'p50_ms')} vs ${x(bs, 'p50_ms')} ms, p99 ${x(ps, 'p99_ms')} vs ${x(bs, 'p99_ms')} ms`,
              `redis-server CPU ${x(ps, 'redis_cpu_us_per_req').toFixed(1)} µs per request under load; non-2xx or errors: ${refused}`,
              'ratio is req/s with limits in Redis / in process; pmlake/baseline s are seconds per request (1/rate)',
            ],
          },
        ];
      } finally {
        agent.destroy();
        await srv.stop();
        await redis.close();
      }
    },
  };
}

/** `n` requests one after another on one keep-alive connection, keys rotating; latency quantiles in ms. */
async function sequential(agent: http.Agent, url: string, keys: string[], n = SEQUENTIAL): Promise<{ p50: number; p99: number; bad: number }> {
  const lat: number[] = [];
  let bad = 0;
  for (let i = 0; i < n; i++) {
    const t = process.hrtime.bigint();
    const status = await new Promise<number>((resolve, reject) => {
      http
        .get(url, { agent, headers: { 'x-api-key': keys[i % keys.length]! } }, (res) => {
          res.resume();
          res.on('end', () => resolve(res.statusCode ?? 0));
        })
        .on('error', reject);
    });
    lat.push(Number(process.hrtime.bigint() - t) / 1e6);
    if (status !== 200) bad++;
  }
  lat.sort((a, b) => a - b);
  return { p50: lat[Math.floor(n * 0.5)]!, p99: lat[Math.min(n - 1, Math.floor(n * 0.99))]!, bad };
}

/** User + system CPU time of a process so far, in ms (NaN when it cannot be read); Linux's 100 clock ticks a second. */
function cpuMs(pid: number | undefined): number {
  try {
    const fields = fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
    return ((Number(fields[11]) + Number(fields[12])) * 1000) / 100;
  } catch {
    return Number.NaN;
  }
}
