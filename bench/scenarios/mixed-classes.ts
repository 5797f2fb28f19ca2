import fs from 'node:fs';
import path from 'node:path';
import { qs, requestJson } from '../http.js';
import { NotAvailable, type BenchContext, type Scenario, type ScenarioRow } from '../runner.js';
import { atMost, median, seededRandom, speedRatio } from '../stats.js';
import { startPmlakeServer, type ChildServer } from '../server.js';
import { peakTracker } from '../proc.js';
import { addDays } from './common.js';
import { Connection } from './load-client.js';
import { CLIENT_TIMEOUT_MS, connect, fire, type Kind, type Outcome } from './mixed.js';

/**
 * mixed-classes: 100 closed-loop keep-alive connections, 25 on each of four classes of request — market detail
 * (`GET /v1/markets/{id}`), the busiest market's trades pages (offset 0 and 1,000: kept answers), 30 days of 1h
 * OHLCV of the busiest token, and order-book snapshots of the busiest book at ten seeded instants — on a server of
 * its own with PMLAKE_RATE_LIMITS=off and one key per connection (as mixed-load). The question is whether each
 * class gets its share of the cores: the cheap classes answer from memory at hundreds of requests a second each
 * and used to starve the two lake scans (6–7 req/s, p99 5–7 s under the mix against ~44 req/s alone).
 *
 * First every class alone (the same 25 connections, nothing else: the reference), then the mix, min(reps, 3)
 * rounds. Per class: req/s, p50, p99, its share of the completed requests, and its estimated share of the server's
 * CPU time: its requests × the CPU per request it cost alone (the server process's user + system time over the
 * alone run / its requests). The server's CPU is also split by thread: the event loop (the main thread) against
 * every other thread (DuckDB's workers, libuv's pool, V8's helpers), from /proc/<pid>/task/<tid>/stat.
 * Targets: OHLCV and book p99 ≤1 s, market-detail p99 ≤150 ms under the mix (medians of the rounds).
 * 'pmlake s' is the worse scan class's p99 under the mix, 'baseline s' the worse scan class's p99 alone; ratio =
 * alone / mixed (1 = the mix costs the scans nothing).
 */

/** CPU ms: the whole process, its main thread (the event loop), the rest; and ms the main thread sat runnable, waiting for a core. */
type Cpu = { total: number; loop: number; other: number; loopWait: number };
type Run = { outcomes: Outcome[]; wall: number; cpu: Cpu };

/** Linux's 100 clock ticks a second, in ms. */
const TICK_MS = 10;

/** User + system CPU ms of a process so far: all of it, its main thread (tid = pid: the event loop) and the rest. */
function serverCpu(pid: number): Cpu {
  const ticks = (file: string): number => {
    try {
      const f = fs.readFileSync(file, 'utf8').split(') ')[1]!.split(' ');
      return (Number(f[11]) + Number(f[12])) * TICK_MS;
    } catch {
      return Number.NaN;
    }
  };
  const total = ticks(`/proc/${pid}/stat`);
  const loop = ticks(`/proc/${pid}/task/${pid}/stat`);
  // schedstat: ns on a CPU, ns waiting on a run queue, time slices.
  let loopWait = Number.NaN;
  try {
    loopWait = Number(fs.readFileSync(`/proc/${pid}/task/${pid}/schedstat`, 'utf8').split(' ')[1]) / 1e6;
  } catch {
    /* no schedstat: left unknown */
  }
  return { total, loop, other: total - loop, loopWait };
}

const minus = (a: Cpu, b: Cpu): Cpu => ({ total: a.total - b.total, loop: a.loop - b.loop, other: a.other - b.other, loopWait: a.loopWait - b.loopWait });
/** "1.20 cores (event loop 0.60, waiting for a core 0.10)" over a run's wall seconds. */
const cores = (c: Cpu, wall: number): string =>
  `${(c.total / 1000 / wall).toFixed(2)} cores (event loop ${(c.loop / 1000 / wall).toFixed(2)}, other threads ${(c.other / 1000 / wall).toFixed(2)}; event loop runnable but waiting for a core ${(c.loopWait / 1000 / wall).toFixed(2)})`;

async function load(srv: ChildServer, kinds: Kind[], keys: string[], seconds: number): Promise<Run> {
  const port = Number(new URL(srv.url).port);
  const conns = kinds.map((k) => Array.from({ length: k.connections }, () => new Connection(port, CLIENT_TIMEOUT_MS)));
  let first = 0;
  const pools = kinds.map((k) => keys.slice(first, (first += k.connections)));
  try {
    await Promise.all(kinds.map((k, i) => connect(k, conns[i]!, pools[i]!)));
    const cpu0 = serverCpu(srv.pid);
    const t0 = Date.now();
    const outcomes = await Promise.all(kinds.map((k, i) => fire(k, conns[i]!, t0 + seconds * 1000, pools[i]!)));
    const wall = (Date.now() - t0) / 1000;
    return { outcomes, wall, cpu: minus(serverCpu(srv.pid), cpu0) };
  } finally {
    for (const c of conns.flat()) c.close();
  }
}

const pct = (x: number): string => `${(100 * x).toFixed(0)} %`;

export function mixedClasses(seconds: number): Scenario {
  return {
    name: 'mixed-classes',
    async run(ctx: BenchContext): Promise<ScenarioRow[]> {
      const bm = ctx.lake.facts.busiestMarket;
      const bt = ctx.lake.facts.busiestToken;
      const bl = ctx.lake.facts.busiestL2;
      if (!bm.marketId || !bt.marketId) throw new NotAvailable('no market with trades in the bench lake');
      if (!bl.marketId) throw new NotAvailable('no L2 tape in the bench lake');
      const end = addDays(`${bt.to.slice(0, 10)}T00:00:00.000Z`, 1);
      const rnd = seededRandom(20250915);
      const from = Date.parse(bl.from);
      const span = Date.parse(bl.to) - from;
      const kinds: Kind[] = [
        { name: 'market-detail', connections: 25, paths: [`/v1/markets/${bm.marketId}`] },
        {
          name: 'trades-pages',
          connections: 25,
          paths: [
            `/v1/trades?${qs({ market_id: bm.marketId, limit: 100, offset: 0 })}`,
            `/v1/trades?${qs({ market_id: bm.marketId, limit: 100, offset: 1000 })}`,
          ],
        },
        {
          name: 'ohlcv',
          connections: 25,
          paths: [`/v1/trades/ohlcv?${qs({ market_id: bt.marketId, outcome: bt.outcome, timeframe: '1h', start: addDays(end, -30), end, limit: 1000 })}`],
        },
        {
          name: 'book',
          connections: 25,
          paths: Array.from(
            { length: 10 },
            () => `/v1/orderbook/snapshot?${qs({ market_id: bl.marketId, outcome: bl.outcome, at: new Date(from + Math.floor(rnd() * span)).toISOString() })}`,
          ),
        },
      ];
      const scans = ['ohlcv', 'book'];
      const total = kinds.reduce((s, k) => s + k.connections, 0);
      const keys = await ctx.newKeys('mixed-classes', total);
      // The bench's own server is stopped meanwhile: one server on the machine's cores, as in a deployment.
      await ctx.server.stop();
      const srv = await startPmlakeServer({
        lakeDir: ctx.lake.lakeDir,
        stateDir: path.join(ctx.workDir, 'state'),
        env: { PMLAKE_RATE_LIMITS: 'off' },
        logFile: path.join(ctx.workDir, 'mixed-classes-server.log'),
        cpuProfDir: ctx.cpuProfDir,
      });
      const alone = new Map<string, Run>();
      const mixed: Run[] = [];
      let peakRss: number | undefined;
      try {
        ctx.log(`mixed-classes server pid ${srv.pid} at ${srv.url} (rate limits off)`);
        // Every path once (a 404/500 stops the scenario): footers, kept pages and the catalogue warm.
        for (const k of kinds) for (const p of k.paths) await requestJson(`${srv.url}${p}`, keys[0]!);
        const peak = peakTracker(srv.pid);
        for (const [i, k] of kinds.entries()) {
          let first = 0;
          for (let j = 0; j < i; j++) first += kinds[j]!.connections;
          const run = await load(srv, [k], keys.slice(first, first + k.connections), seconds);
          alone.set(k.name, run);
          const o = run.outcomes[0]!;
          ctx.log(
            `  alone ${k.name}: ${o.rps.toFixed(0)} req/s, p50 ${o.p50} ms, p99 ${o.p99} ms, 503 ${o.s503}; server ${cores(run.cpu, run.wall)}, ${((run.cpu.total / o.requests) * 1000).toFixed(0)} µs CPU a request`,
          );
        }
        const rounds = Math.max(1, Math.min(ctx.reps, 3));
        for (let r = 0; r < rounds; r++) {
          const run = await load(srv, kinds, keys, seconds);
          mixed.push(run);
          ctx.log(
            `  round ${r + 1}: ${run.outcomes.map((o) => `${o.name} ${o.rps.toFixed(0)} req/s p50 ${o.p50} p99 ${o.p99} ms`).join('; ')}; server ${cores(run.cpu, run.wall)}`,
          );
        }
        peakRss = peak.stop();
      } finally {
        await srv.stop();
        await ctx.restartServer();
      }

      // CPU per request of each class, measured alone; a class's CPU share in the mix is its requests at that cost.
      const cpuPerRequest = new Map(kinds.map((k) => [k.name, alone.get(k.name)!.cpu.total / alone.get(k.name)!.outcomes[0]!.requests]));
      const shares = (run: Run) => {
        const n = run.outcomes.reduce((s, o) => s + o.requests, 0);
        const cpu = run.outcomes.reduce((s, o) => s + o.requests * cpuPerRequest.get(o.name)!, 0);
        return new Map(run.outcomes.map((o) => [o.name, { requests: o.requests / n, cpu: (o.requests * cpuPerRequest.get(o.name)!) / cpu }]));
      };
      const of = (name: string, f: (o: Outcome) => number): number => median(mixed.map((m) => f(m.outcomes.find((o) => o.name === name)!)));
      const spread = (name: string, f: (o: Outcome) => number): string => mixed.map((m) => f(m.outcomes.find((o) => o.name === name)!)).join(' / ');
      const aloneOf = (name: string): Outcome => alone.get(name)!.outcomes[0]!;
      const worstScan = median(mixed.map((m) => Math.max(...m.outcomes.filter((o) => scans.includes(o.name)).map((o) => o.p99))));
      const worstAlone = Math.max(...scans.map((s) => aloneOf(s).p99));
      const extra: Record<string, number> = {};
      for (const k of kinds) {
        const key = k.name.replace('-', '_');
        extra[`${key}_rps`] = of(k.name, (o) => o.rps);
        extra[`${key}_p50_ms`] = of(k.name, (o) => o.p50);
        extra[`${key}_p99_ms`] = of(k.name, (o) => o.p99);
        extra[`${key}_request_share`] = median(mixed.map((m) => shares(m).get(k.name)!.requests));
        extra[`${key}_cpu_share`] = median(mixed.map((m) => shares(m).get(k.name)!.cpu));
        extra[`${key}_alone_rps`] = aloneOf(k.name).rps;
        extra[`${key}_alone_p99_ms`] = aloneOf(k.name).p99;
        extra[`${key}_alone_cpu_us`] = cpuPerRequest.get(k.name)! * 1000;
      }
      extra.server_cores = median(mixed.map((m) => m.cpu.total / 1000 / m.wall));
      extra.event_loop_cores = median(mixed.map((m) => m.cpu.loop / 1000 / m.wall));
      extra.event_loop_waiting_cores = median(mixed.map((m) => m.cpu.loopWait / 1000 / m.wall));
      extra.s503 = median(mixed.map((m) => m.outcomes.reduce((s, o) => s + o.s503, 0)));
      const fmt = (o: Outcome): string =>
        `${o.name} ${o.rps.toFixed(0)} req/s, p50 ${o.p50} ms, p99 ${o.p99} ms, max ${o.max} ms, 503 ${o.s503}, other ${o.other + o.timeouts}`;
      const requests = mixed.reduce((s, m) => s + m.outcomes.reduce((t, o) => t + o.requests, 0), 0);
      return [
        {
          scenario: 'mixed-classes',
          status: 'ok',
          pmlakeDoes: `${kinds.map((k) => `${k.name} ×${k.connections}`).join(', ')} for ${seconds} s, ${mixed.length} round(s), each class alone first`,
          baselineDoes: 'each scan class alone on the same server (25 connections, nothing else)',
          rows: requests,
          pmlake: {
            seconds: worstScan / 1000,
            samples: mixed.map((m) => Math.max(...m.outcomes.filter((o) => scans.includes(o.name)).map((o) => o.p99)) / 1000),
            rows: requests,
            peakRss,
            extra,
          },
          baseline: { seconds: worstAlone / 1000, samples: [worstAlone / 1000] },
          ratio: speedRatio(worstScan, worstAlone),
          targets: [
            atMost('ohlcv p99 ≤1 s under the mix', of('ohlcv', (o) => o.p99) / 1000, 1),
            atMost('book p99 ≤1 s under the mix', of('book', (o) => o.p99) / 1000, 1),
            atMost(
              'market-detail p99 ≤150 ms under the mix',
              of('market-detail', (o) => o.p99),
              150,
            ),
          ],
          notes: [
            `'pmlake s': the worse scan class's p99 under the mix (median of rounds); 'baseline s': the worse scan class's p99 alone; ratio = alone / mixed`,
            ...kinds.map((k) => {
              const a = alone.get(k.name)!;
              const o = a.outcomes[0]!;
              return `alone ${k.name}: ${o.rps.toFixed(0)} req/s, p50 ${o.p50} ms, p99 ${o.p99} ms, 503 ${o.s503}; server ${cores(a.cpu, a.wall)}, ${(cpuPerRequest.get(k.name)! * 1000).toFixed(0)} µs CPU a request`;
            }),
            ...mixed.map((m, i) => {
              const sh = shares(m);
              return `mixed round ${i + 1}: ${m.outcomes.map((o) => `${fmt(o)}, ${pct(sh.get(o.name)!.requests)} of requests, ~${pct(sh.get(o.name)!.cpu)} of CPU`).join('; ')}; server ${cores(m.cpu, m.wall)}`;
            }),
            `p99 per round (ms): ${kinds.map((k) => `${k.name} ${spread(k.name, (o) => o.p99)}`).join('; ')}`,
          ],
        },
      ];
    },
  };
}
