import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildQueryLake, busiestTokenTrades, type ExactTrade, type QueryLake } from '../helpers/query-lake.js';

/**
 * OHLCV at any timeframe against an independent computation: the token's trades read back from the lake's
 * Parquet files and bucketed here in plain TypeScript with integer arithmetic (prices and sizes in 1e-6 units).
 */
type T = ExactTrade;
type Bar = { timestamp: string; open: number; high: number; low: number; close: number; volume: number; trade_count: number };

const UNIT: Record<string, number> = { s: 1, m: 60, h: 3600, d: 86400, w: 604800 };
function seconds(tf: string): number {
  return Number(tf.slice(0, -1)) * UNIT[tf.slice(-1)]!;
}

/** Buckets counted from the epoch; weeks from Monday 1970-01-05. */
function expected(trades: T[], tf: string, from?: bigint, to?: bigint): Bar[] {
  const step = BigInt(seconds(tf)) * 1_000_000n;
  const origin = seconds(tf) % 604800 === 0 ? 4n * 86_400n * 1_000_000n : 0n;
  const floor = (us: bigint): bigint => ((us - origin) / step) * step + origin;
  const lo = from === undefined ? undefined : floor(from);
  const hi = to === undefined ? undefined : floor(to - 1n) + step;
  const sorted = [...trades].sort((a, b) =>
    a.us !== b.us ? (a.us < b.us ? -1 : 1) : a.block !== b.block ? (a.block < b.block ? -1 : 1) : a.log !== b.log ? a.log - b.log : a.id < b.id ? -1 : 1,
  );
  const buckets = new Map<bigint, T[]>();
  for (const t of sorted) {
    if (lo !== undefined && t.us < lo) continue;
    if (hi !== undefined && t.us >= hi) continue;
    const b = floor(t.us);
    if (!buckets.has(b)) buckets.set(b, []);
    buckets.get(b)!.push(t);
  }
  const num = (x: bigint): number => Number(x) / 1e6;
  return [...buckets.entries()]
    .sort((a, b) => (a[0] > b[0] ? -1 : 1))
    .map(([b, ts]) => ({
      timestamp: new Date(Number(b / 1000n)).toISOString().replace('.000Z', 'Z'),
      open: num(ts[0]!.price),
      high: num(ts.reduce((m, t) => (t.price > m ? t.price : m), ts[0]!.price)),
      low: num(ts.reduce((m, t) => (t.price < m ? t.price : m), ts[0]!.price)),
      close: num(ts[ts.length - 1]!.price),
      volume: num(ts.reduce((s, t) => s + t.size, 0n)),
      trade_count: ts.length,
    }));
}

describe('GET /v1/trades/ohlcv', () => {
  let L: QueryLake;
  let token: string;
  let marketId: string;
  let outcome: number;
  let trades: T[];

  beforeAll(async () => {
    L = await buildQueryLake();
    ({ token, trades } = await busiestTokenTrades(L));
    const m = await L.get(`/v1/markets/${token}`);
    marketId = m.body.id;
    outcome = (m.body.outcome_token_ids as string[]).indexOf(token);
  });
  afterAll(async () => {
    await L?.close();
  });

  it('has a busy token to test on', () => {
    expect(trades.length).toBeGreaterThan(40);
    expect(outcome).toBeGreaterThanOrEqual(0);
  });

  for (const tf of ['30s', '1m', '2m', '5m', '7m', '15m', '1h', '2h', '4h', '12h', '1d', '1w']) {
    it(`${tf} candles equal an independent bucketing of the trades`, async () => {
      const r = await L.get(`/v1/trades/ohlcv?market_id=${marketId}&outcome=${outcome}&timeframe=${tf}&limit=10000`);
      expect(r.status).toBe(200);
      const want = expected(trades, tf);
      expect(want.length).toBeGreaterThan(0);
      expect(
        r.body.map((b: Bar & { market_id: string; outcome: number }) => {
          expect(b.market_id).toBe(token);
          expect(b.outcome).toBe(outcome);
          const { timestamp, open, high, low, close, volume, trade_count } = b;
          return { timestamp, open, high, low, close, volume, trade_count };
        }),
      ).toEqual(want);
    });
  }

  it('returns whole buckets overlapping a window that starts and ends mid-bucket (both sources)', async () => {
    const first = trades.reduce((m, t) => (t.us < m ? t.us : m), trades[0]!.us);
    const last = trades.reduce((m, t) => (t.us > m ? t.us : m), trades[0]!.us);
    const from = first + 3_600_000_000n + 90_000_000n + 123n;
    const to = last - 3_600_000_000n - 100_000_000n;
    const iso = (us: bigint): string => new Date(Number(us / 1000n)).toISOString();
    for (const tf of ['30s', '7m', '1h']) {
      const r = await L.get(`/v1/trades/ohlcv?market_id=${token}&timeframe=${tf}&start=${iso(from)}&end=${iso(to)}&limit=10000`);
      expect(r.status).toBe(200);
      const fromMs = (from / 1000n) * 1000n;
      const toMs = (to / 1000n) * 1000n;
      expect(r.body.map((b: Bar) => b.timestamp)).toEqual(expected(trades, tf, fromMs, toMs).map((b) => b.timestamp));
      expect(r.body).toEqual(expected(trades, tf, fromMs, toMs).map((b) => ({ market_id: token, outcome, ...b })));
    }
  });

  it('newest first; limit keeps the newest bars', async () => {
    const all = (await L.get(`/v1/trades/ohlcv?market_id=${marketId}&outcome=${outcome}&timeframe=1m&limit=10000`)).body as Bar[];
    const three = (await L.get(`/v1/trades/ohlcv?market_id=${marketId}&outcome=${outcome}&timeframe=1m&limit=3`)).body as Bar[];
    expect(three).toEqual(all.slice(0, 3));
    expect([...all].sort((a, b) => (a.timestamp < b.timestamp ? 1 : -1))).toEqual(all);
  });

  it('defaults: timeframe 1h, outcome 0, limit 500', async () => {
    const m = await L.get(`/v1/markets/${marketId}`);
    const t0 = m.body.outcome_token_ids[0];
    const r = await L.get(`/v1/trades/ohlcv?market_id=${marketId}`);
    expect(r.status).toBe(200);
    for (const b of r.body) {
      expect(b.market_id).toBe(t0);
      expect(b.outcome).toBe(0);
      expect(Date.parse(b.timestamp) % 3_600_000).toBe(0);
    }
  });

  it('validates every parameter with a 422 naming it', async () => {
    const cases: [string, string][] = [
      ['timeframe=1x', 'timeframe'],
      ['timeframe=0m', 'timeframe'],
      ['timeframe=5w', 'timeframe'],
      ['timeframe=1M', 'timeframe'],
      ['timeframe=', 'timeframe'],
      ['limit=0', 'limit'],
      ['limit=10001', 'limit'],
      ['limit=abc', 'limit'],
      ['outcome=2', 'outcome'],
      ['outcome=-1', 'outcome'],
      ['start=2025-13-01', 'start'],
      ['start=yesterday', 'start'],
      ['start=2025-09-16&end=2025-09-15', 'start'],
    ];
    for (const [qs, name] of cases) {
      const r = await L.get(`/v1/trades/ohlcv?market_id=${marketId}&${qs}`);
      expect(r.status, qs).toBe(422);
      expect(r.body.detail[0].loc, qs).toEqual(['query', name]);
    }
    const missing = await L.get(`/v1/trades/ohlcv`);
    expect(missing.status).toBe(422);
    expect(missing.body.detail[0].loc).toEqual(['query', 'market_id']);
    const upper = await L.get(`/v1/trades/ohlcv?market_id=${marketId}&limit=10000&timeframe=4w`);
    expect(upper.status).toBe(200);
  });

  it('answers 401 without a key, 404 for an unknown market, 4xx for a condition id', async () => {
    expect((await L.get(`/v1/trades/ohlcv?market_id=${marketId}`, { key: null })).status).toBe(401);
    expect((await L.get(`/v1/trades/ohlcv?market_id=${marketId}`, { key: 'pm_0000' })).body).toEqual({ detail: 'Invalid API key' });
    const nf = await L.get(`/v1/trades/ohlcv?market_id=424242424242`);
    expect(nf.status).toBe(404);
    expect(nf.body).toEqual({ detail: 'Market not found' });
    const hex = await L.get(`/v1/trades/ohlcv?market_id=0x${'ab'.repeat(32)}`);
    expect(hex.status).toBe(422);
    expect(JSON.stringify(hex.body.detail)).toMatch(/numeric market id/);
  });
});
