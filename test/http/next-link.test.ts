import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildQueryLake, catalog, glob, type QueryLake } from '../helpers/query-lake.js';

/**
 * Every list that stops at its limit while more rows match says so with `Link: <url>; rel="next"` (RFC 8288).
 * Each test follows the chain from a first page to the page without a Link and compares the concatenation with
 * the same list computed here in plain TypeScript from the lake's Parquet files: every row once, in order.
 */
type Trade = { id: string; token: string; us: bigint; block: bigint; log: number; side: string; outcome: number };

const cmp = (a: bigint | number | string, b: bigint | number | string): number => (a < b ? -1 : a > b ? 1 : 0);
/** The API's trade order: time, block, log index, id, all descending. */
const newestFirst = (a: Trade, b: Trade): number => cmp(b.us, a.us) || cmp(b.block, a.block) || cmp(b.log, a.log) || cmp(b.id, a.id);
const micros = (iso: string): bigint => BigInt(Date.parse(iso)) * 1000n + BigInt((/\.\d{3}(\d{3})Z$/.exec(iso)?.[1] ?? '0').padEnd(3, '0'));
const lastIndex = <T>(xs: readonly T[], f: (x: T, i: number) => boolean): number => {
  for (let i = xs.length - 1; i >= 0; i -= 1) if (f(xs[i]!, i)) return i;
  return -1;
};
const isoOf = (us: bigint): string => new Date(Number(us / 1000n)).toISOString();

describe('Link rel="next" on paged lists', () => {
  let L: QueryLake;
  let trades: Trade[];
  let market: { id: string; tokens: string[] };

  beforeAll(async () => {
    L = await buildQueryLake();
    const rows = await L.rows(
      `SELECT id, token_id, epoch_us(ts) AS us, coalesce(block_number, -1) AS block, log_index, side, outcome_index FROM read_parquet(${glob(L.lakeDir, 'trades')})`,
    );
    trades = rows.map((r) => ({
      id: String(r.id),
      token: String(r.token_id),
      us: BigInt(r.us as bigint),
      block: BigInt(r.block as bigint),
      log: Number(r.log_index),
      side: String(r.side),
      outcome: Number(r.outcome_index),
    }));
    const counts = new Map<string, number>();
    for (const t of trades) counts.set(t.token, (counts.get(t.token) ?? 0) + 1);
    const busiest = [...counts.entries()].sort((a, b) => b[1] - a[1] || cmp(a[0], b[0]))[0]![0];
    const m = (await L.get(`/v1/markets/${busiest}`)).body;
    market = { id: String(m.id), tokens: m.outcome_token_ids as string[] };
  }, 120_000);
  afterAll(async () => {
    await L?.close();
  });

  /** Follows the Link chain from `first` (a path) to its last page: the bodies, and each page's Link target. */
  async function walk(first: string, maxPages = 2000): Promise<{ bodies: any[]; links: string[] }> {
    const bodies: any[] = [];
    const links: string[] = [];
    let path: string | null = first;
    while (path !== null) {
      const r = await L.get(path);
      expect(r.status, path).toBe(200);
      bodies.push(r.body);
      const link = r.headers.get('link');
      if (link === null) break;
      const m = /^<([^>]+)>; rel="next"$/.exec(link);
      expect(m, link).not.toBeNull();
      // Absolute, on the service's own base (no PMLAKE_PUBLIC_URL here: the listen address).
      expect(m![1]!.startsWith(`${L.srv.url}/`), link).toBe(true);
      links.push(m![1]!);
      path = m![1]!.slice(L.srv.url.length);
      expect(bodies.length).toBeLessThan(maxPages);
    }
    return { bodies, links };
  }

  const ids = (bodies: any[]): string[] => bodies.flat().map((t: { id: string }) => t.id);

  it("trades: a market's trades page by page, with and without filters, equal the trades in the API's order", async () => {
    const mine = trades.filter((t) => market.tokens.includes(t.token)).sort(newestFirst);
    expect(mine.length).toBeGreaterThan(100);
    const all = await walk(`/v1/trades?market_id=${market.id}&limit=7`);
    expect(all.bodies.length).toBe(Math.ceil(mine.length / 7));
    expect(all.bodies.slice(0, -1).every((b) => b.length === 7)).toBe(true);
    expect(ids(all.bodies)).toEqual(mine.map((t) => t.id));
    // The window and filters travel with the chain.
    const lo = mine[Math.floor(mine.length * 0.8)]!.us;
    const hi = mine[Math.floor(mine.length * 0.2)]!.us;
    const want = mine.filter((t) => t.us >= lo && t.us < hi && t.side === 'buy' && t.outcome === 1);
    expect(want.length).toBeGreaterThan(5);
    const some = await walk(`/v1/trades?market_id=${market.id}&outcome=1&side=buy&start=${isoOf(lo)}&end=${isoOf(hi)}&limit=3`);
    expect(ids(some.bodies)).toEqual(want.map((t) => t.id));
    for (const link of some.links) expect(new URL(link).searchParams.get('start')).toBe(isoOf(lo));
  });

  it('trades: a page whose every trade shares one instant, deep in an offset, continues without repeating or skipping', async () => {
    const mine = trades.filter((t) => market.tokens.includes(t.token)).sort(newestFirst);
    // The last instant holding three trades or more, its second trade shown alone at its offset: the page
    // cannot tell how many trades at that instant came before it, the service has to count them.
    const at = lastIndex(mine, (t, i) => i + 2 < mine.length && mine[i + 2]!.us === t.us && (i === 0 || mine[i - 1]!.us !== t.us));
    expect(at).toBeGreaterThan(0);
    const chain = await walk(`/v1/trades?market_id=${market.id}&offset=${at + 1}&limit=1`, 2000);
    expect(ids(chain.bodies)).toEqual(mine.slice(at + 1).map((t) => t.id));
    // The first Link continues inside that instant: end just after it, offset past the trades at it already given.
    const first = new URL(chain.links[0]!);
    expect(micros(first.searchParams.get('end')!)).toBe(mine[at]!.us + 1n);
    expect(first.searchParams.get('offset')).toBe('2');
  });

  it("recent trades: the newest trades, and the rest of all markets' trades on /v1/trades, in order", async () => {
    const want = [...trades].sort(newestFirst);
    const chain = await walk('/v1/trades/recent?limit=100');
    expect(new URL(chain.links[0]!).pathname).toBe('/v1/trades');
    expect(ids(chain.bodies)).toEqual(want.map((t) => t.id));
  });

  it('OHLCV: 7m candles page by page equal an independent bucketing of the trades', async () => {
    const token = market.tokens[0]!;
    const step = 7n * 60n * 1_000_000n;
    const buckets = new Map<bigint, number>();
    for (const t of trades.filter((x) => x.token === token)) buckets.set((t.us / step) * step, (buckets.get((t.us / step) * step) ?? 0) + 1);
    const want = [...buckets.entries()].sort((a, b) => cmp(b[0], a[0])).map(([b, n]) => ({ timestamp: isoOf(b).replace('.000Z', 'Z'), trade_count: n }));
    expect(want.length).toBeGreaterThan(20);
    const chain = await walk(`/v1/trades/ohlcv?market_id=${market.id}&outcome=0&timeframe=7m&limit=9`);
    expect(chain.bodies.length).toBe(Math.ceil(want.length / 9));
    expect(chain.bodies.flat().map((b: { timestamp: string; trade_count: number }) => ({ timestamp: b.timestamp, trade_count: b.trade_count }))).toEqual(want);
    // Everything on one page: no Link.
    const one = await L.get(`/v1/trades/ohlcv?market_id=${market.id}&outcome=0&timeframe=7m&limit=${want.length}`);
    expect(one.headers.get('link')).toBeNull();
  });

  it('markets: the catalogue page by page in its order (by rows, then volume, then id)', async () => {
    const rows = await L.rows(`SELECT id, trade_count, orderbook_count, volume::DOUBLE AS volume FROM read_parquet(${catalog(L.lakeDir, 'markets')})`);
    const ms = rows.map((r) => ({
      id: String(r.id),
      n: Number(r.trade_count ?? 0) + Number(r.orderbook_count ?? 0),
      volume: r.volume === null ? null : Number(r.volume),
      withData: Number(r.trade_count ?? 0) > 0 || Number(r.orderbook_count ?? 0) > 0,
    }));
    const order = (a: (typeof ms)[0], b: (typeof ms)[0]) =>
      b.n - a.n || (a.volume === null ? (b.volume === null ? 0 : 1) : b.volume === null ? -1 : b.volume - a.volume) || cmp(a.id, b.id);
    const withData = ms.filter((m) => m.withData).sort(order);
    expect(withData.length).toBeGreaterThan(4);
    const some = await walk('/v1/markets?has_data=true&limit=2');
    expect(ids(some.bodies)).toEqual(withData.map((m) => m.id));
    const all = await walk('/v1/markets?limit=1000');
    expect(all.bodies.length).toBe(Math.ceil(ms.length / 1000));
    expect(ids(all.bodies)).toEqual([...ms].sort(order).map((m) => m.id));
  });

  it('coverage: the markets of a day page by page, worst status first', async () => {
    const cov = await L.rows(`SELECT strftime(date, '%Y-%m-%d') AS d, asset_id, condition_id, status FROM read_parquet(${glob(L.lakeDir, 'coverage')})`);
    const days = new Map<string, number>();
    for (const c of cov) days.set(String(c.d), (days.get(String(c.d)) ?? 0) + 1);
    const day = [...days.entries()].sort((a, b) => b[1] - a[1] || cmp(a[0], b[0]))[0]![0];
    const tokens = await L.rows(`SELECT id, unnest(outcome_token_ids) AS t FROM read_parquet(${catalog(L.lakeDir, 'markets')})`);
    const marketOf = new Map(tokens.map((t) => [String(t.t), String(t.id)]));
    const rank: Record<string, number> = { verified: 0, unverified: 1, degraded: 2, missing: 3 };
    const byMarket = new Map<string, { market_id: string | null; condition_id: string; rank: number }>();
    for (const c of cov.filter((x) => x.d === day)) {
      const m = marketOf.get(String(c.asset_id)) ?? null;
      const k = `${m}|${c.condition_id}`;
      const r = rank[String(c.status)] ?? 1;
      const was = byMarket.get(k);
      byMarket.set(k, { market_id: m, condition_id: String(c.condition_id), rank: Math.max(r, was?.rank ?? 0) });
    }
    const want = [...byMarket.values()]
      .sort((a, b) => b.rank - a.rank || cmp(a.market_id ?? '\uffff', b.market_id ?? '\uffff') || cmp(a.condition_id, b.condition_id))
      .map((m) => [m.market_id, m.condition_id]);
    expect(want.length).toBeGreaterThan(3);
    const chain = await walk(`/v1/coverage?date=${day}&limit=2`);
    expect(chain.bodies.length).toBe(Math.ceil(want.length / 2));
    expect(chain.bodies.flatMap((b) => b.markets.map((m: { market_id: string; condition_id: string }) => [m.market_id, m.condition_id]))).toEqual(want);
  });

  it('replay ticks: the Link is the next_from cursor, and following it replays every trade of the window', async () => {
    const token = market.tokens[0]!;
    const mine = trades.filter((t) => t.token === token).sort((a, b) => -newestFirst(a, b));
    const from = Number(mine[0]!.us / 1_000_000n);
    const to = Number(mine[mine.length - 1]!.us / 1_000_000n);
    const chain = await walk(`/v1/charts/replay/ticks?symbol=${market.id}&from=${from}&to=${to}&limit=10`);
    expect(chain.bodies.length).toBeGreaterThan(3);
    chain.links.forEach((l, i) => expect(Number(new URL(l).searchParams.get('from'))).toBe(chain.bodies[i].next_from));
    expect(chain.bodies[chain.bodies.length - 1].next_from).toBeNull();
    expect(chain.bodies.flatMap((b) => b.ticks.map((t: { id: string }) => t.id))).toEqual(mine.map((t) => t.id));
  });

  it("top of book: one outcome's changes page by page, oldest first, also from inside a shared instant", async () => {
    const token = market.tokens[0]!;
    const rows = await L.rows(
      `SELECT epoch_us(ts) AS us, seq::VARCHAR AS seq FROM read_parquet(${glob(L.lakeDir, 'top_of_book')}) WHERE asset_id = '${token}'`,
    );
    const want = rows.map((r) => ({ us: BigInt(r.us as bigint), seq: BigInt(String(r.seq)) })).sort((a, b) => cmp(a.us, b.us) || cmp(a.seq, b.seq));
    expect(want.length).toBeGreaterThan(50);
    const chain = await walk(`/v1/orderbook/top_of_book?market_id=${market.id}&outcome=0&limit=13`);
    expect(chain.bodies.flat().map((r: { seq: string }) => r.seq)).toEqual(want.map((w) => w.seq.toString()));
    // The last instant holding two changes or more, its second change alone at its offset (the service counts).
    const shared = lastIndex(want, (w, i) => i > 0 && i + 1 < want.length && want[i + 1]!.us === w.us && want[i - 1]!.us !== w.us);
    expect(shared).toBeGreaterThan(0);
    const deep = await walk(`/v1/orderbook/top_of_book?market_id=${market.id}&outcome=0&offset=${shared + 1}&limit=1`);
    expect(deep.bodies.flat().map((r: { seq: string }) => r.seq)).toEqual(want.slice(shared + 1).map((w) => w.seq.toString()));
  });

  it('the OpenAPI document names the Link header on every paged list', async () => {
    const doc = (await L.get('/v1/openapi.json')).body;
    const paged = [
      '/v1/trades',
      '/v1/trades/recent',
      '/v1/trades/ohlcv',
      '/v1/markets',
      '/v1/coverage',
      '/v1/markets/{market_id}/coverage',
      '/v1/charts/replay/ticks',
      '/v1/orderbook/top_of_book',
    ];
    for (const p of paged) expect(doc.paths[p].get.responses['200'].headers?.Link?.schema, p).toEqual({ type: 'string' });
    expect(doc.paths['/v1/markets/{market_id}'].get.responses['200'].headers).toBeUndefined();
  });
});
