import { UsageResponse } from '../../src/http/account-schemas.js';
import fs from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { exportJWK, generateKeyPair, SignJWT } from 'jose';
import { createTestKey, startTestServer, tempDir, testConfig } from '../helpers/server.js';
import { call } from '../helpers/accounts.js';
import { buildAccountsLake } from '../helpers/accounts-lake.js';
import type { RunningServer } from '../../src/server.js';

const JWT_SECRET = 'dashboard-jwt-secret-0123456789abcdef';

describe('usage, stats and the dashboard JWT', () => {
  const tmp = tempDir();
  let srv: RunningServer;
  beforeAll(async () => {
    await buildAccountsLake(`${tmp.dir}/lake`, { trades: 2000, books: 300 });
    srv = await startTestServer(testConfig({ PMLAKE_LAKE: `${tmp.dir}/lake`, PMLAKE_STATE: `${tmp.dir}/state`, PMLAKE_JWT_SECRET: JWT_SECRET }));
  });
  afterAll(async () => {
    await srv.close();
    tmp.cleanup();
  });

  it('GET /v1/stats: public lake aggregates, cached for a minute, no rate-limit headers', async () => {
    const r = await call(srv, 'GET', '/v1/stats');
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({
      markets: 2,
      series: 1,
      tokens: 4,
      trades: 2000,
      orderbook_snapshots: 300,
      data_from: '2025-01-01T00:00:00.000Z',
      data_to: new Date(Date.UTC(2025, 0, 1) + 1999 * 60_000).toISOString(),
    });
    expect(r.headers.get('x-ratelimit-limit')).toBeNull();
    expect(Date.parse(r.body.cached_until) - Date.parse(r.body.generated_at)).toBe(60_000);
    // Cached: new lake files do not show before the minute is over.
    fs.rmSync(`${tmp.dir}/lake/book_snapshots`, { recursive: true });
    const again = await call(srv, 'GET', '/v1/stats');
    expect(again.body.orderbook_snapshots).toBe(300);
    expect(again.body.generated_at).toBe(r.body.generated_at);
  });

  it('GET /v1/user/usage: requests per key and day, bytes and MB from the download history', async () => {
    const key = await createTestKey(srv, { email: 'usage@example.com' });
    const key2 = await createTestKey(srv, { email: 'usage@example.com', name: 'second' });
    for (let i = 0; i < 4; i++) await call(srv, 'GET', '/v1/user/me', { key });
    for (let i = 0; i < 3; i++) await call(srv, 'GET', '/v1/billing/balance', { key: key2 });
    // Two completed pulls and a refunded one, through the real meter.
    const principal = {
      userId: (await srv.ctx.state.getUserByEmail('usage@example.com'))!.id,
      email: 'usage@example.com',
      keyId: null,
      plan: 'professional',
      scopes: ['read', 'download'] as const,
    };
    for (const [bytes, ok] of [
      [3 * 1024 * 1024, true],
      [1024 * 1024, true],
      [999, false],
    ] as const) {
      const t = await srv.ctx.meter.begin(principal, { kind: 'download', dataset: 'trades', description: 'test', estimatedBytes: bytes });
      if (ok) await t.commit({ bytes, rows: 10 });
      else await t.refund('failed');
    }
    const u = await call(srv, 'GET', '/v1/user/usage', { key });
    expect(u.status).toBe(200);
    const today = new Date().toISOString().slice(0, 10);
    // 4 + 3 earlier requests; this usage request itself is counted once it has been answered.
    UsageResponse.parse(u.body);
    expect(u.body.total_requests).toBe(7);
    expect(u.body.total_bytes).toBe(4 * 1024 * 1024);
    expect(u.body.total_mb).toBe(4);
    expect(u.body.estimated_cost).toBe(4); // 4 MB of trades at the 1 USD/MB reference rate
    expect(u.body.daily).toEqual([{ date: today, requests: 7, bytes: 4 * 1024 * 1024, mb: 4, downloads: 2, estimated_cost: 4 }]);
    const ids = (await call(srv, 'GET', '/v1/user/keys', { key })).body.map((k: any) => k.id);
    expect(u.body.requests_by_key).toHaveLength(2);
    expect(u.body.requests_by_key.map((r: any) => r.requests)).toEqual([4, 3]);
    for (const r of u.body.requests_by_key) expect(ids).toContain(r.key_id);
    expect(u.body.period.fair_use).toMatchObject({ used_bytes: 4 * 1024 * 1024, allowance_bytes: 50 * 1024 ** 3 });
    const u2 = await call(srv, 'GET', '/v1/user/usage', { key });
    expect(u2.body.total_requests).toBe(9); // + the usage call and the key listing above
    // A window without activity.
    const past = await call(srv, 'GET', '/v1/user/usage?start_date=2020-01-01&end_date=2020-01-31', { key });
    expect(past.body).toMatchObject({ total_requests: 0, total_bytes: 0, daily: [] });
    expect(past.body.period.start).toBe('2020-01-01T00:00:00.000Z');
    expect(past.body.period.end).toBe('2020-02-01T00:00:00.000Z');
    expect((await call(srv, 'GET', '/v1/user/usage?start_date=yesterday', { key })).status).toBe(422);
  });

  it('request counts survive a restart (flushed when the store closes)', async () => {
    const key = await createTestKey(srv, { email: 'usage-restart@example.com' });
    for (let i = 0; i < 5; i++) await call(srv, 'GET', '/v1/user/me', { key });
    await srv.close();
    srv = await startTestServer(testConfig({ PMLAKE_LAKE: `${tmp.dir}/lake`, PMLAKE_STATE: `${tmp.dir}/state`, PMLAKE_JWT_SECRET: JWT_SECRET }));
    expect((await call(srv, 'GET', '/v1/user/usage', { key })).body.total_requests).toBe(5);
  });

  it('Bearer JWT (HS256): mapped to the user by its email claim; bad, expired or exp-less tokens → 401', async () => {
    const secret = new TextEncoder().encode(JWT_SECRET);
    const token = (claims: Record<string, unknown>, opts: { exp?: string | number | null; key?: Uint8Array } = {}) => {
      const jwt = new SignJWT(claims).setProtectedHeader({ alg: 'HS256' }).setIssuedAt();
      if (opts.exp !== null) jwt.setExpirationTime(opts.exp ?? '10m');
      return jwt.sign(opts.key ?? secret);
    };
    const good = await token({ email: 'Dash@Example.com', sub: 'u1' });
    const me = await call(srv, 'GET', '/v1/user/me', { bearer: good });
    expect(me.status).toBe(200);
    expect(me.body).toMatchObject({ email: 'dash@example.com', auth_method: 'jwt', plan: 'free', key_id: null, permissions: ['read', 'download'] });
    // The dashboard mints a key; the key then works on its own.
    const created = await call(srv, 'POST', '/v1/user/keys', { bearer: good, body: { name: 'from dashboard' } });
    expect(created.status).toBe(201);
    expect((await call(srv, 'GET', '/v1/user/me', { key: created.body.key })).body.email).toBe('dash@example.com');
    // An existing user is found by email.
    await createTestKey(srv, { email: 'pro-dash@example.com' });
    const pro = await call(srv, 'GET', '/v1/user/me', { bearer: await token({ email: 'pro-dash@example.com' }) });
    expect(pro.body.plan).toBe('professional');

    const bad = [
      await token({ email: 'x@example.com' }, { key: new TextEncoder().encode('another-secret-0123456789abcdef') }),
      await token({ email: 'x@example.com' }, { exp: Math.floor(Date.now() / 1000) - 60 }),
      await token({ email: 'x@example.com' }, { exp: null }),
      await token({ sub: 'no-email' }),
      'not.a.jwt',
    ];
    for (const t of bad) {
      const r = await call(srv, 'GET', '/v1/user/me', { bearer: t });
      expect(r.status).toBe(401);
      expect(r.body).toEqual({ detail: 'Invalid API key' });
    }
    // An alg=none token is refused.
    const none = `${Buffer.from('{"alg":"none"}').toString('base64url')}.${Buffer.from(JSON.stringify({ email: 'x@example.com', exp: 9e9 })).toString('base64url')}.`;
    expect((await call(srv, 'GET', '/v1/user/me', { bearer: none })).status).toBe(401);
  });

  it('POST /v1/user/provision: JWT only, email must match, rotates only the auto-provisioned key', async () => {
    const secret = new TextEncoder().encode(JWT_SECRET);
    const t = await new SignJWT({ email: 'prov@example.com' }).setProtectedHeader({ alg: 'HS256' }).setExpirationTime('5m').sign(secret);
    const first = await call(srv, 'POST', '/v1/user/provision', { bearer: t, body: { email: 'PROV@example.com' } });
    expect(first.status).toBe(200);
    expect(first.body).toMatchObject({ name: 'Default' });
    const own = await call(srv, 'POST', '/v1/user/keys', { bearer: t, body: { name: 'my script' } });
    const second = await call(srv, 'POST', '/v1/user/provision', { bearer: t, body: { email: 'prov@example.com' } });
    expect(second.status).toBe(200);
    expect((await call(srv, 'GET', '/v1/user/me', { key: first.body.key })).status).toBe(401);
    expect((await call(srv, 'GET', '/v1/user/me', { key: second.body.key })).status).toBe(200);
    expect((await call(srv, 'GET', '/v1/user/me', { key: own.body.key })).status).toBe(200);
    expect((await call(srv, 'POST', '/v1/user/provision', { bearer: t, body: { email: 'victim@example.com' } })).status).toBe(403);
    expect((await call(srv, 'POST', '/v1/user/provision', { key: second.body.key, body: { email: 'prov@example.com' } })).status).toBe(403);
  });

  it('PMLAKE_RATE_LIMITS=off turns the request limiter off (load tests only)', async () => {
    const s3 = await startTestServer(testConfig({ PMLAKE_LAKE: `${tmp.dir}/lake`, PMLAKE_STATE: `${tmp.dir}/state3`, PMLAKE_RATE_LIMITS: 'off' }));
    try {
      const key = await createTestKey(s3, { email: 'nolimit@example.com' });
      for (let i = 0; i < 70; i++) expect((await call(s3, 'GET', '/v1/user/me', { key })).status).toBe(200);
      expect((await call(s3, 'GET', '/v1/user/me', { key })).headers.get('x-ratelimit-limit')).toBeNull();
    } finally {
      await s3.close();
    }
  });

  it('Bearer JWT verified against a JWKS file (RS256)', async () => {
    const { publicKey, privateKey } = await generateKeyPair('RS256');
    const jwk = { ...(await exportJWK(publicKey)), kid: 'k1', alg: 'RS256', use: 'sig' };
    const jwksFile = `${tmp.dir}/jwks.json`;
    fs.writeFileSync(jwksFile, JSON.stringify({ keys: [jwk] }));
    const s2 = await startTestServer(testConfig({ PMLAKE_LAKE: `${tmp.dir}/lake`, PMLAKE_STATE: `${tmp.dir}/state2`, PMLAKE_JWKS_FILE: jwksFile }));
    try {
      const t = await new SignJWT({ email: 'jwks@example.com' }).setProtectedHeader({ alg: 'RS256', kid: 'k1' }).setExpirationTime('5m').sign(privateKey);
      const r = await call(s2, 'GET', '/v1/user/me', { bearer: t });
      expect(r.status).toBe(200);
      expect(r.body.email).toBe('jwks@example.com');
      const other = await generateKeyPair('RS256');
      const forged = await new SignJWT({ email: 'jwks@example.com' })
        .setProtectedHeader({ alg: 'RS256', kid: 'k1' })
        .setExpirationTime('5m')
        .sign(other.privateKey);
      expect((await call(s2, 'GET', '/v1/user/me', { bearer: forged })).status).toBe(401);
    } finally {
      await s2.close();
    }
  });
});
