import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildDownloadsLake, type DlLake } from '../helpers/downloads-lake.js';
import { glob } from '../helpers/query-lake.js';
import { readZip } from '../helpers/zip.js';

/**
 * The anchor's whole-venue catalogue series (polymarket:trades-recent, prices-history, market-stats, ohlcv-1h,
 * ohlcv-1d) on a real server over a lake built by the real ingest: listed, answered by id, downloaded across
 * every market and checked against the lake's Parquet read back and bucketed here; the ones pmlake does not
 * serve and the data types a series does not take are 400s naming what to use.
 */

type Trade = { id: string; token_id: string; ts: Date; log_index: number; block_number: number; price: number; size: number };
type Candle = { market_id: string; timestamp: string; open: number; high: number; low: number; close: number; volume: number; trade_count: number };

const SERVED = ['polymarket:trades-recent', 'polymarket:ohlcv-1h', 'polymarket:ohlcv-1d'];
const REFUSED = ['polymarket:prices-history', 'polymarket:market-stats'];

describe('catalogue series (whole venue)', () => {
  let L: DlLake;
  let trades: Trade[];
  let markets: { id: string; tokens: string[] }[];

  const json = async (p: string, init?: RequestInit & { key?: string | null }) => {
    const r = await L.fetch(p, init);
    return { status: r.status, body: (await r.json()) as Record<string, any> };
  };
  const download = (q: string) => json(`/v1/download/series?${q}&format=json&limit=2000000`, { key: L.otherKey });

  /** Candles of every token at `stepMs`, bucketed here from the trades (open/close by time, block, log index). */
  function bucket(stepMs: number): Map<string, { open: number; high: number; low: number; close: number; volume: number; n: number }> {
    const want = new Map<string, { open: number; high: number; low: number; close: number; volume: number; n: number }>();
    const ordered = [...trades].sort((a, b) => +a.ts - +b.ts || a.block_number - b.block_number || a.log_index - b.log_index);
    for (const t of ordered) {
      const k = `${t.token_id}|${new Date(Math.floor(+t.ts / stepMs) * stepMs).toISOString()}`;
      const c = want.get(k);
      if (!c) want.set(k, { open: t.price, high: t.price, low: t.price, close: t.price, volume: t.size, n: 1 });
      else Object.assign(c, { high: Math.max(c.high, t.price), low: Math.min(c.low, t.price), close: t.price, volume: c.volume + t.size, n: c.n + 1 });
    }
    return want;
  }

  beforeAll(async () => {
    L = await buildDownloadsLake({ markets: 6, days: 2 });
    trades = (await L.rows(
      `SELECT id, token_id, ts, log_index, block_number, price::DOUBLE AS price, size::DOUBLE AS size
       FROM read_parquet('${path.join(L.lakeDir, 'trades', '*', '*.parquet')}')`,
    )) as unknown as Trade[];
    markets = (await L.rows(`SELECT id, outcome_token_ids AS tokens FROM read_parquet(${glob(L.lakeDir, 'catalog/markets')})`)).map((r) => ({
      id: String(r.id),
      tokens: (r.tokens as string[] | null) ?? [],
    }));
  }, 180_000);
  afterAll(async () => {
    await L?.close();
  });

  it('the lake has trades over several markets', () => {
    expect(trades.length).toBeGreaterThan(50);
    expect(new Set(trades.map((t) => t.token_id)).size).toBeGreaterThan(2);
  });

  it('GET /v1/series lists all five; served ones count every market and those with trades; GET /v1/series/{id} answers each', async () => {
    const list = await json('/v1/series', { key: null });
    expect(list.status).toBe(200);
    const byId = new Map((list.body as unknown as Record<string, any>[]).map((s) => [s.series_id, s]));
    const traded = new Set(trades.map((t) => t.token_id));
    const withTrades = markets.filter((m) => m.tokens.some((t) => traded.has(t))).length;
    const minTs = Math.min(...trades.map((t) => +t.ts));
    const maxTs = Math.max(...trades.map((t) => +t.ts));
    for (const id of SERVED) {
      const s = byId.get(id)!;
      expect(s, id).toBeDefined();
      expect(s.catalogued_markets).toBe(markets.length);
      expect(s.shoppable_markets).toBe(withTrades);
      expect(Date.parse(s.earliest)).toBeLessThanOrEqual(minTs);
      expect(Date.parse(s.latest)).toBeGreaterThanOrEqual(maxTs);
      const one = await json(`/v1/series/${encodeURIComponent(id)}`, { key: null });
      expect(one.status).toBe(200);
      expect(one.body).toEqual(s);
    }
    expect(byId.get('polymarket:ohlcv-1h')!.timeframe).toBe('1h');
    expect(byId.get('polymarket:ohlcv-1d')!.timeframe).toBe('1d');
    for (const id of REFUSED) {
      const s = byId.get(id)!;
      expect(s, id).toBeDefined();
      expect([s.catalogued_markets, s.shoppable_markets, s.earliest, s.latest]).toEqual([0, 0, null, null]);
      expect(s.description).toMatch(/Not offered/);
      expect((await json(`/v1/series/${encodeURIComponent(id)}`, { key: null })).status).toBe(200);
    }
  });

  it('ohlcv-1h and ohlcv-1d: every candle of every market equals a bucketing of the trades here; the estimate counts them', async () => {
    for (const [id, stepMs] of [
      ['polymarket:ohlcv-1h', 3_600_000],
      ['polymarket:ohlcv-1d', 86_400_000],
    ] as const) {
      const want = bucket(stepMs);
      const res = await download(`series_id=${encodeURIComponent(id)}&data_type=ohlcv`);
      expect(res.status).toBe(200);
      const got = res.body as unknown as Candle[];
      expect(got.length).toBe(want.size);
      for (const g of got) {
        const w = want.get(`${g.market_id}|${new Date(g.timestamp).toISOString()}`);
        expect(w, `${g.market_id} ${g.timestamp}`).toBeDefined();
        expect([g.open, g.high, g.low, g.close, g.trade_count]).toEqual([w!.open, w!.high, w!.low, w!.close, w!.n]);
        expect(g.volume).toBeCloseTo(w!.volume, 4);
      }
      const est = await json(`/v1/series/${encodeURIComponent(id)}/estimate`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ data_type: 'ohlcv' }),
      });
      expect(est.status).toBe(200);
      expect(est.body.estimated_rows).toBe(want.size);
    }
  });

  it('trades-recent: every trade of every market; the estimate counts them', async () => {
    const res = await download('series_id=polymarket:trades-recent&data_type=trades');
    expect(res.status).toBe(200);
    const got = res.body as unknown as { id: string }[];
    expect(got.map((r) => r.id).sort()).toEqual(trades.map((t) => t.id).sort());
    const est = await json('/v1/series/polymarket:trades-recent/estimate', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ data_type: 'trades' }),
    });
    expect(est.status).toBe(200);
    expect(est.body.estimated_rows).toBe(trades.length);
    expect(est.body.markets_in_range).toBe(new Set(markets.filter((m) => m.tokens.some((t) => trades.some((x) => x.token_id === t))).map((m) => m.id)).size);
  });

  it('a bulk item of polymarket:ohlcv-1h is the same file as GET /v1/download/series; a bulk item of a refused series is a 400', async () => {
    const direct = await L.fetch('/v1/download/series?series_id=polymarket:ohlcv-1h&data_type=ohlcv&format=json', { key: L.otherKey });
    expect(direct.status).toBe(200);
    const body = Buffer.from(await direct.arrayBuffer());
    const bulk = (id: string) =>
      L.fetch('/v1/download/bulk', {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ items: [{ kind: 'series', series_id: id, data_type: 'ohlcv', format: 'json' }] }),
        key: L.otherKey,
      });
    const r = await bulk('polymarket:ohlcv-1h');
    expect(r.status).toBe(200);
    const zip = readZip(Buffer.from(await r.arrayBuffer()));
    const files = [...zip.keys()].filter((k) => k !== 'manifest.json');
    expect(files).toHaveLength(1);
    expect(zip.get(files[0]!)!.equals(body)).toBe(true);
    const refused = await bulk('polymarket:market-stats');
    expect(refused.status).toBe(400);
    expect(((await refused.json()) as { detail: { code: string } }).detail.code).toBe('series_not_offered');
  });

  it('prices-history and market-stats: 400 naming what pmlake offers instead; a data type a series does not take: 400 wrong_data_type', async () => {
    for (const id of REFUSED) {
      const r = await download(`series_id=${encodeURIComponent(id)}&data_type=ohlcv`);
      expect(r.status).toBe(400);
      expect(r.body.detail.code).toBe('series_not_offered');
      expect(r.body.detail.message).toMatch(/use /);
    }
    const ph = await download('series_id=polymarket:prices-history&data_type=ohlcv');
    expect(ph.body.detail.message).toMatch(/polymarket:ohlcv-1h/);
    for (const [id, dt] of [
      ['polymarket:ohlcv-1h', 'trades'],
      ['polymarket:ohlcv-1d', 'snapshots'],
      ['polymarket:trades-recent', 'ohlcv'],
    ] as const) {
      const r = await download(`series_id=${encodeURIComponent(id)}&data_type=${dt}`);
      expect(r.status, `${id} ${dt}`).toBe(400);
      expect(r.body.detail.code).toBe('wrong_data_type');
    }
    const tf = await download('series_id=polymarket:ohlcv-1h&data_type=ohlcv&timeframe=1d');
    expect(tf.status).toBe(400);
    expect(tf.body.detail.code).toBe('wrong_timeframe');
    const est = await json('/v1/series/polymarket:ohlcv-1h/estimate', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ data_type: 'trades' }),
    });
    expect(est.status).toBe(400);
    expect(est.body.detail.code).toBe('wrong_data_type');
  });
});
