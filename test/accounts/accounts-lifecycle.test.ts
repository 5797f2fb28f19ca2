import crypto from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SignJWT } from 'jose';
import { createTestKey, startTestServer, tempDir, testConfig } from '../helpers/server.js';
import { call } from '../helpers/accounts.js';
import { buildAccountsLake } from '../helpers/accounts-lake.js';
import type { RunningServer } from '../../src/server.js';
import { adjustBalance } from '../../src/state/billing.js';
import { exportMyData, originOf, requestDeletion } from '../../src/accounts/lifecycle.js';
import { sqliteOf } from '../helpers/state.js';

const JWT_SECRET = 'lifecycle-jwt-secret-0123456789abcdef';
const UA = 'lifecycle-test/1.0';
const sha256 = (s: string) => crypto.createHash('sha256').update(s, 'utf8').digest('hex');
/** A dashboard token for the address; `issuedNow` sets its iat (the clock's current second). */
const jwt = (email: string, issuedNow = false) => {
  const t = new SignJWT({ email }).setProtectedHeader({ alg: 'HS256' }).setExpirationTime('10m');
  return (issuedNow ? t.setIssuedAt() : t).sign(new TextEncoder().encode(JWT_SECRET));
};

describe('account lifecycle: data export, privacy events, deletion', () => {
  const tmp = tempDir();
  let srv: RunningServer;
  const as = (bearer: string) => ({ bearer, headers: { 'User-Agent': UA } });
  beforeAll(async () => {
    await buildAccountsLake(`${tmp.dir}/lake`, { trades: 5000, books: 300 });
    srv = await startTestServer(testConfig({ PMLAKE_LAKE: `${tmp.dir}/lake`, PMLAKE_STATE: `${tmp.dir}/state`, PMLAKE_JWT_SECRET: JWT_SECRET }));
  });
  afterAll(async () => {
    await srv.close();
    tmp.cleanup();
  });

  it('the bearer-only routes refuse an API key (403 with detail) and no credentials (401)', async () => {
    const key = await createTestKey(srv, { email: 'keyonly@example.com', plan: 'free' });
    for (const [method, path, body] of [
      ['GET', '/v1/user/data-export', undefined],
      ['GET', '/v1/user/privacy-events', undefined],
      ['POST', '/v1/user/delete-request', {}],
    ] as const) {
      const r = await call(srv, method, path, { key, body });
      expect(r.status, path).toBe(403);
      expect(r.body).toEqual({ detail: 'This endpoint needs the dashboard bearer token' });
      expect((await call(srv, method, path, { body })).status, path).toBe(401);
    }
    // Nothing was opened for the key's user.
    const uid = (await srv.ctx.state.getUserByEmail('keyonly@example.com'))!.id;
    expect(sqliteOf(srv.ctx.state).prepare('SELECT COUNT(*) AS n FROM account_deletion_requests WHERE user_id = ?').get(uid)).toEqual({ n: 0 });
  });

  it('export holds what the test created; request → confirm revokes every key at once, erases personal data, keeps billing', async () => {
    const email = 'life@example.com';
    const t = await jwt(email);
    expect((await call(srv, 'GET', '/v1/user/me', as(t))).status).toBe(200);
    const userId = (await srv.ctx.state.getUserByEmail(email))!.id;
    const keys: { id: string; key: string; name: string }[] = [];
    for (const name of ['alpha', 'beta']) {
      const r = await call(srv, 'POST', '/v1/user/keys', { ...as(t), body: { name } });
      expect(r.status).toBe(201);
      keys.push({ id: r.body.id, key: r.body.key, name });
    }
    await adjustBalance(srv.ctx.state, userId, 5000, 'test credit');
    const order = await call(srv, 'POST', '/v1/orders', { key: keys[0]!.key, body: { items: [{ market_id: '1001', data_type: 'trades' }] } });
    expect(order.status).toBe(200);
    expect(order.body.total_cost).toBe(10); // the legacy 10 USD minimum
    const principal = { userId, email, keyId: keys[1]!.id, plan: 'free', scopes: ['read', 'download'] as const };
    const ticket = await srv.ctx.meter.begin(principal, { kind: 'download', dataset: 'trades', description: 'test pull', estimatedBytes: 4096 });
    await ticket.commit({ bytes: 1234, rows: 10 });
    for (let i = 0; i < 3; i++) expect((await call(srv, 'GET', '/v1/user/me', { key: keys[1]!.key })).status).toBe(200);

    const ex = await call(srv, 'GET', '/v1/user/data-export', as(t));
    expect(ex.status).toBe(200);
    const b = ex.body;
    expect(b.user).toMatchObject({ id: userId, email, plan: 'free', deleted_at: null });
    expect(b.api_keys.map((k: any) => [k.id, k.name, k.key_prefix, k.revoked_at])).toEqual(
      keys.map((k) => [k.id, k.name, k.key.slice(0, srv.ctx.config.keyPrefix.length + 4), null]),
    );
    // Never a secret: no plaintext, no hash, no field named key_hash or token_hash.
    const text = JSON.stringify(b);
    for (const k of keys) {
      expect(text).not.toContain(k.key);
      expect(text).not.toContain(sha256(k.key));
    }
    expect(text).not.toMatch(/key_hash|token_hash/);
    expect(b.credit_ledger.map((l: any) => [l.type, l.amount_cents, l.balance_after_cents])).toEqual([
      ['adjustment', 5000, 5000],
      ['usage_charge', -1000, 4000],
    ]);
    expect(b.credit_account).toMatchObject({ balance_cents: 4000 });
    expect(b.orders).toHaveLength(1);
    expect(b.orders[0]).toMatchObject({ id: order.body.order_id, total_cost: 10, total_cost_cents: 1000 });
    expect(b.orders[0].items.map((i: any) => [i.market_id, i.data_type, i.record_count])).toEqual([['1001', 'trades', 5000]]);
    expect(b.downloads.map((p: any) => [p.kind, p.dataset, p.description, p.bytes, p.rows, p.status])).toEqual([
      ['download', 'trades', 'test pull', 1234, 10, 'completed'],
    ]);
    const byKey = Object.fromEntries(b.usage_daily.map((u: any) => [u.key_id, u.requests]));
    expect(byKey[keys[0]!.id]).toBe(1);
    expect(byKey[keys[1]!.id]).toBe(3);
    expect(b.export_jobs).toEqual([]);
    expect(b.privacy_events.map((e: any) => e.event)).toEqual(['data_export_requested']);
    expect(b.privacy_events[0]).toMatchObject({ ip_hash: sha256('127.0.0.1'), user_agent: UA });

    const req = await call(srv, 'POST', '/v1/user/delete-request', { ...as(t), body: { reason: 'moving on' } });
    expect(req.status).toBe(200);
    expect(req.body).toMatchObject({ status: 'pending', token: expect.stringMatching(/^pmdel_[A-Za-z0-9_-]{43}$/) });
    expect(Math.abs(Date.parse(req.body.expires_at) - Date.now() - 24 * 3_600_000)).toBeLessThan(60_000);
    // Only the token's hash is stored.
    const stored = sqliteOf(srv.ctx.state).prepare('SELECT token_hash FROM account_deletion_requests WHERE id = ?').get(req.body.request_id) as any;
    expect(stored.token_hash).toBe(sha256(req.body.token));
    // The keys still work (and sit in the key cache) until the confirmation.
    for (const k of keys) expect((await call(srv, 'GET', '/v1/user/me', { key: k.key })).status).toBe(200);

    const ok = await call(srv, 'POST', '/v1/user/delete-confirm', { body: { token: req.body.token } });
    expect(ok.status).toBe(200);
    expect(ok.body).toMatchObject({ status: 'deleted', request_id: req.body.request_id, keys_revoked: 2, downloads_erased: 1 });
    for (const k of keys) expect((await call(srv, 'GET', '/v1/user/me', { key: k.key })).status).toBe(401);
    // The token is spent.
    for (const path of ['/v1/user/delete-confirm', '/v1/user/delete-cancel']) {
      const again = await call(srv, 'POST', path, { body: { token: req.body.token } });
      expect(again.status).toBe(409);
      expect(again.body.detail).toMatch(/already used.*confirmed/);
    }

    // The token of before the deletion signs in to nothing; one issued after it (a sign-in since) is a new,
    // empty account (test/accounts/account-deletion.test.ts has the rest).
    expect((await call(srv, 'GET', '/v1/user/data-export', as(t))).status).toBe(401);
    while (Math.floor(Date.now() / 1000) * 1000 <= Date.parse(ok.body.deleted_at)) await new Promise((r) => setTimeout(r, 50));
    const fresh = await call(srv, 'GET', '/v1/user/data-export', as(await jwt(email, true)));
    expect(fresh.body.user.id).not.toBe(userId);
    expect([fresh.body.api_keys, fresh.body.orders, fresh.body.credit_ledger]).toEqual([[], [], []]);
    // The pseudonymised account (no token signs in to it), read by the core: billing kept, personal data gone.
    const pseudo = `deleted+${userId}@deleted.invalid`;
    expect((await call(srv, 'GET', '/v1/user/me', as(await jwt(pseudo, true)))).status).toBe(401);
    const after = JSON.parse(JSON.stringify(await exportMyData(srv.ctx.state, userId, originOf('127.0.0.1', UA))));
    expect(after.user).toMatchObject({ id: userId, email: pseudo, deleted_at: ok.body.deleted_at });
    expect(JSON.stringify(after)).not.toContain(email);
    expect(after.api_keys.map((k: any) => [k.id, k.name, k.revoked_at])).toEqual(keys.map((k) => [k.id, 'deleted', ok.body.deleted_at]));
    expect(after.credit_ledger.map((l: any) => [l.id, l.amount_cents, l.created_at])).toEqual(
      b.credit_ledger.map((l: any) => [l.id, l.amount_cents, l.created_at]),
    );
    expect(after.credit_account).toEqual(b.credit_account);
    expect(after.orders).toEqual(b.orders);
    expect([after.downloads, after.usage_daily]).toEqual([[], []]);
    expect(after.deletion_requests).toEqual([expect.objectContaining({ id: req.body.request_id, status: 'confirmed', reason: null })]);
    const events = after.privacy_events.map((e: any) => [e.event, e.ip_hash, e.user_agent]);
    expect(events).toEqual([
      ['data_export_requested', null, null],
      ['account_deletion_requested', null, null],
      ['api_keys_revoked', null, null],
      ['account_deletion_confirmed', null, null],
      ['data_export_requested', sha256('127.0.0.1'), UA],
    ]);
    expect(after.privacy_events[2].metadata).toEqual({ reason: 'account_deletion', count: 2 });
  });

  it('cancel keeps the account; a newer request supersedes the older token; privacy events are paginated newest first', async () => {
    const t = await jwt('cancel@example.com');
    const key = (await call(srv, 'POST', '/v1/user/keys', { ...as(t), body: { name: 'k' } })).body.key as string;
    // A misspelt field opens nothing (strict body): 422 naming it.
    const typo = await call(srv, 'POST', '/v1/user/delete-request', { ...as(t), body: { reasn: 'x' } });
    expect(typo.status).toBe(422);
    expect(JSON.stringify(typo.body.detail)).toContain('reasn');
    const first = await call(srv, 'POST', '/v1/user/delete-request', { ...as(t), body: {} });
    const second = await call(srv, 'POST', '/v1/user/delete-request', { ...as(t), body: { reason: null } });
    expect([first.status, second.status]).toEqual([200, 200]);
    const old = await call(srv, 'POST', '/v1/user/delete-confirm', { body: { token: first.body.token } });
    expect(old.status).toBe(409);
    expect(old.body.detail).toMatch(/superseded/);
    const c = await call(srv, 'POST', '/v1/user/delete-cancel', { body: { token: second.body.token } });
    expect(c.status).toBe(200);
    expect(c.body).toMatchObject({ status: 'cancelled', request_id: second.body.request_id });
    expect((await call(srv, 'GET', '/v1/user/me', { key })).status).toBe(200);
    expect((await call(srv, 'POST', '/v1/user/delete-confirm', { body: { token: second.body.token } })).status).toBe(409);

    const all = await call(srv, 'GET', '/v1/user/privacy-events', as(t));
    expect(all.status).toBe(200);
    expect(all.body.map((e: any) => e.event)).toEqual(['account_deletion_cancelled', 'account_deletion_requested', 'account_deletion_requested']);
    expect(all.body[1].metadata).toMatchObject({ request_id: second.body.request_id, superseded_requests: 1 });
    for (const e of all.body) expect(Object.keys(e).sort()).toEqual(['created_at', 'event', 'id', 'ip_hash', 'metadata', 'user_agent']);
    const page = await call(srv, 'GET', '/v1/user/privacy-events?limit=1&offset=1', as(t));
    expect(page.body).toEqual([all.body[1]]);
    for (const q of ['limit=0', 'limit=201', 'offset=-1', 'limit=x'])
      expect((await call(srv, 'GET', `/v1/user/privacy-events?${q}`, as(t))).status, q).toBe(422);
  });

  it('unknown, malformed and expired tokens → 4xx with detail, nothing deleted', async () => {
    const key = await createTestKey(srv, { email: 'expiry@example.com', plan: 'free' });
    const bad = await call(srv, 'POST', '/v1/user/delete-confirm', { body: { token: 'pmdel_nope' } });
    expect(bad.status).toBe(400);
    expect(bad.body).toEqual({ detail: 'Invalid deletion token' });
    expect((await call(srv, 'POST', '/v1/user/delete-cancel', { body: { token: 'pmdel_nope' } })).status).toBe(400);
    for (const body of [{}, { token: '' }, { token: 'x'.repeat(201) }, { token: 5 }]) {
      const r = await call(srv, 'POST', '/v1/user/delete-confirm', { body });
      expect(r.status).toBe(422);
      expect(Array.isArray(r.body.detail)).toBe(true);
    }
    // A request opened 25 hours ago (the core's clock argument): its 24-hour token has run out.
    const userId = (await srv.ctx.state.getUserByEmail('expiry@example.com'))!.id;
    const stale = await requestDeletion(srv.ctx.state, userId, null, originOf(undefined, undefined), new Date(Date.now() - 25 * 3_600_000));
    const r = await call(srv, 'POST', '/v1/user/delete-confirm', { body: { token: stale.token } });
    expect(r.status).toBe(410);
    expect(r.body).toEqual({ detail: 'Deletion token expired; request a new one' });
    expect((await call(srv, 'POST', '/v1/user/delete-cancel', { body: { token: stale.token } })).status).toBe(410);
    expect((await call(srv, 'GET', '/v1/user/me', { key })).status).toBe(200);
    expect((await srv.ctx.state.getUser(userId))!.email).toBe('expiry@example.com');
  });
});
