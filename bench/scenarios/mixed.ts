import path from 'node:path';
import { qs, requestJson } from '../http.js';
import { peakTracker } from '../proc.js';
import { NotAvailable, type BenchContext, type Scenario, type ScenarioRow } from '../runner.js';
import { atMost, percentile } from '../stats.js';
import { startPmlakeServer } from '../server.js';
import { addDays } from './common.js';
import { Connection } from './load-client.js';

/**
 * mixed-load: 200 connections at once for some seconds, a crowd of clients — market detail (cheap), pages of
 * the busiest market's trades (first and offset 1,000), the raw data-set catalogue and a month of 1h OHLCV.
 * Each connection is a closed loop (request, answer, next request) over keep-alive sockets. Reported per kind
 * and overall: market-detail p99 (target ≤100 ms: cheap lookups must not queue behind scans), the oldest request
 * (target ≤10 s), 503s (load shed, with Retry-After) and throughput. Not autocannon: it drops the requests still
 * in flight when its duration ends, which under overload are exactly the oldest ones; here the loops stop
 * starting requests at the end and every started one is waited for (up to the client timeout) and counted.
 *
 * The scenario runs its own server with PMLAKE_RATE_LIMITS=off and one key per connection, like a crowd of
 * clients: closed loops ask far more than 60 requests a minute per key, and rotating thousands of fresh keys
 * instead would make the server spend much of its time on first-use key lookups and last_used_at writes
 * — a cost of the benchmark, not of the crowd. Its other settings come from the environment, so
 * `PMLAKE_QUERY_CONCURRENCY=0 PMLAKE_STREAM_CONCURRENCY=0 pmlake bench --only mixed-load` measures without
 * load shedding.
 */
export const CLIENT_TIMEOUT_MS = 30_000;

export type Kind = { name: string; connections: number; paths: string[] };
export type Outcome = { name: string; requests: number; rps: number; p50: number; p99: number; max: number; s503: number; other: number; timeouts: number };

/**
 * Opens every connection of a kind with one untimed request each. Connections opened while other loops of the
 * same client are already busy waited for their first turn until the busy ones stopped (with node:http, late
 * connections made barely one request each) — the client's doing, not the server's.
 */
export async function connect(kind: Kind, conns: Connection[], keys: string[]): Promise<void> {
  await Promise.all(conns.map((c, i) => c.get(kind.paths[i % kind.paths.length]!, { 'x-api-key': keys[i]! })));
}

export async function fire(kind: Kind, conns: Connection[], until: number, keys: string[]): Promise<Outcome> {
  const started = Date.now();
  const ms: number[] = [];
  const statuses = new Map<number, number>();
  const loop = async (c: number): Promise<void> => {
    const headers = { 'x-api-key': keys[c]! };
    for (let i = c; Date.now() < until; i++) {
      const r = await conns[c]!.get(kind.paths[i % kind.paths.length]!, headers);
      ms.push(r.status === 0 ? CLIENT_TIMEOUT_MS : r.ms);
      statuses.set(r.status, (statuses.get(r.status) ?? 0) + 1);
    }
  };
  await Promise.all(conns.map((_, c) => loop(c)));
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
        { name: 'market-detail', connections: 50, paths: [`/v1/markets/${bm.marketId}`] },
        {
          name: 'trades-pages',
          connections: 100,
          paths: [
            `/v1/trades?${qs({ market_id: bm.marketId, limit: 100, offset: 0 })}`,
            `/v1/trades?${qs({ market_id: bm.marketId, limit: 100, offset: 1000 })}`,
          ],
        },
        { name: 'raw-datasets', connections: 20, paths: ['/v1/download/raw/datasets'] },
        { name: 'ohlcv', connections: 30, paths: [ohlcv] },
      ];
      const keys = await ctx.newKeys(
        'mixed',
        kinds.reduce((s, k) => s + k.connections, 0),
      );
      // The main server is stopped meanwhile: one server on the machine's cores, as in a deployment.
      await ctx.server.stop();
      const srv = await startPmlakeServer({
        lakeDir: ctx.lake.lakeDir,
        stateDir: path.join(ctx.workDir, 'state'),
        env: { PMLAKE_RATE_LIMITS: 'off' },
        logFile: path.join(ctx.workDir, 'mixed-server.log'),
      });
      let out: Outcome[];
      let wall: number;
      let peakRss: number | undefined;
      try {
        ctx.log(`mixed-load server pid ${srv.pid} at ${srv.url} (rate limits off)`);
        // Each path once first (n/a if a route is missing): the steady state of a running server, not its
        // first seconds.
        for (const k of kinds) for (const p of k.paths) await requestJson(`${srv.url}${p}`, keys[0]!);
        const peak = peakTracker(srv.pid);
        const port = Number(new URL(srv.url).port);
        const conns = kinds.map((k) => Array.from({ length: k.connections }, () => new Connection(port, CLIENT_TIMEOUT_MS)));
        let first = 0;
        const pools = kinds.map((k) => keys.slice(first, (first += k.connections)));
        await Promise.all(kinds.map((k, i) => connect(k, conns[i]!, pools[i]!)));
        const t0 = Date.now();
        const cpu0 = process.cpuUsage();
        out = await Promise.all(kinds.map((k, i) => fire(k, conns[i]!, t0 + seconds * 1000, pools[i]!)));
        wall = (Date.now() - t0) / 1000;
        const cpu = process.cpuUsage(cpu0);
        for (const c of conns.flat()) c.close();
        ctx.log(`  load client (this process) CPU ${((cpu.user + cpu.system) / 1e6).toFixed(1)} s over ${wall.toFixed(1)} s`);
        peakRss = peak.stop();
      } finally {
        await srv.stop();
        await ctx.restartServer();
      }
      const total = out.reduce((s, o) => s + o.requests, 0);
      const detail = out.find((o) => o.name === 'market-detail') ?? out[0]!;
      const oldest = Math.max(...out.map((o) => o.max));
      const shed = out.reduce((s, o) => s + o.s503, 0);
      const timeouts = out.reduce((s, o) => s + o.timeouts, 0);
      const failed = out.reduce((s, o) => s + o.other, 0);
      const rps = total / wall;
      for (const o of out)
        ctx.log(
          `  ${o.name}: ${o.rps.toFixed(0)} req/s, p50 ${o.p50} ms, p99 ${o.p99} ms, max ${o.max} ms, 503 ${o.s503}, timeouts ${o.timeouts}, other ${o.other}`,
        );
      return [
        {
          scenario: 'mixed-load',
          status: 'ok',
          pmlakeDoes: `${kinds.reduce((s, k) => s + k.connections, 0)} connections for ${seconds} s (then drained: ${wall.toFixed(1)} s): ${kinds.map((k) => `${k.name} ×${k.connections}`).join(', ')}`,
          baselineDoes: 'none (targets only)',
          rows: total,
          pmlake: {
            seconds: 1 / rps,
            samples: [wall],
            rows: total,
            peakRss,
            extra: { rps, detail_p99_ms: detail.p99, oldest_ms: oldest, s503: shed, timeouts },
          },
          targets: [
            atMost('market-detail p99 ≤100 ms', detail.p99, 100),
            atMost('oldest request ≤10 s', oldest / 1000, 10),
            atMost(`no request past the ${CLIENT_TIMEOUT_MS / 1000} s client timeout`, timeouts, 0),
          ],
          notes: [
            ...out.map(
              (o) =>
                `${o.name}: ${o.rps.toFixed(0)} req/s, p50 ${o.p50} ms, p99 ${o.p99} ms, max ${o.max} ms, 503 ${o.s503}, timeouts ${o.timeouts}, other non-2xx/errors ${o.other}`,
            ),
            `total ${rps.toFixed(0)} req/s; 503 (shed, Retry-After) ${shed}; other failures ${failed}; 'pmlake s' is seconds per request (1/rate)`,
          ],
        },
      ];
    },
  };
}
