import path from 'node:path';
import autocannon from 'autocannon';
import { requestJson } from '../http.js';
import { peakTracker } from '../proc.js';
import { NotAvailable, summarize, type BenchContext, type Sample, type Scenario, type ScenarioRow } from '../runner.js';
import { REPO, spawnUntil, stopChild } from '../server.js';
import { atLeast, atMost } from '../stats.js';

/**
 * http-small: `GET /v1/markets/{id}` at 64 concurrent connections with autocannon, against a bare Express
 * route returning a constant. pmlake limits every key to 60 requests a minute, so the load rotates over a
 * pool of keys (fresh ones each round, sized from the rate seen in the warm-up) — the limiter, key lookup and
 * request accounting stay on the measured path, but no request is refused. Non-2xx answers are counted and
 * reported; any at all marks the row.
 */
const CONNECTIONS = 64;

export type Run = { rps: number; p50: number; p99: number; non2xx: number; errors: number; requests: number; seconds: number };

export async function cannon(url: string, seconds: number, keys: string[] | null): Promise<Run> {
  let i = 0;
  const result = await autocannon({
    url,
    connections: CONNECTIONS,
    duration: seconds,
    pipelining: 1,
    ...(keys
      ? {
          requests: [
            {
              setupRequest: (req: autocannon.Request) => {
                req.headers = { ...(req.headers ?? {}), 'x-api-key': keys[i++ % keys.length]! };
                return req;
              },
            },
          ],
        }
      : {}),
  });
  return {
    rps: result.requests.average,
    p50: result.latency.p50,
    p99: result.latency.p99,
    non2xx: result.non2xx,
    errors: result.errors + result.timeouts,
    requests: result.requests.total,
    seconds,
  };
}

/**
 * The bare-Express baseline (bench/bare-express.ts) as a child process, started with the server's Node flags:
 * `url` is its origin; it serves `GET /v1/markets/:id` with a constant and ignores any key.
 */
export async function startBareExpress(ctx: BenchContext): Promise<{ url: string; pid: number; stop(): Promise<void> }> {
  const bare = await spawnUntil(
    path.join(REPO, 'bench/bare-express.ts'),
    [],
    { ...process.env },
    /listening on (http:\/\/\S+)/,
    path.join(ctx.workDir, 'bare-express.log'),
  );
  return { url: bare.match[1]!, pid: bare.child.pid!, stop: () => stopChild(bare.child) };
}

export function httpSmall(seconds: number): Scenario {
  return {
    name: 'http-small',
    async run(ctx: BenchContext): Promise<ScenarioRow[]> {
      const marketId = ctx.lake.facts.busiestToken.marketId;
      if (!marketId) throw new NotAvailable('no market in the bench lake');
      const url = `${ctx.server.url}/v1/markets/${marketId}`;
      await requestJson(url, ctx.key); // n/a if the route is missing

      const bare = await startBareExpress(ctx);
      const bareUrl = `${bare.url}/v1/markets/${marketId}`;
      try {
        // Warm-up of both (JIT, connection setup), which also gives the rate the key pool must cover.
        const warm = await cannon(url, Math.min(3, seconds), await ctx.newKeys('http-warm', 400));
        await cannon(bareUrl, Math.min(3, seconds), null);
        // 60 requests per key per minute: plan for 3× the warm-up's rate (later rounds run faster, warmer) and
        // at most 45 requests per key. Keys are cheap; a refused request would spoil the round.
        const perRound = Math.ceil((Math.max(warm.rps * 3, 3000) * seconds) / 45);
        const p: Sample[] = [];
        const b: Sample[] = [];
        let refused = 0;
        for (let rep = 0; rep < ctx.reps; rep++) {
          const keys = await ctx.newKeys(`http-r${rep}`, perRound);
          const peak = peakTracker(ctx.server.pid);
          const pr = await cannon(url, seconds, keys);
          const pPeak = peak.stop();
          const bPeak = peakTracker(bare.pid);
          const br = await cannon(bareUrl, seconds, null);
          refused += pr.non2xx + pr.errors;
          p.push({
            seconds: 1 / pr.rps,
            rows: pr.requests,
            peakRss: pPeak,
            extra: { rps: pr.rps, p50_ms: pr.p50, p99_ms: pr.p99, non2xx: pr.non2xx + pr.errors },
          });
          b.push({
            seconds: 1 / br.rps,
            rows: br.requests,
            peakRss: bPeak.stop(),
            extra: { rps: br.rps, p50_ms: br.p50, p99_ms: br.p99, non2xx: br.non2xx + br.errors },
          });
        }
        const ps = summarize(p);
        const bs = summarize(b);
        const rpsRatio = (ps.extra!.rps ?? Number.NaN) / (bs.extra!.rps ?? Number.NaN);
        return [
          {
            scenario: 'http-small',
            status: 'ok',
            pmlakeDoes: `GET /v1/markets/{id}, ${CONNECTIONS} connections, ${seconds} s per round`,
            baselineDoes: 'bare Express route returning a constant',
            rows: ps.rows ?? 0,
            pmlake: ps,
            baseline: bs,
            ratio: rpsRatio,
            targets: [
              atLeast('≥0.5× bare Express req/s', rpsRatio, 0.5),
              atMost('p99 < 20 ms', ps.extra!.p99_ms ?? Number.NaN, 20 - 1e-9),
              atMost('no refused/failed requests', refused, 0),
            ],
            notes: [
              `pmlake ${ps.extra!.rps!.toFixed(0)} req/s p50 ${ps.extra!.p50_ms} ms p99 ${ps.extra!.p99_ms} ms; bare ${bs.extra!.rps!.toFixed(0)} req/s p50 ${bs.extra!.p50_ms} ms p99 ${bs.extra!.p99_ms} ms`,
              `key pool of ${perRound} keys per round (60 requests/min/key limit); non-2xx or errors: ${refused}`,
              "'rows' is requests per round; pmlake/baseline s are seconds per request (1/rate)",
            ],
          },
        ];
      } finally {
        await bare.stop();
      }
    },
  };
}
