import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildQueryLake, type QueryLake } from '../helpers/query-lake.js';

/**
 * GET /v1/markets/{id} serves a JSON body and ETag built once per catalogue row (src/http/markets/detail.ts). The
 * bytes must be the Market object the list endpoint serializes per request, and conditional GET and HEAD
 * must behave as with res.json.
 */
describe('GET /v1/markets/{id}: the cached body', () => {
  let L: QueryLake;
  beforeAll(async () => {
    L = await buildQueryLake({ markets: 4, days: 2 });
  });
  afterAll(async () => {
    await L?.close();
  });

  it('is the Market the list serves, the same bytes and ETag on every request, by id or by token id', async () => {
    const list = await L.get('/v1/markets?limit=1000');
    expect(list.status).toBe(200);
    // A handful is enough: every row goes through the same cache.
    for (const m of (list.body as Record<string, unknown>[]).slice(0, 8)) {
      const a = await L.get(`/v1/markets/${String(m.id)}`);
      expect(a.status).toBe(200);
      expect(a.headers.get('content-type')).toBe('application/json; charset=utf-8');
      expect(a.body).toEqual(m);
      const b = await L.get(`/v1/markets/${String(m.id)}`);
      expect(b.body).toEqual(a.body);
      expect(b.headers.get('etag')).toBe(a.headers.get('etag'));
      expect(Number(a.headers.get('content-length'))).toBe(Buffer.byteLength(JSON.stringify(m)));
      const tokens = (m.outcome_token_ids as string[] | null) ?? [];
      for (const t of tokens) expect((await L.get(`/v1/markets/${t}`)).body).toEqual(m);
    }
  });

  it('answers If-None-Match with 304 and HEAD without a body', async () => {
    const list = await L.get('/v1/markets?limit=1');
    const id = String(list.body[0].id);
    const first = await L.get(`/v1/markets/${id}`);
    const etag = first.headers.get('etag');
    expect(etag).toMatch(/^W\/"/);
    // An explicit Cache-Control: fetch adds `no-cache` to a request with If-None-Match, which disables 304s.
    const again = await L.get(`/v1/markets/${id}`, { headers: { 'if-none-match': etag!, 'cache-control': 'max-age=0' } });
    expect(again.status).toBe(304);
    expect(again.body).toBe('');
    const head = await L.get(`/v1/markets/${id}`, { method: 'HEAD' });
    expect(head.status).toBe(200);
    expect(head.body).toBe('');
    expect(head.headers.get('etag')).toBe(etag);
  });
});
