import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildQueryLake, busiestTokenTrades, glob, type ExactTrade, type QueryLake } from '../helpers/query-lake.js';

/**
 * The UDF datafeed over a real lake: history bars against an independent bucketing of the token's trades, read
 * back from the lake's Parquet files and aggregated here in plain TypeScript (integer 1e-6 units, epoch
 * origin, weeks from Monday 1970-01-05).
 */
type T = ExactTrade;
type Bar = { t: number; o: number; h: number; l: number; c: number; v: number };

function bars(trades: T[], seconds: number): Bar[] {
  const step = BigInt(seconds) * 1_000_000n;
  const origin = seconds % 604800 === 0 ? 4n * 86_400n * 1_000_000n : 0n;
  const floor = (us: bigint): bigint => {
    const rel = us - origin;
    return (rel / step - (rel % step < 0n ? 1n : 0n)) * step + origin;
  };
  const sorted = [...trades].sort((a, b) =>
    a.us !== b.us ? (a.us < b.us ? -1 : 1) : a.block !== b.block ? (a.block < b.block ? -1 : 1) : a.log !== b.log ? a.log - b.log : a.id < b.id ? -1 : 1,
  );
  const buckets = new Map<bigint, T[]>();
  for (const t of sorted) {
    const b = floor(t.us);
    if (!buckets.has(b)) buckets.set(b, []);
    buckets.get(b)!.push(t);
  }
  const num = (x: bigint): number => Number(x) / 1e6;
  return [...buckets.entries()]
    .sort((a, b) => (a[0] < b[0] ? -1 : 1))
    .map(([b, ts]) => ({
      t: Number(b / 1_000_000n),
      o: num(ts[0]!.price),
      h: num(ts.reduce((m, t) => (t.price > m ? t.price : m), ts[0]!.price)),
      l: num(ts.reduce((m, t) => (t.price < m ? t.price : m), ts[0]!.price)),
      c: num(ts[ts.length - 1]!.price),
      v: num(ts.reduce((s, t) => s + t.size, 0n)),
    }));
}

/** The UDF column arrays as bars. */
function asBars(body: { t: number[]; o: number[]; h: number[]; l: number[]; c: number[]; v: number[] }): Bar[] {
  return body.t.map((t, i) => ({ t, o: body.o[i]!, h: body.h[i]!, l: body.l[i]!, c: body.c[i]!, v: body.v[i]! }));
}

describe('/v1/charts/udf', () => {
  let L: QueryLake;
  let token: string;
  let marketId: string;
  let symbol: string;
  let trades: T[];
  let firstSec: number;
  let lastSec: number;

  beforeAll(async () => {
    L = await buildQueryLake();
    ({ token, trades } = await busiestTokenTrades(L));
    const m = (await L.get(`/v1/markets/${token}`)).body;
    marketId = m.id;
    const outcome = (m.outcome_token_ids as string[]).indexOf(token);
    symbol = outcome === 0 ? marketId : `${marketId}.${outcome}`;
    firstSec = Number(trades.reduce((a, t) => (t.us < a ? t.us : a), trades[0]!.us) / 1_000_000n);
    lastSec = Number(trades.reduce((a, t) => (t.us > a ? t.us : a), trades[0]!.us) / 1_000_000n);
  });
  afterAll(async () => {
    await L?.close();
  });

  it('config and time are public; time is unix seconds', async () => {
    const c = await L.get('/v1/charts/udf/config', { key: null });
    expect(c.status).toBe(200);
    expect(c.body.supports_search).toBe(true);
    expect(c.body.supports_group_request).toBe(false);
    expect(c.body.supports_time).toBe(true);
    expect(c.body.supported_resolutions).toEqual(expect.arrayContaining(['1', '5', '15', '60', '240', '1D', '1W']));
    const before = Math.floor(Date.now() / 1000);
    const t = await L.get('/v1/charts/udf/time', { key: null });
    expect(t.status).toBe(200);
    expect(Number.isInteger(t.body)).toBe(true);
    expect(t.body).toBeGreaterThanOrEqual(before);
    expect(t.body).toBeLessThanOrEqual(Math.floor(Date.now() / 1000));
    // The data routes need a key.
    expect((await L.get(`/v1/charts/udf/history?symbol=${symbol}&resolution=60&from=0&to=1`, { key: null })).status).toBe(401);
  });

  for (const [resolution, seconds] of [
    ['7', 420],
    ['60', 3600],
    ['2D', 172_800],
    ['30S', 30],
    ['1W', 604_800],
  ] as const) {
    it(`history at ${resolution} equals an independent bucketing, oldest first`, async () => {
      const want = bars(trades, seconds);
      expect(want.length).toBeGreaterThan(0);
      const r = await L.get(`/v1/charts/udf/history?symbol=${symbol}&resolution=${resolution}&from=${want[0]!.t}&to=${lastSec}`);
      expect(r.status).toBe(200);
      expect(r.body.s).toBe('ok');
      expect(asBars(r.body)).toEqual(want);
    });
  }

  it('from and to are inclusive bar starts; a bar starting before from is left out', async () => {
    const all = bars(trades, 420);
    expect(all.length).toBeGreaterThan(8);
    const r = await L.get(`/v1/charts/udf/history?symbol=${symbol}&resolution=7&from=${all[2]!.t}&to=${all[6]!.t}`);
    expect(asBars(r.body)).toEqual(all.slice(2, 7));
    const mid = await L.get(`/v1/charts/udf/history?symbol=${symbol}&resolution=7&from=${all[2]!.t + 1}&to=${all[6]!.t + 419}`);
    expect(asBars(mid.body)).toEqual(all.slice(3, 7));
  });

  it('countback: the newest N bars at or before to, from ignored', async () => {
    const all = bars(trades, 3600);
    expect(all.length).toBeGreaterThan(6);
    const to = all[5]!.t;
    const r = await L.get(`/v1/charts/udf/history?symbol=${symbol}&resolution=60&from=${to}&to=${to}&countback=3`);
    expect(r.body.s).toBe('ok');
    expect(asBars(r.body)).toEqual(all.slice(3, 6));
    const more = await L.get(`/v1/charts/udf/history?symbol=${symbol}&resolution=60&from=${lastSec}&to=${to}&countback=1000`);
    expect(asBars(more.body)).toEqual(all.slice(0, 6));
  });

  it('no_data with nextTime = the newest bar before from; none before the first trade', async () => {
    const all = bars(trades, 420);
    const last = all[all.length - 1]!;
    const r = await L.get(`/v1/charts/udf/history?symbol=${symbol}&resolution=7&from=${lastSec + 86_400}&to=${lastSec + 2 * 86_400}`);
    expect(r.body).toEqual({ s: 'no_data', nextTime: last.t });
    const early = await L.get(`/v1/charts/udf/history?symbol=${symbol}&resolution=7&from=${firstSec - 10 * 86_400}&to=${firstSec - 86_400}`);
    expect(early.body).toEqual({ s: 'no_data' });
    const cb = await L.get(`/v1/charts/udf/history?symbol=${symbol}&resolution=7&from=0&to=${firstSec - 86_400}&countback=10`);
    expect(cb.body).toEqual({ s: 'no_data' });
  });

  it('failures after parsing are UDF errors (200, s=error); bad parameters are 422 naming them', async () => {
    for (const qs of [
      `symbol=${symbol}&resolution=1M&from=0&to=1`,
      `symbol=${symbol}&resolution=5W&from=0&to=1`,
      `symbol=${symbol}&resolution=abc&from=0&to=1`,
      `symbol=${symbol}&resolution=60&from=100&to=1`,
      `symbol=999999999&resolution=60&from=0&to=1`,
    ]) {
      const r = await L.get(`/v1/charts/udf/history?${qs}`);
      expect(r.status, qs).toBe(200);
      expect(r.body.s, qs).toBe('error');
      expect(typeof r.body.errmsg, qs).toBe('string');
    }
    for (const [qs, name] of [
      [`resolution=60&from=0&to=1`, 'symbol'],
      [`symbol=${symbol}&from=0&to=1`, 'resolution'],
      [`symbol=${symbol}&resolution=60&to=1`, 'from'],
      [`symbol=${symbol}&resolution=60&from=x&to=1`, 'from'],
      [`symbol=${symbol}&resolution=60&from=0&to=1.5`, 'to'],
      [`symbol=${symbol}&resolution=60&from=0&to=1&countback=0`, 'countback'],
      [`symbol=0xabc&resolution=60&from=0&to=1`, 'symbol'],
    ] as const) {
      const r = await L.get(`/v1/charts/udf/history?${qs}`);
      expect(r.status, qs).toBe(422);
      expect(r.body.detail[0].loc, qs).toEqual(['query', name]);
    }
  });

  it('symbols: the outcome, tick-derived pricescale, 24x7 UTC; unknown → 404, 0x → 422', async () => {
    const r = await L.get(`/v1/charts/udf/symbols?symbol=${symbol}`);
    expect(r.status).toBe(200);
    const m = await L.rows(
      `SELECT tick_size::DOUBLE AS tick, question, outcomes FROM read_parquet(${glob(L.lakeDir, 'catalog/markets')}) WHERE id = '${marketId}'`,
    );
    const tick = m[0]!.tick as number | null;
    const scale = tick === null || tick <= 0 || tick >= 1 ? 1000 : Math.round(1 / tick);
    expect(r.body).toMatchObject({
      name: symbol,
      ticker: symbol,
      session: '24x7',
      timezone: 'Etc/UTC',
      has_intraday: true,
      minmov: 1,
      pricescale: scale,
      market_id: marketId,
      token_id: token,
    });
    expect(String(r.body.description)).toContain(String(m[0]!.question));
    expect(r.body.supported_resolutions).toContain('60');
    // The token id names the same outcome.
    expect((await L.get(`/v1/charts/udf/symbols?symbol=${token}`)).body.name).toBe(symbol);
    expect((await L.get(`/v1/charts/udf/symbols?symbol=${marketId}.1`)).body.outcome).toBe(1);
    const nf = await L.get(`/v1/charts/udf/symbols?symbol=999999999`);
    expect(nf.status).toBe(404);
    expect(nf.body).toEqual({ detail: 'Market not found' });
    const hex = await L.get(`/v1/charts/udf/symbols?symbol=0xabc.1`);
    expect(hex.status).toBe(422);
    expect(JSON.stringify(hex.body.detail)).toMatch(/numeric market id/);
    expect((await L.get(`/v1/charts/udf/symbols?symbol=${marketId}.9`)).status).toBe(422);
  });

  it('search: case-insensitive literal substring of the question, most traded first, limit 1..50', async () => {
    const all = await L.rows(`SELECT id, question, trade_count FROM read_parquet(${glob(L.lakeDir, 'catalog/markets')})`);
    const q = String(all.find((r) => r.id === marketId)!.question).slice(2, 9);
    const want = all
      .filter((r) =>
        String(r.question ?? '')
          .toLowerCase()
          .includes(q.toLowerCase()),
      )
      .sort((a, b) => Number(b.trade_count ?? -1) - Number(a.trade_count ?? -1) || (String(a.id) < String(b.id) ? -1 : 1))
      .map((r) => String(r.id));
    const r = await L.get(`/v1/charts/udf/search?query=${encodeURIComponent(q.toUpperCase())}&limit=50`);
    expect(r.status).toBe(200);
    expect(r.body.map((x: { symbol: string }) => x.symbol)).toEqual(want.slice(0, 50));
    expect(r.body[0]).toMatchObject({ exchange: 'Polymarket', type: 'prediction' });
    const two = await L.get(`/v1/charts/udf/search?query=&limit=2`);
    expect(two.body).toHaveLength(2);
    expect((await L.get(`/v1/charts/udf/search?query=%25%25%25`)).body).toEqual([]);
    for (const lim of ['0', '51', 'x']) {
      const bad = await L.get(`/v1/charts/udf/search?query=a&limit=${lim}`);
      expect(bad.status).toBe(422);
      expect(bad.body.detail[0].loc).toEqual(['query', 'limit']);
    }
  });
});
