import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildQueryLake, catalog, type QueryLake } from '../helpers/query-lake.js';
import { startTestServer, tempDir, testConfig } from '../helpers/server.js';
import type { RunningServer } from '../../src/server.js';

type M = Record<string, unknown>;

describe('GET /v1/public/markets, /v1/public/markets/{id}: no key, per-IP limit', () => {
  let L: QueryLake;
  let cat: M[];
  /** The markets the anchor's rule makes eligible, computed here from the catalogue file: volume > 0 and data. */
  let eligible: M[];

  beforeAll(async () => {
    L = await buildQueryLake();
    cat = await L.rows(`SELECT id::VARCHAR AS id, volume, trade_count, orderbook_count, resolved FROM read_parquet(${catalog(L.lakeDir, 'markets')})`);
    eligible = cat
      .filter((m) => Number(m.volume ?? 0) > 0 && (Number(m.trade_count ?? 0) > 0 || Number(m.orderbook_count ?? 0) > 0))
      .sort((a, b) => Number(b.volume) - Number(a.volume) || (String(a.id) < String(b.id) ? -1 : String(a.id) > String(b.id) ? 1 : 0));
  }, 120_000);
  afterAll(async () => {
    await L?.close();
  });

  it('lists the eligible markets by volume without a key; pages and resolved filter agree with the catalogue', async () => {
    expect(eligible.length).toBeGreaterThan(1);
    const r = await L.get('/v1/public/markets', { key: null });
    expect(r.status).toBe(200);
    expect(r.body.map((m: M) => m.id)).toEqual(eligible.map((m) => m.id));
    for (const m of r.body) expect(Object.keys(m).sort()).toEqual(['category', 'id', 'orderbook_count', 'question', 'resolved', 'trade_count']);
    const page = await L.get('/v1/public/markets?limit=1&offset=1', { key: null });
    expect(page.body.map((m: M) => m.id)).toEqual([eligible[1]!.id]);
    for (const flag of [true, false]) {
      const f = await L.get(`/v1/public/markets?resolved=${flag}`, { key: null });
      expect(f.status).toBe(200);
      expect(f.body.map((m: M) => m.id)).toEqual(eligible.filter((m) => Boolean(m.resolved ?? false) === flag).map((m) => m.id));
    }
    for (const bad of ['limit=0', 'limit=5001', 'offset=-1', 'resolved=maybe']) {
      const b = await L.get(`/v1/public/markets?${bad}`, { key: null });
      expect(b.status, bad).toBe(422);
      expect(b.body).toHaveProperty('detail');
    }
  });

  it("the public views equal the keyed Market object's corresponding fields", async () => {
    const list = (await L.get('/v1/public/markets', { key: null })).body as M[];
    for (const s of list.slice(0, 5)) {
      const full = (await L.get(`/v1/markets/${s.id}`)).body as M;
      const one = await L.get(`/v1/public/markets/${s.id}`, { key: null });
      expect(one.status).toBe(200);
      for (const k of Object.keys(s)) expect(s[k], k).toEqual(full[k]);
      const shared = ['id', 'question', 'category', 'outcomes', 'resolved', 'winning_outcome', 'resolution_date', 'start_date', 'end_date'];
      for (const k of [...shared, 'trade_count', 'orderbook_count', 'data_from', 'data_to']) expect(one.body[k], k).toEqual(full[k]);
      const w = full.winning_outcome as number | null;
      expect(one.body.winning_outcome_label).toBe(w === null ? null : ((full.outcomes as string[])[w] ?? null));
      // Price-free, as the anchor's schema: no prices, volume or liquidity.
      for (const k of ['outcome_prices', 'volume', 'liquidity', 'volume_24h']) expect(one.body).not.toHaveProperty(k);
    }
  });

  it('unknown market, or one holding no data → 404 "Market not found"', async () => {
    expect((await L.get('/v1/public/markets/999999999', { key: null })).body).toEqual({ detail: 'Market not found' });
    const empty = cat.find((m) => Number(m.trade_count ?? 0) === 0 && Number(m.orderbook_count ?? 0) === 0);
    if (empty) {
      const r = await L.get(`/v1/public/markets/${empty.id}`, { key: null });
      expect(r.status).toBe(404);
      expect(r.body).toEqual({ detail: 'Market not found' });
    }
  });

  describe('with rate limits on (a second server over the same lake)', () => {
    const tmp = tempDir();
    let srv: RunningServer;
    beforeAll(async () => {
      srv = await startTestServer(testConfig({ PMLAKE_LAKE: L.lakeDir, PMLAKE_STATE: path.join(tmp.dir, 'state'), PMLAKE_RATE_LIMITS: 'on' }));
    });
    afterAll(async () => {
      await srv?.close();
      tmp.cleanup();
    });

    it('anonymous callers get 60 a minute per IP across the public routes; the 61st is 429', async () => {
      const id = eligible[0]!.id as string;
      for (let i = 0; i < 60; i++) {
        const r = await fetch(`${srv.url}${i % 2 ? `/v1/public/markets/${id}` : '/v1/public/markets?limit=5'}`);
        expect(r.status).toBe(200);
        expect(r.headers.get('x-ratelimit-remaining')).toBe(String(59 - i));
      }
      const over = await fetch(`${srv.url}/v1/public/markets`);
      expect(over.status).toBe(429);
      expect(await over.json()).toEqual({ detail: 'Rate limit exceeded' });
      expect(Number(over.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
      // The probes stay answerable: the root is exempt like /health.
      expect((await fetch(`${srv.url}/`)).status).toBe(200);
    });
  });
});
