import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildQueryLake, catalog, glob, type QueryLake } from '../helpers/query-lake.js';

describe('GET /v1/series, /v1/series/{id}, POST /v1/series/{id}/estimate', () => {
  let L: QueryLake;
  let markets: Record<string, unknown>[];

  beforeAll(async () => {
    L = await buildQueryLake();
    markets = await L.rows(`SELECT id, series_id, trade_count, orderbook_count, outcome_token_ids FROM read_parquet(${catalog(L.lakeDir, 'markets')})`);
  });
  afterAll(async () => {
    await L?.close();
  });

  it('lists the catalogue without a key, counts computed from the markets', async () => {
    const r = await L.get('/v1/series', { key: null });
    expect(r.status).toBe(200);
    const ids = await L.rows(`SELECT series_id FROM read_parquet(${catalog(L.lakeDir, 'series')}) ORDER BY 1`);
    // The market series; the options, raw tape (test/http/series-ids.test.ts) and whole-venue catalogue series
    // (test/http/catalogue-series.test.ts) follow them.
    const marketSeries = r.body.filter((s: { asset_class: string }) => !['options', 'raw', 'catalogue'].includes(s.asset_class));
    expect(marketSeries.map((s: { series_id: string }) => s.series_id)).toEqual(ids.map((x) => x.series_id));
    for (const s of marketSeries) {
      for (const k of [
        'series_id',
        'broker',
        'broker_display',
        'asset_class',
        'category',
        'asset',
        'asset_symbol',
        'timeframe',
        'name',
        'description',
        'catalogued_markets',
        'shoppable_markets',
        'earliest',
        'latest',
        'data_current_through',
        'coming_soon',
      ])
        expect(s).toHaveProperty(k);
      const mine = markets.filter((m) => m.series_id === s.series_id);
      expect(s.catalogued_markets).toBe(mine.length);
      expect(s.shoppable_markets).toBe(mine.filter((m) => Number(m.trade_count ?? 0) > 0 || Number(m.orderbook_count ?? 0) > 0).length);
    }
    expect(r.body.some((s: { shoppable_markets: number }) => s.shoppable_markets > 0)).toBe(true);
  });

  it('gets one series; unknown → 404', async () => {
    const list = (await L.get('/v1/series')).body;
    const one = await L.get(`/v1/series/${encodeURIComponent(list[0].series_id)}`, { key: null });
    expect(one.status).toBe(200);
    expect(one.body).toEqual(list[0]);
    for (const bad of ['nope', "';DROP TABLE x;--", '%', 'ünï']) {
      const r = await L.get(`/v1/series/${encodeURIComponent(bad)}`, { key: null });
      expect(r.status, bad).toBe(404);
      expect(r.body).toEqual({ detail: 'Series not found' });
    }
  });

  it('estimates a series from the lake: rows of all its markets, markets with rows', async () => {
    const list = (await L.get('/v1/series')).body as { series_id: string; shoppable_markets: number }[];
    // Market series only: options and raw series have no market estimate.
    const s = list.filter((x) => x.shoppable_markets > 0 && !/^[a-z]+:/.test(x.series_id)).sort((a, b) => b.shoppable_markets - a.shoppable_markets)[0]!;
    const mine = markets.filter((m) => m.series_id === s.series_id);
    const toks = mine.flatMap((m) => (m.outcome_token_ids as string[] | null) ?? []);
    const counts = await L.rows(
      `SELECT token_id, count(*) AS n FROM read_parquet(${glob(L.lakeDir, 'trades')}) WHERE token_id IN (${toks.map((t) => `'${t}'`).join(',')}) GROUP BY 1`,
    );
    const rows = counts.reduce((a, c) => a + Number(c.n), 0);
    const withRows = mine.filter((m) => ((m.outcome_token_ids as string[] | null) ?? []).some((t) => counts.some((c) => c.token_id === t))).length;
    const r = await L.get(`/v1/series/${encodeURIComponent(s.series_id)}/estimate`, {
      method: 'POST',
      body: JSON.stringify({ data_type: 'trades' }),
      key: null,
    });
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({
      series_id: s.series_id,
      data_type: 'trades',
      estimated_rows: rows,
      markets_in_range: withRows,
      pricing_model: 'subscription',
    });
    expect(r.body.estimated_size_bytes).toBeGreaterThan(0);
    const bad = await L.get(`/v1/series/${encodeURIComponent(s.series_id)}/estimate`, { method: 'POST', body: JSON.stringify({ data_type: 'x' }), key: null });
    expect(bad.status).toBe(422);
    expect(bad.body.detail[0].loc).toEqual(['body', 'data_type']);
    expect((await L.get('/v1/series/nope/estimate', { method: 'POST', body: '{}', key: null })).status).toBe(404);
  });
});
