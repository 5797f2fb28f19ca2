import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generate } from '../../sim/generate/index.js';
import { runIngest } from '../../ingest/run.js';
import { buildQueryLake, glob, type QueryLake } from '../helpers/query-lake.js';

/**
 * Catalogue-like answers (raw data-set listing, series, stats) are computed once per lake stamp — the ingest
 * ledger and catalogue files (src/lake/stamp.ts) — and recomputed as soon as a new ingest lands.
 */
describe('answers cached per lake stamp: raw/datasets, series, stats', () => {
  let L: QueryLake;
  const stampTtl = () => new Promise((r) => setTimeout(r, 600)); // lakeStamp stats the files at most every 500 ms

  beforeAll(async () => {
    L = await buildQueryLake();
  });
  afterAll(async () => {
    await L?.close();
  });

  const rawCounts = async (): Promise<Record<string, number>> => {
    const r = await L.rows(`SELECT
      count(*) FILTER (WHERE list_contains(event_types, 'book') OR list_contains(event_types, 'price_change') OR list_contains(event_types, 'tick_size_change')) AS polymarket_l2_deltas,
      count(*) FILTER (WHERE list_contains(event_types, 'last_trade_price')) AS polymarket_trades,
      count(*) FILTER (WHERE list_contains(event_types, 'best_bid_ask')) AS polymarket_bbo,
      count(*) AS polymarket_raw
      FROM read_parquet(${glob(L.lakeDir, 'raw')})`);
    return Object.fromEntries(Object.entries(r[0]!).map(([k, v]) => [k, Number(v)]));
  };
  const listed = (body: { data: { data_type: string; record_count: number }[] }) => Object.fromEntries(body.data.map((d) => [d.data_type, d.record_count]));

  it('reuses the answer while the stamp is unchanged and recomputes after an ingest lands', async () => {
    const first = await L.get('/v1/download/raw/datasets');
    expect(first.status).toBe(200);
    expect(listed(first.body)).toEqual(await rawCounts());
    expect(first.body.data[0].size_bytes).toBeGreaterThan(0);
    const series0 = (await L.get('/v1/series')).body;
    const stats0 = (await L.get('/v1/stats')).body;

    // The raw files moved away behind the service's back (no ingest, no ledger line): the cached listing
    // still answers — before the cache, each call re-scanned the tape (1.6–2.3 s on a 1M-trade lake).
    const raw = path.join(L.lakeDir, 'raw');
    fs.renameSync(raw, `${raw}.away`);
    try {
      await stampTtl();
      expect((await L.get('/v1/download/raw/datasets')).body).toEqual(first.body);
    } finally {
      fs.renameSync(`${raw}.away`, raw);
    }

    // A new batch lands (a later day: new tape, trades, markets): every answer follows at once.
    const gen = path.join(path.dirname(L.lakeDir), 'gen2');
    await generate({ markets: 4, days: 1, seed: 99, start: '2025-10-02', out: gen, workers: 0, rate: 0.3 });
    await runIngest([gen], { lakeDir: L.lakeDir, threads: 2 });
    await stampTtl();

    const second = await L.get('/v1/download/raw/datasets');
    const want = await rawCounts();
    expect(listed(second.body)).toEqual(want);
    expect(want.polymarket_raw).toBeGreaterThan(listed(first.body).polymarket_raw!);

    const stats1 = (await L.get('/v1/stats')).body;
    const trades = await L.rows(`SELECT count(*) AS n FROM read_parquet(${glob(L.lakeDir, 'trades')})`);
    expect(stats1.trades).toBe(Number(trades[0]!.n));
    expect(stats1.trades).toBeGreaterThan(stats0.trades);
    expect(stats1.generated_at > stats0.generated_at).toBe(true);

    const series1 = (await L.get('/v1/series')).body;
    expect(series1).not.toEqual(series0);
    const one = series1[0];
    expect((await L.get(`/v1/series/${encodeURIComponent(one.series_id)}`)).body).toEqual(one);
    expect((await L.get('/v1/series/no-such-series')).status).toBe(404);
  });
});
