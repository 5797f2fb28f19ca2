import { DownloadHistoryResponse } from '../../src/http/account-schemas.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestKey, tempDir, testConfig } from '../helpers/server.js';
import { call, startWithTable } from '../helpers/accounts.js';
import type { RunningServer } from '../../src/server.js';
import { limitTestRoutes as testRoutes } from '../helpers/limit-routes.js';
import { expireSubscriptions } from '../../src/state/accounts.js';

const GB = 1024 ** 3;

describe('request rate limits (express-rate-limit) and the usage meter', () => {
  const tmp = tempDir();
  let srv: RunningServer;
  beforeAll(async () => {
    srv = await startWithTable(testConfig({ PMLAKE_LAKE: `${tmp.dir}/lake`, PMLAKE_STATE: `${tmp.dir}/state` }), testRoutes);
  });
  afterAll(async () => {
    await srv.close();
    tmp.cleanup();
  });

  it('60/minute per key: the 61st gets 429 "Rate limit exceeded" with Retry-After and X-RateLimit-*', async () => {
    const a = await createTestKey(srv, { email: 'rl-a@example.com' });
    const b = await createTestKey(srv, { email: 'rl-b@example.com' });
    let last;
    for (let i = 0; i < 60; i++) {
      last = await call(srv, 'GET', '/test/ok', { key: a });
      expect(last.status).toBe(200);
      expect(last.headers.get('x-ratelimit-limit')).toBe('60');
      expect(last.headers.get('x-ratelimit-remaining')).toBe(String(59 - i));
    }
    const over = await call(srv, 'GET', '/test/ok', { key: a });
    expect(over.status).toBe(429);
    expect(over.body).toEqual({ detail: 'Rate limit exceeded' });
    const retry = Number(over.headers.get('retry-after'));
    expect(retry).toBeGreaterThanOrEqual(1);
    expect(retry).toBeLessThanOrEqual(60);
    expect(over.headers.get('x-ratelimit-limit')).toBe('60');
    expect(over.headers.get('x-ratelimit-remaining')).toBe('0');
    const reset = Number(over.headers.get('x-ratelimit-reset'));
    const nowS = Date.now() / 1000;
    expect(reset).toBeGreaterThanOrEqual(Math.floor(nowS));
    expect(reset).toBeLessThanOrEqual(Math.ceil(nowS) + 60);
    // Another key has its own bucket.
    expect((await call(srv, 'GET', '/test/ok', { key: b })).status).toBe(200);
  });

  it('a 5xx does not consume a slot', async () => {
    const k = await createTestKey(srv, { email: 'rl-5xx@example.com' });
    for (let i = 0; i < 10; i++) {
      const r = await call(srv, 'GET', '/test/boom', { key: k });
      expect(r.status).toBe(500);
      expect(r.body).toEqual({ detail: 'Internal server error' });
    }
    const ok = await call(srv, 'GET', '/test/ok', { key: k });
    expect(ok.headers.get('x-ratelimit-remaining')).toBe('59');
    // A 4xx does consume one (bad requests are limited too).
    await call(srv, 'GET', '/test/pull?bytes=abc', { key: k });
    expect((await call(srv, 'GET', '/test/ok', { key: k })).headers.get('x-ratelimit-remaining')).toBe('57');
  });

  it('orders and checkout: 5/minute on top of the default bucket', async () => {
    const k = await createTestKey(srv, { email: 'rl-orders@example.com' });
    for (let i = 0; i < 5; i++) expect((await call(srv, 'POST', '/test/order', { key: k })).status).toBe(200);
    const over = await call(srv, 'POST', '/test/order', { key: k });
    expect(over.status).toBe(429);
    expect(over.body).toEqual({ detail: 'Rate limit exceeded' });
    expect(over.headers.get('x-ratelimit-limit')).toBe('5');
    expect(Number(over.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    expect((await call(srv, 'GET', '/test/ok', { key: k })).status).toBe(200);
  });

  it('the plan must cover the data set: 402 upgrade_required / subscription_required', async () => {
    const free = await createTestKey(srv, { email: 'meter-free@example.com', plan: 'free' });
    const r = await call(srv, 'GET', '/test/pull?dataset=raw', { key: free });
    expect(r.status).toBe(402);
    expect(r.body.detail).toMatchObject({ code: 'upgrade_required', required_plan: 'professional' });
    expect(typeof r.body.detail.message).toBe('string');
    const exp = await call(srv, 'GET', '/test/pull?dataset=trades&kind=export', { key: free });
    expect(exp.status).toBe(402);
    expect(exp.body.detail.code).toBe('upgrade_required');
    expect((await call(srv, 'GET', '/test/pull?dataset=trades', { key: free })).status).toBe(200);

    const lapsed = await createTestKey(srv, { email: 'meter-lapsed@example.com', plan: 'professional' });
    expect((await call(srv, 'GET', '/test/pull?dataset=raw', { key: lapsed })).status).toBe(200);
    await expireSubscriptions(srv.ctx.state, (await srv.ctx.state.getUserByEmail('meter-lapsed@example.com'))!.id);
    const s = await call(srv, 'GET', '/test/pull?dataset=raw', { key: lapsed });
    expect(s.status).toBe(402);
    expect(s.body.detail).toMatchObject({ code: 'subscription_required' });
    // What Free covers still works after the lapse, under Free's limits.
    expect((await call(srv, 'GET', '/test/pull?dataset=trades', { key: lapsed })).status).toBe(200);
    expect((await call(srv, 'GET', '/v1/user/me', { key: lapsed })).body.plan).toBe('free');
  });

  it('a read-only key cannot pull (403)', async () => {
    const ro = await createTestKey(srv, { email: 'meter-ro@example.com', scopes: ['read'] });
    const r = await call(srv, 'GET', '/test/pull', { key: ro });
    expect(r.status).toBe(403);
  });

  it('Free: 10 downloads/hour → 429 with Retry-After and X-RateLimit-*; refunded downloads free their slot', async () => {
    const k = await createTestKey(srv, { email: 'meter-rate@example.com', plan: 'free' });
    for (let i = 0; i < 3; i++) expect((await call(srv, 'GET', '/test/pull?fail=1', { key: k })).status).toBe(500);
    for (let i = 0; i < 10; i++) expect((await call(srv, 'GET', '/test/pull', { key: k })).status).toBe(200);
    const over = await call(srv, 'GET', '/test/pull', { key: k });
    expect(over.status).toBe(429);
    expect(over.body).toEqual({ detail: 'Rate limit exceeded' });
    const retry = Number(over.headers.get('retry-after'));
    expect(retry).toBeGreaterThan(3500);
    expect(retry).toBeLessThanOrEqual(3600);
    expect(over.headers.get('x-ratelimit-limit')).toBe('10');
    expect(over.headers.get('x-ratelimit-remaining')).toBe('0');
    // Exports are not downloads: the download rate does not apply to them (Free has no exports anyway → 402).
    const hist = await call(srv, 'GET', '/v1/user/downloads?limit=500', { key: k });
    expect(hist.body.filter((d: any) => d.status === 'completed')).toHaveLength(10);
    expect(hist.body.filter((d: any) => d.status === 'failed')).toHaveLength(3);
  });

  it('Professional: burst cap of 20 downloads per minute', async () => {
    const k = await createTestKey(srv, { email: 'meter-burst@example.com' });
    for (let i = 0; i < 20; i++) expect((await call(srv, 'GET', '/test/pull', { key: k })).status).toBe(200);
    const over = await call(srv, 'GET', '/test/pull', { key: k });
    expect(over.status).toBe(429);
    expect(over.headers.get('x-ratelimit-limit')).toBe('20');
    expect(Number(over.headers.get('retry-after'))).toBeLessThanOrEqual(60);
  });

  it('fair use: reserve at begin, settle to actual bytes, refund on 5xx; used up → 429 fair_use_cap without Retry-After', async () => {
    const k = await createTestKey(srv, { email: 'meter-fair@example.com', plan: 'free' }); // 1 GB a month
    const MB = 1024 ** 2;
    // Estimated 512 MB but only 256 MB sent: the allowance is charged what was sent.
    expect((await call(srv, 'GET', `/test/pull?bytes=${512 * MB}&actual=${256 * MB}`, { key: k })).status).toBe(200);
    // A failed pull reserves 700 MB and gives it back.
    expect((await call(srv, 'GET', `/test/pull?bytes=${700 * MB}&fail=1`, { key: k })).status).toBe(500);
    expect((await call(srv, 'GET', `/test/pull?bytes=${700 * MB}`, { key: k })).status).toBe(200);
    const me = await call(srv, 'GET', '/v1/user/me', { key: k });
    expect(me.body.fair_use).toMatchObject({ allowance_bytes: GB, used_bytes: 956 * MB, remaining_bytes: 68 * MB });
    // Does not fit the remaining 68 MB.
    const big = await call(srv, 'GET', `/test/pull?bytes=${100 * MB}`, { key: k });
    expect(big.status).toBe(429);
    expect(big.body.detail).toMatchObject({ code: 'fair_use_cap' });
    expect(big.headers.get('retry-after')).toBeNull();
    expect(Date.parse(big.body.detail.resets_at)).toBeGreaterThan(Date.now());
    // Fill it, then even an unknown-size pull is refused until the next billing date.
    expect((await call(srv, 'GET', `/test/pull?bytes=${68 * MB}`, { key: k })).status).toBe(200);
    const none = await call(srv, 'GET', '/test/pull?bytes=0', { key: k });
    expect(none.status).toBe(429);
    expect(none.body.detail.code).toBe('fair_use_cap');
    expect(none.body.detail.message).toMatch(/used up/);
    expect(none.headers.get('retry-after')).toBeNull();
  });

  it('50 parallel pulls against one allowance never exceed it (reservation is atomic)', async () => {
    const k = await createTestKey(srv, { email: 'meter-race@example.com' }); // 50 GB a month
    const replies = await Promise.all(Array.from({ length: 50 }, () => call(srv, 'GET', `/test/pull?kind=export&dataset=trades&bytes=${2 * GB}`, { key: k })));
    const ok = replies.filter((r) => r.status === 200);
    const capped = replies.filter((r) => r.status === 429);
    expect(ok).toHaveLength(25);
    expect(capped).toHaveLength(25);
    for (const r of capped) expect(r.body.detail.code).toBe('fair_use_cap');
    // Independent sum over the history the API reports.
    const hist = await call(srv, 'GET', '/v1/user/downloads?limit=500&status=completed', { key: k });
    const sum = hist.body.reduce((s: number, d: any) => s + d.size_bytes, 0);
    expect(sum).toBe(50 * GB);
    expect(sum).toBe(ok.reduce((s, r) => s + r.body.sent, 0));
  });

  it('download history: rows, bytes, status; limit/offset/status filters', async () => {
    const k = await createTestKey(srv, { email: 'meter-hist@example.com' });
    await call(srv, 'GET', '/test/pull?bytes=100&actual=90', { key: k });
    await call(srv, 'GET', '/test/pull?bytes=100&fail=1', { key: k });
    const all = await call(srv, 'GET', '/v1/user/downloads', { key: k });
    expect(all.status).toBe(200);
    expect(all.body).toHaveLength(2);
    for (const d of all.body) DownloadHistoryResponse.parse(d);
    const done = all.body.find((d: any) => d.status === 'completed');
    expect(done).toMatchObject({ market_id: '123', data_type: 'trades', format: 'csv', file_name: 'x.csv', record_count: 7, size_bytes: 90, cost: 0 });
    expect((await call(srv, 'GET', '/v1/user/downloads?status=failed', { key: k })).body).toHaveLength(1);
    expect((await call(srv, 'GET', '/v1/user/downloads?limit=1&offset=1', { key: k })).body).toHaveLength(1);
    expect((await call(srv, 'GET', '/v1/user/downloads?limit=0', { key: k })).status).toBe(422);
    expect((await call(srv, 'GET', '/v1/user/downloads?limit=501', { key: k })).status).toBe(422);
    expect((await call(srv, 'GET', '/v1/user/downloads?status=DROP%20TABLE', { key: k })).status).toBe(422);
  });

  it('anonymous callers are limited per IP; limit "none" routes are exempt', async () => {
    for (let i = 0; i < 60; i++) await call(srv, 'GET', '/test/public');
    const over = await call(srv, 'GET', '/test/public');
    expect(over.status).toBe(429);
    expect(over.body).toEqual({ detail: 'Rate limit exceeded' });
    const free = await call(srv, 'GET', '/test/unlimited');
    expect(free.status).toBe(200);
    expect(free.headers.get('x-ratelimit-limit')).toBeNull();
  });
});
