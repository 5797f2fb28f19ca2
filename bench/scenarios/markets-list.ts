import path from 'node:path';
import { qs, requestJson } from '../http.js';
import { NotAvailable, type BenchContext, type Scenario, type ScenarioRow } from '../runner.js';
import { median, speedRatio, atMost, seededRandom } from '../stats.js';
import { REPO, spawnUntil, startPmlakeServer, stopChild, type ChildServer } from '../server.js';
import { addDays } from './common.js';
import { Connection } from './load-client.js';
import { CLIENT_TIMEOUT_MS, connect, fire, type Kind, type Outcome } from './mixed.js';

/**
 * markets-list-mixed: `GET /v1/markets` (five filter / sort / page variants) ×40 closed-loop connections beside
 * 30 days of 1h OHLCV ×30 and order-book snapshots at seeded instants ×30 — the crowd that made the list, a DuckDB
 * query per request in the unbounded cheap class, shed a third of the OHLCV and book requests. Reported: the
 * list's p99 (target ≤100 ms), each kind's p50/p99 and 503s. Baseline in the same run: the same load on today's
 * server with the list answered as before (bench/markets-sql-server.ts: the SQL list per request, class cheap).
 * 'pmlake s' / 'baseline s' are the list's p99 (median of the rounds); ratio = baseline p99 / pmlake p99.
 * Each side runs on a server of its own with PMLAKE_RATE_LIMITS=off and one key per connection (as mixed-load),
 * the two started side by side and loaded in turn, alternating which goes first.
 */
type Side = { name: 'pmlake' | 'baseline'; srv: ChildServer };
type Run = { side: Side['name']; outcomes: Outcome[]; wall: number };

async function load(srv: ChildServer, kinds: Kind[], keys: string[], seconds: number): Promise<Outcome[]> {
  const port = Number(new URL(srv.url).port);
  const conns = kinds.map((k) => Array.from({ length: k.connections }, () => new Connection(port, CLIENT_TIMEOUT_MS)));
  let first = 0;
  const pools = kinds.map((k) => keys.slice(first, (first += k.connections)));
  try {
    await Promise.all(kinds.map((k, i) => connect(k, conns[i]!, pools[i]!)));
    const t0 = Date.now();
    return await Promise.all(kinds.map((k, i) => fire(k, conns[i]!, t0 + seconds * 1000, pools[i]!)));
  } finally {
    for (const c of conns.flat()) c.close();
  }
}

export function marketsListMixed(seconds: number): Scenario {
  return {
    name: 'markets-list-mixed',
    async run(ctx: BenchContext): Promise<ScenarioRow[]> {
      const bt = ctx.lake.facts.busiestToken;
      const bl = ctx.lake.facts.busiestL2;
      if (!bt.marketId) throw new NotAvailable('no market with trades in the bench lake');
      if (!bl.marketId) throw new NotAvailable('no L2 tape in the bench lake');
      const end = addDays(`${bt.to.slice(0, 10)}T00:00:00.000Z`, 1);
      const rnd = seededRandom(20250915);
      const from = Date.parse(bl.from);
      const span = Date.parse(bl.to) - from;
      const kinds: Kind[] = [
        {
          name: 'markets-list',
          connections: 40,
          paths: [
            '/v1/markets?limit=100',
            '/v1/markets?sort_by=volume&limit=50&offset=50',
            '/v1/markets?has_data=true&sort_by=newest_data&limit=100',
            '/v1/markets?search=will&limit=100',
            '/v1/markets?data_type=trades&sort_by=trades&limit=200',
          ],
        },
        {
          name: 'ohlcv',
          connections: 30,
          paths: [`/v1/trades/ohlcv?${qs({ market_id: bt.marketId, outcome: bt.outcome, timeframe: '1h', start: addDays(end, -30), end, limit: 1000 })}`],
        },
        {
          name: 'book',
          connections: 30,
          paths: Array.from(
            { length: 10 },
            () => `/v1/orderbook/snapshot?${qs({ market_id: bl.marketId, outcome: bl.outcome, at: new Date(from + Math.floor(rnd() * span)).toISOString() })}`,
          ),
        },
      ];
      const keys = await ctx.newKeys(
        'markets-list',
        kinds.reduce((s, k) => s + k.connections, 0),
      );
      const env = {
        ...process.env,
        PMLAKE_LAKE: ctx.lake.lakeDir,
        PMLAKE_STATE: path.join(ctx.workDir, 'state'),
        PORT: '0',
        HOST: '127.0.0.1',
        PMLAKE_DUCKDB_THREADS: '2',
        PMLAKE_RATE_LIMITS: 'off',
        LOG_LEVEL: process.env.LOG_LEVEL ?? 'info',
      };
      // The bench's own server is stopped meanwhile: the two cores belong to the side being loaded.
      await ctx.server.stop();
      const sides: Side[] = [];
      const runs: Run[] = [];
      try {
        sides.push({
          name: 'pmlake',
          srv: await startPmlakeServer({
            lakeDir: ctx.lake.lakeDir,
            stateDir: env.PMLAKE_STATE,
            env: { PMLAKE_RATE_LIMITS: 'off' },
            logFile: path.join(ctx.workDir, 'markets-list-server.log'),
          }),
        });
        const logFile = path.join(ctx.workDir, 'markets-sql-server.log');
        const { child, match } = await spawnUntil(path.join(REPO, 'bench/markets-sql-server.ts'), [], env, /listening on (http:\/\/[^\s]+)/, logFile);
        sides.push({ name: 'baseline', srv: { url: match[1]!, pid: child.pid!, child, logFile, stop: () => stopChild(child) } });
        // Every path once on each side (404/500 stops the scenario): the catalogue read, pages and footers warm.
        for (const s of sides) for (const k of kinds) for (const p of k.paths) await requestJson(`${s.srv.url}${p}`, keys[0]!);
        const rounds = Math.max(1, Math.min(ctx.reps, 3));
        for (let r = 0; r < rounds; r++) {
          for (const s of r % 2 === 0 ? [sides[1]!, sides[0]!] : sides) {
            const t0 = Date.now();
            const outcomes = await load(s.srv, kinds, keys, seconds);
            runs.push({ side: s.name, outcomes, wall: (Date.now() - t0) / 1000 });
            const list = outcomes[0]!;
            ctx.log(
              `  round ${r + 1} ${s.name}: markets-list p50 ${list.p50} ms, p99 ${list.p99} ms; 503 ${outcomes.map((o) => `${o.name} ${o.s503}`).join(', ')}`,
            );
          }
        }
      } finally {
        for (const s of sides) await s.srv.stop();
        await ctx.restartServer();
      }
      const of = (side: Side['name']): Run[] => runs.filter((x) => x.side === side);
      const p99 = (side: Side['name']): number => median(of(side).map((x) => x.outcomes[0]!.p99));
      const summary = (side: Side['name']) => ({
        seconds: p99(side) / 1000,
        samples: of(side).map((x) => x.outcomes[0]!.p99 / 1000),
        rows: of(side).reduce((s, x) => s + x.outcomes[0]!.requests, 0),
        extra: {
          list_p99_ms: p99(side),
          list_p50_ms: median(of(side).map((x) => x.outcomes[0]!.p50)),
          rps: median(of(side).map((x) => x.outcomes.reduce((s, o) => s + o.requests, 0) / x.wall)),
          s503: median(of(side).map((x) => x.outcomes.reduce((s, o) => s + o.s503, 0))),
        },
      });
      const pm = summary('pmlake');
      const base = summary('baseline');
      const fmt = (o: Outcome) =>
        `${o.name} ${o.rps.toFixed(0)} req/s, p50 ${o.p50} ms, p99 ${o.p99} ms, max ${o.max} ms, 503 ${o.s503}, other ${o.other + o.timeouts}`;
      return [
        {
          scenario: 'markets-list-mixed',
          status: 'ok',
          pmlakeDoes: `${kinds.map((k) => `${k.name} ×${k.connections}`).join(', ')} for ${seconds} s, ${of('pmlake').length} round(s); GET /v1/markets from the catalogue in memory`,
          baselineDoes: 'the same load; GET /v1/markets as one DuckDB list query per request in the unbounded cheap class (bench/markets-sql-server.ts)',
          rows: pm.rows,
          pmlake: pm,
          baseline: base,
          ratio: speedRatio(pm.seconds, base.seconds),
          targets: [atMost('markets-list p99 ≤100 ms under the mix', pm.extra.list_p99_ms, 100)],
          notes: [
            `'pmlake s' / 'baseline s': the markets-list p99 (median of rounds); ratio = baseline p99 / pmlake p99`,
            ...runs.map((x, i) => `${x.side} run ${i + 1}: ${x.outcomes.map(fmt).join('; ')}`),
          ],
        },
      ];
    },
  };
}
