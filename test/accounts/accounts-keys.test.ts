import { ApiKeyCreatedResponse, ApiKeyResponse } from '../../src/http/account-schemas.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestKey, startTestServer, tempDir, testConfig } from '../helpers/server.js';
import { call } from '../helpers/accounts.js';
import type { RunningServer } from '../../src/server.js';
import { sqliteOf } from '../helpers/state.js';

describe('API keys: /v1/user/keys', () => {
  const tmp = tempDir();
  let srv: RunningServer;
  let key: string;
  beforeAll(async () => {
    srv = await startTestServer(testConfig({ PMLAKE_LAKE: `${tmp.dir}/lake`, PMLAKE_STATE: `${tmp.dir}/state` }));
    key = await createTestKey(srv, { email: 'keys@example.com' });
  });
  afterAll(async () => {
    await srv.close();
    tmp.cleanup();
  });

  it('401 "Invalid API key" without a key or with a wrong one', async () => {
    for (const k of [undefined, 'pm_0123456789abcdef0123456789abcdef', 'x'.repeat(500)]) {
      const r = await call(srv, 'GET', '/v1/user/keys', k ? { key: k } : {});
      expect(r.status).toBe(401);
      expect(r.body).toEqual({ detail: 'Invalid API key' });
    }
  });

  it('creates a key (201, plaintext once), lists it by prefix only, and the new key works', async () => {
    const created = await call(srv, 'POST', '/v1/user/keys', { key, body: { name: 'laptop', expires_in_days: 30 } });
    expect(created.status).toBe(201);
    expect(created.body.key).toMatch(/^pm_[0-9a-f]{32}$/);
    ApiKeyCreatedResponse.parse(created.body);
    expect(created.body).toMatchObject({ name: 'laptop', key_prefix: created.body.key.slice(0, 7), permissions: ['read', 'download'] });
    const expires = Date.parse(created.body.expires_at) - Date.parse(created.body.created_at);
    expect(Math.round(expires / 86_400_000)).toBe(30);

    const list = await call(srv, 'GET', '/v1/user/keys', { key: created.body.key });
    expect(list.status).toBe(200);
    for (const k of list.body) ApiKeyResponse.parse(k);
    const row = list.body.find((k: any) => k.id === created.body.id);
    expect(Object.keys(row).sort()).toEqual(
      ['created_at', 'expires_at', 'id', 'key_prefix', 'last_used_at', 'name', 'permissions', 'scheduled_revoke_at'].sort(),
    );
    expect(JSON.stringify(list.body)).not.toContain(created.body.key);
    expect(row.last_used_at).not.toBeNull();
  });

  it('validates the create body: name 1–100 chars, scopes ⊆ {read, download}, expires_in_days 1–365', async () => {
    const bad = [
      {},
      { name: '' },
      { name: 'x'.repeat(101) },
      { name: 'a', scopes: ['admin'] },
      { name: 'a', scopes: [] },
      { name: 'a', expires_in_days: 0 },
      { name: 'a', expires_in_days: 366 },
    ];
    for (const body of bad) {
      const r = await call(srv, 'POST', '/v1/user/keys', { key, body });
      expect(r.status, JSON.stringify(body)).toBe(422);
      expect(Array.isArray(r.body.detail)).toBe(true);
      expect(r.body.detail[0].loc[0]).toBe('body');
    }
    const noBody = await call(srv, 'POST', '/v1/user/keys', { key });
    expect(noBody.status).toBe(422);
    expect((await call(srv, 'POST', '/v1/user/keys', { key, body: { name: 'x'.repeat(100) } })).status).toBe(201);
  });

  it('revoked key → 401 on the very next request; unknown or foreign key ids → 404', async () => {
    const created = await call(srv, 'POST', '/v1/user/keys', { key, body: { name: 'temp' } });
    const k2 = created.body.key;
    expect((await call(srv, 'GET', '/v1/user/me', { key: k2 })).status).toBe(200);
    const del = await call(srv, 'DELETE', `/v1/user/keys/${created.body.id}`, { key });
    expect(del.status).toBe(200);
    expect(del.body).toMatchObject({ id: created.body.id, status: 'revoked' });
    const after = await call(srv, 'GET', '/v1/user/me', { key: k2 });
    expect(after.status).toBe(401);
    expect(after.body).toEqual({ detail: 'Invalid API key' });
    const list = await call(srv, 'GET', '/v1/user/keys', { key });
    expect(list.body.map((k: any) => k.id)).not.toContain(created.body.id);

    expect((await call(srv, 'DELETE', '/v1/user/keys/key_doesnotexist', { key })).status).toBe(404);
    const other = await createTestKey(srv, { email: 'other@example.com' });
    const otherKeys = await call(srv, 'GET', '/v1/user/keys', { key: other });
    const foreign = await call(srv, 'DELETE', `/v1/user/keys/${otherKeys.body[0].id}`, { key });
    expect(foreign.status).toBe(404);
    expect((await call(srv, 'GET', '/v1/user/me', { key: other })).status).toBe(200);
    expect((await call(srv, 'DELETE', '/v1/user/keys/bad%20id!', { key })).status).toBe(422);
  });

  it('expired key → 401', async () => {
    const created = await call(srv, 'POST', '/v1/user/keys', { key, body: { name: 'short', expires_in_days: 1 } });
    expect((await call(srv, 'GET', '/v1/user/me', { key: created.body.key })).status).toBe(200);
    sqliteOf(srv.ctx.state)
      .prepare('UPDATE api_keys SET expires_at = ? WHERE id = ?')
      .run(new Date(Date.now() - 1000).toISOString(), created.body.id);
    expect((await call(srv, 'GET', '/v1/user/me', { key: created.body.key })).status).toBe(401);
  });

  it('rotate: new key with the same name and scopes; old key works through a 7-day grace, then 401', async () => {
    const created = await call(srv, 'POST', '/v1/user/keys', { key, body: { name: 'cron', scopes: ['read'] } });
    const rot = await call(srv, 'POST', `/v1/user/keys/${created.body.id}/rotate`, { key });
    expect(rot.status).toBe(200);
    expect(rot.body).toMatchObject({ name: 'cron', permissions: ['read'], rotated_from: created.body.id });
    expect(rot.body.key).not.toBe(created.body.key);
    const grace = Date.parse(rot.body.old_key_revokes_at) - Date.now();
    expect(grace).toBeGreaterThan(6.9 * 86_400_000);
    expect(grace).toBeLessThanOrEqual(7 * 86_400_000);
    expect((await call(srv, 'GET', '/v1/user/me', { key: rot.body.key })).status).toBe(200);
    expect((await call(srv, 'GET', '/v1/user/me', { key: created.body.key })).status).toBe(200);
    const listed = (await call(srv, 'GET', '/v1/user/keys', { key })).body.find((k: any) => k.id === created.body.id);
    expect(listed.scheduled_revoke_at).toBe(rot.body.old_key_revokes_at);
    // The grace window ends: enforced at request time.
    sqliteOf(srv.ctx.state)
      .prepare('UPDATE api_keys SET scheduled_revoke_at = ? WHERE id = ?')
      .run(new Date(Date.now() - 1).toISOString(), created.body.id);
    expect((await call(srv, 'GET', '/v1/user/me', { key: created.body.key })).status).toBe(401);
    expect((await call(srv, 'POST', '/v1/user/keys/key_nope/rotate', { key })).status).toBe(404);
  });

  it('a read-only key cannot mint a key with the download scope (403)', async () => {
    const ro = await call(srv, 'POST', '/v1/user/keys', { key, body: { name: 'ro', scopes: ['read'] } });
    const r = await call(srv, 'POST', '/v1/user/keys', { key: ro.body.key, body: { name: 'escalate', scopes: ['read', 'download'] } });
    expect(r.status).toBe(403);
    const def = await call(srv, 'POST', '/v1/user/keys', { key: ro.body.key, body: { name: 'narrow' } });
    expect(def.status).toBe(201);
    expect(def.body.permissions).toEqual(['read']);
  });

  it('GET /v1/user/me names the user, plan, key and limits', async () => {
    const r = await call(srv, 'GET', '/v1/user/me', { key });
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({
      email: 'keys@example.com',
      plan: 'professional',
      auth_method: 'api_key',
      key_name: 'test',
      permissions: ['read', 'download'],
      rate_limit: { requests_per_minute: 60, downloads_per_hour: 300, downloads_per_minute: 20 },
    });
    expect(r.body.subscription).toMatchObject({ tier: 'professional', status: 'active' });
  });
});
