import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildDownloadsLake, type DlLake } from '../helpers/downloads-lake.js';
import { glob } from '../helpers/query-lake.js';

/**
 * Behaviours the anchor's clients rely on that pmlake used to refuse: series estimates of greeks and snapshots,
 * options snapshots refused up front, order items by token id at any timeframe, unknown sort_by. Every count is
 * read back from the lake's Parquet files here, in plain SQL, not through the code under test.
 */
describe('anchor behaviours', () => {
  let L: DlLake;
  /** A market series whose tokens have book snapshots, and the options series of the lake. */
  let series: string;
  let options: { id: string; venue: string; underlying: string };

  const json = async (p: string, init?: RequestInit & { key?: string | null }) => {
    const r = await L.fetch(p, init);
    return { status: r.status, body: await r.json() };
  };
  const post = (p: string, body: unknown, key?: string) =>
    json(p, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body), ...(key ? { key } : {}) });
  const n = (v: unknown) => Number(v);

  beforeAll(async () => {
    L = await buildDownloadsLake({ markets: 8, days: 2 });
    const s = await L.rows(
      `WITH tok AS (SELECT series_id, unnest(outcome_token_ids) AS t FROM read_parquet(${glob(L.lakeDir, 'catalog/markets')}) WHERE series_id IS NOT NULL)
       SELECT series_id, count(*) AS n FROM read_parquet(${glob(L.lakeDir, 'book_snapshots')}) b JOIN tok ON b.asset_id = tok.t
       GROUP BY 1 ORDER BY n DESC, 1 LIMIT 1`,
    );
    series = String(s[0]!.series_id);
    const o = await L.rows(`SELECT DISTINCT venue, underlying FROM read_parquet(${glob(L.lakeDir, 'options')}) ORDER BY 1, 2 LIMIT 1`);
    const venue = String(o[0]!.venue);
    const underlying = String(o[0]!.underlying);
    options = { id: `${venue}:${underlying.toLowerCase()}-options`, venue, underlying };
  }, 180_000);
  afterAll(async () => {
    await L?.close();
  });

  it('series estimate, data_type=snapshots: the book snapshots of the series tokens, whole and windowed', async () => {
    const count = async (where: string) =>
      n(
        (
          await L.rows(
            `WITH tok AS (SELECT id, unnest(outcome_token_ids) AS t FROM read_parquet(${glob(L.lakeDir, 'catalog/markets')}) WHERE series_id = '${series}')
             SELECT count(*) AS n, count(DISTINCT tok.id) AS m FROM read_parquet(${glob(L.lakeDir, 'book_snapshots')}) b JOIN tok ON b.asset_id = tok.t ${where}`,
          )
        )[0]!.n,
      );
    const all = await post(`/v1/series/${series}/estimate`, { data_type: 'snapshots' });
    expect(all.status).toBe(200);
    expect(all.body.data_type).toBe('snapshots');
    expect(all.body.estimated_rows).toBe(await count(''));
    expect(all.body.estimated_rows).toBeGreaterThan(0);
    expect(all.body.in_range).toBe(true);
    const span = await L.rows(`SELECT min(ts) AS lo, max(ts) AS hi FROM read_parquet(${glob(L.lakeDir, 'book_snapshots')})`);
    const mid = new Date((new Date(String(span[0]!.lo)).getTime() + new Date(String(span[0]!.hi)).getTime()) / 2);
    mid.setUTCMilliseconds(0);
    const start = mid.toISOString();
    const part = await post(`/v1/series/${series}/estimate`, { data_type: 'snapshots', start });
    expect(part.status).toBe(200);
    expect(part.body.estimated_rows).toBe(await count(`WHERE b.ts >= TIMESTAMP '${start.replace('T', ' ').replace('Z', '')}'`));
    expect(part.body.estimated_rows).toBeLessThan(all.body.estimated_rows);
  });

  it('series estimate, data_type=greeks: one row per option trade of the options series; refused for market series', async () => {
    const want = await L.rows(
      `SELECT count(*) AS n, count(DISTINCT instrument_name) AS m FROM read_parquet(${glob(L.lakeDir, 'options')})
       WHERE venue = '${options.venue}' AND underlying = '${options.underlying}'`,
    );
    const got = await post(`/v1/series/${options.id}/estimate`, { data_type: 'greeks' });
    expect(got.status).toBe(200);
    expect(got.body.series_id).toBe(options.id);
    expect(got.body.estimated_rows).toBe(n(want[0]!.n));
    expect(got.body.estimated_rows).toBeGreaterThan(0);
    expect(got.body.markets_in_range).toBe(n(want[0]!.m));
    expect(got.body.estimated_size_bytes).toBeGreaterThan(0);
    const trades = await post(`/v1/series/${options.id}/estimate`, { data_type: 'trades' });
    expect(trades.body.estimated_rows).toBe(got.body.estimated_rows);
    const wrong = await post(`/v1/series/${series}/estimate`, { data_type: 'greeks' });
    expect(wrong.status).toBe(400);
    expect(wrong.body.detail.code).toBe('wrong_data_type');
    const snap = await post(`/v1/series/${options.id}/estimate`, { data_type: 'snapshots' });
    expect(snap.status).toBe(400);
    expect(snap.body.detail.code).toBe('options_data_type_unavailable');
  });

  it('options downloads of snapshots: a 422 naming data_type, before anything is sent (direct, series route, bulk)', async () => {
    for (const p of [`/v1/download/options?series_id=${options.id}&data_type=snapshots`, `/v1/download/series?series_id=${options.id}&data_type=snapshots`]) {
      const r = await json(p);
      expect(r.status).toBe(422);
      expect(r.body.detail[0].loc).toEqual(['query', 'data_type']);
      expect(r.body.detail[0].input).toBe('snapshots');
    }
    const ok = await L.fetch(`/v1/download/options?series_id=${options.id}&data_type=greeks&format=csv`);
    expect(ok.status).toBe(200);
    await ok.arrayBuffer();
  });

  it('order items: an outcome token id as market_id and any timeframe (7m), sized from that token alone', async () => {
    const m = await L.rows(
      `WITH tok AS (SELECT id, unnest(outcome_token_ids) AS t FROM read_parquet(${glob(L.lakeDir, 'catalog/markets')}))
       SELECT tok.id, tok.t, count(*) AS n FROM read_parquet(${glob(L.lakeDir, 'trades')}) x JOIN tok ON x.token_id = tok.t
       GROUP BY 1, 2 ORDER BY n DESC LIMIT 1`,
    );
    const token = String(m[0]!.t);
    const candles = n((await L.rows(`SELECT count(*) AS n FROM read_parquet(${glob(L.lakeDir, 'candles_1m')}) WHERE token_id = '${token}'`))[0]!.n);
    const r = await post(
      '/v1/orders',
      {
        items: [
          { market_id: token, data_type: 'trades' },
          { market_id: token, data_type: 'ohlcv', timeframe: '7m' },
        ],
      },
      L.otherKey,
    );
    expect(r.status).toBe(200);
    expect(r.body.items[0].market_id).toBe(token);
    expect(r.body.items[0].record_count).toBe(n(m[0]!.n));
    expect(r.body.items[1].timeframe).toBe('7m');
    // The legacy sizing counts every minute candle of an ohlcv item whatever its timeframe (test/accounts/order-sizing.test.ts).
    expect(r.body.items[1].record_count).toBe(candles);
    // The whole market (every outcome) holds more trades than one of its tokens whenever the other has any.
    const whole = await post('/v1/orders', { items: [{ market_id: String(m[0]!.id), data_type: 'trades' }] }, L.otherKey);
    const both = n(
      (
        await L.rows(
          `SELECT count(*) AS n FROM read_parquet(${glob(L.lakeDir, 'trades')}) WHERE token_id IN
           (SELECT unnest(outcome_token_ids) FROM read_parquet(${glob(L.lakeDir, 'catalog/markets')}) WHERE id = '${String(m[0]!.id)}')`,
        )
      )[0]!.n,
    );
    expect(whole.body.items[0].record_count).toBe(both);
    const bad = await post('/v1/orders', { items: [{ market_id: '9'.repeat(77), data_type: 'trades' }] }, L.otherKey);
    expect(bad.status).toBe(404);
    const badTf = await post('/v1/orders', { items: [{ market_id: token, data_type: 'ohlcv', timeframe: '7x' }] }, L.otherKey);
    expect(badTf.status).toBe(422);
    expect(badTf.body.detail[0].loc).toEqual(['body', 'items', 0, 'timeframe']);
  });

  it('GET /v1/markets: an unknown sort_by sorts by the default, as the anchor does', async () => {
    const dflt = await json('/v1/markets?limit=50');
    const unknown = await json('/v1/markets?limit=50&sort_by=no_such_sort');
    expect(dflt.status).toBe(200);
    expect(unknown).toEqual(dflt);
    const seriesDflt = await json(`/v1/markets?series_id=${series}&limit=50`);
    expect(await json(`/v1/markets?series_id=${series}&limit=50&sort_by=whatever`)).toEqual(seriesDflt);
    // The default (top) is rows descending: trades plus book rows, read from the catalogue here.
    const top = await L.rows(
      `SELECT id FROM read_parquet(${glob(L.lakeDir, 'catalog/markets')})
       ORDER BY coalesce(trade_count, 0) + coalesce(orderbook_count, 0) DESC, volume DESC NULLS LAST, id LIMIT 50`,
    );
    expect(unknown.body.map((x: { id: string }) => x.id)).toEqual(top.map((x) => String(x.id)));
    expect((await json(`/v1/markets?limit=5&sort_by=${'x'.repeat(101)}`)).status).toBe(422);
  });
});
