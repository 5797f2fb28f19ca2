import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildDownloadsLake, type DlLake } from '../helpers/downloads-lake.js';
import { glob } from '../helpers/query-lake.js';
import { readZip } from '../helpers/zip.js';

/** Raw tape series ids, as the anchor names them (its document's examples: polymarket:l2-delta-tape). */
const RAW_IDS = ['polymarket:l2-delta-tape', 'polymarket:trades-tape', 'polymarket:bbo-tape', 'polymarket:raw-tape'];

type S = Record<string, unknown> & { series_id: string };

describe("series ids in the anchor's form, and the options and raw series in GET /v1/series", () => {
  let L: DlLake;
  /** A crypto series stored as `<asset>-up-or-down-15m` with markets holding trades, and its anchor spelling. */
  let slug: string;
  let anchor: string;

  const json = async (p: string, init?: RequestInit & { key?: string | null }) => {
    const r = await L.fetch(p, init);
    return { status: r.status, body: await r.json() };
  };

  beforeAll(async () => {
    L = await buildDownloadsLake({ markets: 8, days: 2 });
    const rows = await L.rows(
      `SELECT series_id, sum(trade_count) AS n FROM read_parquet(${glob(L.lakeDir, 'catalog/markets')})
       WHERE series_id LIKE '%-up-or-down-15m' GROUP BY 1 ORDER BY n DESC, 1 LIMIT 1`,
    );
    slug = String(rows[0]!.series_id);
    anchor = `polymarket:${slug.replace('-up-or-down-', '-')}`;
  }, 180_000);
  afterAll(async () => {
    await L?.close();
  });

  it('the found series has trades, and its anchor id is the short form (polymarket:btc-15m)', () => {
    expect(anchor).toMatch(/^polymarket:[a-z]+-15m$/);
  });

  it('GET /v1/series/{id}: the slug, polymarket:<slug> and the short form answer the same series; unknown forms 404', async () => {
    const bare = await json(`/v1/series/${slug}`, { key: null });
    expect(bare.status).toBe(200);
    expect(bare.body.series_id).toBe(slug);
    for (const id of [anchor, `polymarket:${slug}`]) expect(await json(`/v1/series/${id}`, { key: null })).toEqual(bare);
    for (const id of ['kalshi:btc-15m', 'polymarket:nope-15m', 'polymarket:'])
      expect((await json(`/v1/series/${encodeURIComponent(id)}`, { key: null })).status).toBe(404);
  });

  it('POST /v1/series/{id}/estimate: identical answers for both forms', async () => {
    for (const body of [{ data_type: 'trades' }, { data_type: 'ohlcv', timeframe: '1h' }]) {
      const init = { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body), key: null };
      const a = await json(`/v1/series/${slug}/estimate`, init);
      const b = await json(`/v1/series/${anchor}/estimate`, init);
      expect(a.status).toBe(200);
      expect(a.body.estimated_rows).toBeGreaterThan(0);
      expect(b).toEqual(a);
    }
  });

  it('GET /v1/markets?series_id=: the same markets for both forms, each of the stored series', async () => {
    const a = await json(`/v1/markets?series_id=${slug}&limit=1000`);
    const b = await json(`/v1/markets?series_id=${encodeURIComponent(anchor)}&limit=1000`);
    expect(a.status).toBe(200);
    expect(a.body.length).toBeGreaterThan(0);
    for (const m of a.body) expect(m.series_id).toBe(slug);
    expect(b).toEqual(a);
    expect((await json('/v1/markets?series_id=polymarket:nope-15m')).status).toBe(404);
  });

  it('GET /v1/download/series and a bulk series item: the same bytes and file name for both forms', async () => {
    const get = async (id: string) => {
      const r = await L.fetch(`/v1/download/series?series_id=${encodeURIComponent(id)}&format=csv&data_type=trades`);
      return { status: r.status, disposition: r.headers.get('content-disposition'), body: Buffer.from(await r.arrayBuffer()) };
    };
    const a = await get(slug);
    const b = await get(anchor);
    expect(a.status).toBe(200);
    expect(a.body.length).toBeGreaterThan(0);
    expect(b).toEqual(a);
    const bulk = async (id: string) => {
      const r = await L.fetch('/v1/download/bulk', {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ items: [{ kind: 'series', series_id: id, data_type: 'snapshots', format: 'json' }] }),
      });
      expect(r.status).toBe(200);
      const zip = readZip(Buffer.from(await r.arrayBuffer()));
      const files = [...zip.keys()].filter((k) => k !== 'manifest.json');
      return files.map((f) => [f, zip.get(f)!.toString('hex')]);
    };
    const za = await bulk(slug);
    expect(za).toHaveLength(1);
    expect(await bulk(anchor)).toEqual(za);
  });

  it('GET /v1/series lists the options series and the raw tape series, figures computed from the lake', async () => {
    const list = (await json('/v1/series', { key: null })).body as S[];
    const byId = new Map(list.map((s) => [s.series_id, s]));
    const opts = await L.rows(
      `SELECT venue, underlying, count(DISTINCT instrument_name)::INTEGER AS n, min(ts) AS lo, max(ts) AS hi FROM read_parquet(${glob(L.lakeDir, 'options')}) GROUP BY ALL`,
    );
    expect(opts.length).toBeGreaterThan(0);
    for (const o of opts) {
      const id = `${String(o.venue)}:${String(o.underlying).toLowerCase()}-options`;
      const s = byId.get(id);
      expect(s, id).toBeDefined();
      expect(s).toMatchObject({
        broker: o.venue,
        asset_class: 'options',
        asset_symbol: o.underlying,
        catalogued_markets: o.n,
        shoppable_markets: o.n,
        coming_soon: false,
      });
      expect(Date.parse(String(s!.earliest))).toBe((o.lo as Date).getTime());
      expect(Date.parse(String(s!.latest))).toBe((o.hi as Date).getTime());
      expect((await json(`/v1/series/${id}`, { key: null })).body).toEqual(s);
    }
    expect(byId.has('deribit:btc-options')).toBe(true);
    const events: Record<string, string[]> = {
      'polymarket:l2-delta-tape': ['book', 'price_change', 'tick_size_change'],
      'polymarket:trades-tape': ['last_trade_price'],
      'polymarket:bbo-tape': ['best_bid_ask'],
      'polymarket:raw-tape': [],
    };
    const frames = await L.rows(`SELECT event_types, condition_ids FROM read_parquet(${glob(L.lakeDir, 'raw')})`);
    for (const id of RAW_IDS) {
      const s = byId.get(id);
      expect(s, id).toBeDefined();
      const want = events[id]!;
      const mine = frames.filter((f) => want.length === 0 || (f.event_types as string[]).some((e) => want.includes(e)));
      const markets = new Set(mine.flatMap((f) => f.condition_ids as string[]));
      expect(s).toMatchObject({ broker: 'polymarket', asset_class: 'raw', catalogued_markets: markets.size });
    }
    // Every field of the anchor's SeriesResponse on every row, whatever its kind.
    const fields = ['series_id', 'broker', 'broker_display', 'asset_class', 'category', 'asset', 'asset_symbol', 'timeframe', 'name', 'description'];
    for (const s of list) {
      for (const f of fields) expect(typeof s[f], `${s.series_id}.${f}`).toBe('string');
      for (const f of ['catalogued_markets', 'shoppable_markets']) expect(Number.isInteger(s[f])).toBe(true);
    }
  });

  it('a raw series has no series estimate: 400 naming where to size it (options series are sized: anchor-behaviours.test.ts)', async () => {
    const init = { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ data_type: 'trades' }), key: null };
    const o = await json(`/v1/series/${RAW_IDS[0]}/estimate`, init);
    expect(o.status).toBe(400);
    expect(o.body.detail).toContain('/v1/download/raw/estimate');
  });
});
