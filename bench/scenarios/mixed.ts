import http from 'node:http';
import { qs, requestJson } from '../http.js';
import { peakTracker } from '../proc.js';
import { NotAvailable, type BenchContext, type Scenario, type ScenarioRow } from '../runner.js';
import { atMost, percentile } from '../stats.js';
import { addDays } from './common.js';

/**
 * mixed-load: 200 connections at once for some seconds, the crowd of issue 11 — market detail (cheap), pages of
 * the busiest market's trades (first and offset 1,000), the raw data-set catalogue and a month of 1h OHLCV.
 * Each connection is a closed loop (request, answer, next request) over keep-alive sockets. Reported per kind
 * and overall: market-detail p99 (target ≤100 ms: cheap lookups must not queue behind scans), the oldest request
 * (target ≤10 s), 503s (load shed, with Retry-After) and throughput. Not autocannon: it drops the requests still
 * in flight when its duration ends, which under overload are exactly the oldest ones (the first run measured
 * 0 completed trades pages and no "oldest" at all); here the loops stop starting requests at the end and every
 * started one is waited for (up to the 30 s client timeout of the issue's run) and counted. Each request takes
 * the next key of a pool (60 requests a minute per key), so the limiter stays on the path but refuses nothing.
 */
const CLIENT_TIMEOUT_MS = 30_000;

type Kind = { name: string; connections: number; paths: string[]; maxRps: number };
type Outcome = { name: string; requests: number; rps: number; p50: number; p99: number; max: number; s503: number; other: number; timeouts: number };

/** One GET: status (0 = client timeout, -1 = connection error) and milliseconds, body read and dropped. */
function get(url: string, agent: http.Agent, key: string): Promise<{ status: number; ms: number }> {
  const t0 = performance.now();
  return new Promise((resolve) => {
    const done = (status: number): void => resolve({ status, ms: performance.now() - t0 });
    const req = http.get(url, { agent, headers: { 'x-api-key': key } }, (res) => {
      res.resume();
      res.on('end', () => done(res.statusCode ?? -1));
      res.on('error', () => done(-1));
    });
    req.setTimeout(CLIENT_TIMEOUT_MS, () => {
      req.destroy();
      done(0);
    });
    req.on('error', () => done(-1));
  });
}

async function fire(base: string, kind: Kind, until: number, keys: string[]): Promise<Outcome> {
  const started = Date.now();
  const agent = new http.Agent({ keepAlive: true, maxSockets: kind.connections });
  const ms: number[] = [];
  const statuses = new Map<number, number>();
  let k = 0;
  const loop = async (c: number): Promise<void> => {
    for (let i = c; Date.now() < until; i++) {
      const r = await get(`${base}${kind.paths[i % kind.paths.length]!}`, agent, keys[k++ % keys.length]!);
      ms.push(r.status === 0 ? CLIENT_TIMEOUT_MS : r.ms);
      statuses.set(r.status, (statuses.get(r.status) ?? 0) + 1);
    }
  };
  await Promise.all(Array.from({ length: kind.connections }, (_, c) => loop(c)));
  agent.destroy();
  const count = (f: (s: number) => boolean): number => [...statuses].filter(([s]) => f(s)).reduce((n, [, c]) => n + c, 0);
  return {
    name: kind.name,
    requests: ms.length,
    // Over the whole run including the drain: requests started before the end are answered after it.
    rps: ms.length / ((Date.now() - started) / 1000),
    p50: Math.round(percentile(ms, 50)),
    p99: Math.round(percentile(ms, 99)),
    max: Math.round(Math.max(0, ...ms)),
    s503: count((s) => s === 503),
    timeouts: count((s) => s === 0),
    other: count((s) => s !== 0 && s !== 503 && (s < 200 || s >= 300)),
  };
}

export function mixedLoad(seconds: number): Scenario {
  return {
    name: 'mixed-load',
    async run(ctx: BenchContext): Promise<ScenarioRow[]> {
      const bm = ctx.lake.facts.busiestMarket;
      const bt = ctx.lake.facts.busiestToken;
      if (!bm.marketId || !bt.marketId) throw new NotAvailable('no market with trades in the bench lake');
      const end = addDays(`${bt.to.slice(0, 10)}T00:00:00.000Z`, 1);
      const ohlcv = `/v1/trades/ohlcv?${qs({ market_id: bt.marketId, outcome: bt.outcome, timeframe: '1h', start: addDays(end, -30), end, limit: 1000 })}`;
      const kinds: Kind[] = [
        { name: 'market-detail', connections: 50, paths: [`/v1/markets/${bm.marketId}`], maxRps: 8000 },
        {
          name: 'trades-pages',
          connections: 100,
          paths: [`/v1/trades?${qs({ market_id: bm.marketId, limit: 100, offset: 0 })}`, `/v1/trades?${qs({ market_id: bm.marketId, limit: 100, offset: 1000 })}`],
          maxRps: 3000,
        },
        { name: 'raw-datasets', connections: 20, paths: ['/v1/download/raw/datasets'], maxRps: 3000 },
        { name: 'ohlcv', connections: 30, paths: [ohlcv], maxRps: 3000 },
      ];
      for (const k of kinds) for (const p of k.paths) await requestJson(`${ctx.server.url}${p}`, ctx.key); // n/a if missing
      // At most 45 requests per key and round: a refused request would be a 429 in the mix, not a measurement.
      const pools = kinds.map((k) => ctx.newKeys(`mixed-${k.name}`, Math.ceil((k.maxRps * seconds) / 45)));
      const peak = peakTracker(ctx.server.pid);
      const t0 = Date.now();
      const out = await Promise.all(kinds.map((k, i) => fire(ctx.server.url, k, t0 + seconds * 1000, pools[i]!)));
      const wall = (Date.now() - t0) / 1000;
      const peakRss = peak.stop();
      const total = out.reduce((s, o) => s + o.requests, 0);
      const detail = out[0]!;
      const oldest = Math.max(...out.map((o) => o.max));
      const shed = out.reduce((s, o) => s + o.s503, 0);
      const timeouts = out.reduce((s, o) => s + o.timeouts, 0);
      const failed = out.reduce((s, o) => s + o.other, 0);
      const rps = total / wall;
      for (const o of out) ctx.log(`  ${o.name}: ${o.rps.toFixed(0)} req/s, p50 ${o.p50} ms, p99 ${o.p99} ms, max ${o.max} ms, 503 ${o.s503}, timeouts ${o.timeouts}, other ${o.other}`);
      return [
        {
          scenario: 'mixed-load',
          status: 'ok',
          pmlakeDoes: `${kinds.reduce((s, k) => s + k.connections, 0)} connections for ${seconds} s (then drained: ${wall.toFixed(1)} s): ${kinds.map((k) => `${k.name} ×${k.connections}`).join(', ')}`,
          baselineDoes: 'none (targets only)',
          rows: total,
          pmlake: { seconds: 1 / rps, samples: [wall], rows: total, peakRss, extra: { rps, detail_p99_ms: detail.p99, oldest_ms: oldest, s503: shed, timeouts } },
          targets: [
            atMost('market-detail p99 ≤100 ms', detail.p99, 100),
            atMost('oldest request ≤10 s', oldest / 1000, 10),
            atMost(`no request past the ${CLIENT_TIMEOUT_MS / 1000} s client timeout`, timeouts, 0),
          ],
          notes: [
            ...out.map((o) => `${o.name}: ${o.rps.toFixed(0)} req/s, p50 ${o.p50} ms, p99 ${o.p99} ms, max ${o.max} ms, 503 ${o.s503}, timeouts ${o.timeouts}, other non-2xx/errors ${o.other}`),
            `total ${rps.toFixed(0)} req/s; 503 (shed, Retry-After) ${shed}; other failures ${failed}; 'pmlake s' is seconds per request (1/rate)`,
          ],
        },
      ];
    },
  };
}
