import { execFileSync } from 'node:child_process';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call } from '../helpers/accounts.js';
import { createTestKey, startTestServer, tempDir, testConfig } from '../helpers/server.js';
import type { RunningServer } from '../../src/server.js';
import { StateStore } from '../../src/state/store.js';
import { sqliteOf } from '../helpers/state.js';
import { sql } from '../../src/state/sql.js';

/**
 * The in-process cache of resolved keys (src/accounts/auth.ts) must never answer for a key the state store no
 * longer allows: a change committed by another process, another connection or this server is seen by the
 * very next request, and a key's expiry ends its cached entry without any write at all.
 */

/** Runs SQL on the state file from a separate OS process, the way an operator's CLI would. */
function sqlFromAnotherProcess(stateDir: string, sql: string, ...params: string[]): void {
  const script = `
    const Database = require('better-sqlite3');
    const db = new Database(process.argv[1]);
    db.pragma('busy_timeout = 5000');
    db.prepare(process.argv[2]).run(...process.argv.slice(3));
    db.close();`;
  execFileSync(process.execPath, ['-e', script, path.join(stateDir, 'pmlake.sqlite'), sql, ...params], { cwd: process.cwd() });
}

describe('cached key resolution stays exact', () => {
  const tmp = tempDir();
  const stateDir = `${tmp.dir}/state`;
  let srv: RunningServer;
  beforeAll(async () => {
    srv = await startTestServer(testConfig({ PMLAKE_LAKE: `${tmp.dir}/lake`, PMLAKE_STATE: stateDir }));
  });
  afterAll(async () => {
    await srv.close();
    tmp.cleanup();
  });

  const me = (key: string) => call(srv, 'GET', '/v1/user/me', { key });
  const keyId = async (plaintext: string) => (await srv.ctx.state.findLiveKey(plaintext))!.id;

  it('a key revoked by another process is refused on the next request', async () => {
    const key = await createTestKey(srv, { email: 'xproc@example.com' });
    // Several answers first, so the key is cached (and its last_used_at buffered).
    for (let i = 0; i < 3; i++) expect((await me(key)).status).toBe(200);
    sqlFromAnotherProcess(stateDir, 'UPDATE api_keys SET revoked_at = ? WHERE id = ?', new Date().toISOString(), await keyId(key));
    const after = await me(key);
    expect(after.status).toBe(401);
    expect(after.body).toEqual({ detail: 'Invalid API key' });
  });

  it('a key deleted through another connection is refused on the next request', async () => {
    const key = await createTestKey(srv, { email: 'xconn@example.com' });
    const id = await keyId(key);
    expect((await me(key)).status).toBe(200);
    expect((await me(key)).status).toBe(200);
    const other = StateStore.open(stateDir);
    try {
      await other.run(sql`DELETE FROM api_keys WHERE id = ${id}`);
    } finally {
      await other.close();
    }
    expect((await me(key)).status).toBe(401);
  });

  it('a plan changed by another process shows on the next request', async () => {
    const key = await createTestKey(srv, { email: 'downgrade@example.com', plan: 'professional' });
    expect((await me(key)).body.plan).toBe('professional');
    const user = (await srv.ctx.state.getUserByEmail('downgrade@example.com'))!;
    sqlFromAnotherProcess(stateDir, `UPDATE subscriptions SET current_period_end = ? WHERE user_id = ?`, new Date(Date.now() - 1000).toISOString(), user.id);
    expect((await me(key)).body.plan).toBe('free');
  });

  it("this server's own revocation is seen at once, and request counters do not evict cached keys", async () => {
    const owner = await createTestKey(srv, { email: 'own@example.com' });
    const created = await call(srv, 'POST', '/v1/user/keys', { key: owner, body: { name: 'short-lived' } });
    expect((await me(created.body.key)).status).toBe(200);
    const stamp = srv.ctx.state.changeStamp();
    // The request counter's and last_used_at's batched writes are marked benign: the stamp does not move.
    await call(srv, 'GET', '/v1/user/usage', { key: owner });
    await srv.ctx.state.flushTouches();
    expect(srv.ctx.state.changeStamp()).toBe(stamp);
    expect((await call(srv, 'DELETE', `/v1/user/keys/${created.body.id}`, { key: owner })).status).toBe(200);
    expect((await me(created.body.key)).status).toBe(401);
  });

  it('a cached key stops working at its expiry without any write', async () => {
    const user = await srv.ctx.state.upsertUser('expiring@example.com', 'professional');
    const expiresAt = new Date(Date.now() + 1500).toISOString();
    const { plaintext } = await srv.ctx.state.createApiKey({ userId: user.id, name: 'expiring', prefix: srv.ctx.config.keyPrefix, expiresAt });
    expect((await me(plaintext)).status).toBe(200);
    const stamp = srv.ctx.state.changeStamp();
    while (Date.now() <= Date.parse(expiresAt)) await new Promise((r) => setTimeout(r, 100));
    expect((await me(plaintext)).status).toBe(401);
    // Refused by the clock alone: nothing was committed in between.
    expect(srv.ctx.state.changeStamp()).toBe(stamp);
  });

  it('last_used_at is buffered but shown at once to GET /v1/user/keys', async () => {
    const key = await createTestKey(srv, { email: 'touch@example.com' });
    const id = await keyId(key);
    const stored = () =>
      (sqliteOf(srv.ctx.state).prepare('SELECT last_used_at FROM api_keys WHERE id = ?').get(id) as { last_used_at: string | null }).last_used_at;
    expect(stored()).toBeNull();
    const before = Date.now();
    await me(key);
    const listed = (await call(srv, 'GET', '/v1/user/keys', { key })).body.find((k: { id: string }) => k.id === id);
    expect(Date.parse(listed.last_used_at)).toBeGreaterThanOrEqual(before - 1);
    expect(stored()).toBe(listed.last_used_at);
  });
});
