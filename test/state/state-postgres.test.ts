import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningServer } from '../../src/server.js';
import { adjustBalance, getCreditAccount } from '../../src/state/billing.js';
import { sql } from '../../src/state/sql.js';
import { StateStore } from '../../src/state/store.js';
import { call } from '../helpers/accounts.js';
import { buildAccountsLake } from '../helpers/accounts-lake.js';
import { startTestPostgres, type TestPostgres } from '../helpers/postgres.js';
import { startTestServer, tempDir, testConfig } from '../helpers/server.js';

/**
 * The API on the shared backend (PMLAKE_DATABASE_URL, a real PostgreSQL on loopback): keys, orders and usage
 * live there; the database taken away answers 503 with a JSON detail naming no address, lets nobody through,
 * charges nothing; brought back, the same server answers again without a restart.
 */
describe('the API with its state in PostgreSQL', () => {
  const tmp = tempDir();
  let pg: TestPostgres;
  let srv: RunningServer;
  let store: StateStore;
  let key: string;
  let userId: string;

  beforeAll(async () => {
    await buildAccountsLake(`${tmp.dir}/lake`, { trades: 500, books: 10 });
    pg = await startTestPostgres();
    srv = await startTestServer(testConfig({ PMLAKE_LAKE: `${tmp.dir}/lake`, PMLAKE_STATE: `${tmp.dir}/state`, PMLAKE_DATABASE_URL: pg.url }));
    // An operator's tool on the same database: what it writes, the server sees.
    store = await StateStore.connect({ stateDir: `${tmp.dir}/tool`, databaseUrl: pg.url });
    const user = await store.upsertUser('pg@example.com', 'free');
    userId = user.id;
    key = (await store.createApiKey({ userId, name: 'k', prefix: 'pm_' })).plaintext;
  }, 120_000);
  afterAll(async () => {
    await srv?.close();
    await store?.close();
    await pg?.close();
    tmp.cleanup();
  });

  it('serves keys, orders and the ledger from PostgreSQL', async () => {
    expect(srv.ctx.state.dialect).toBe('postgres');
    const me = await call(srv, 'GET', '/v1/user/me', { key });
    expect(me.status).toBe(200);
    expect(me.body).toMatchObject({ email: 'pg@example.com' });
    await adjustBalance(store, userId, 2000, 'test credit');
    const order = await call(srv, 'POST', '/v1/orders', { key, body: { items: [{ market_id: '1001', data_type: 'trades' }] } });
    expect(order.status).toBe(200);
    // The 10 USD minimum, read back through the tool's own connection.
    expect((await getCreditAccount(store, userId)).balance_cents).toBe(1000);
    const rows = await store.all<{ id: string }>(sql`SELECT id FROM orders WHERE user_id = ${userId}`);
    expect(rows.map((r) => r.id)).toEqual([order.body.order_id]);
  });

  it('database stopped → 503 with a JSON detail naming no address, nobody let through, nothing charged; restarted → served again', async () => {
    const other = (await store.createApiKey({ userId, name: 'other', prefix: 'pm_' })).plaintext;
    await pg.stop();
    try {
      for (const k of [key, other, `pm_${'0'.repeat(32)}`]) {
        const r = await call(srv, 'GET', '/v1/user/me', { key: k });
        expect(r.status).toBe(503);
        expect(typeof r.body.detail).toBe('string');
        for (const secret of ['127.0.0.1', String(pg.port), pg.password, 'ECONNREFUSED']) expect(r.body.detail).not.toContain(secret);
      }
      const order = await call(srv, 'POST', '/v1/orders', { key, body: { items: [{ market_id: '1001', data_type: 'trades' }] } });
      expect(order.status).toBe(503);
    } finally {
      await pg.start();
    }
    let status = 0;
    for (let i = 0; i < 100 && status !== 200; i++) {
      status = (await call(srv, 'GET', '/v1/user/me', { key })).status;
      if (status !== 200) await new Promise((r) => setTimeout(r, 200));
    }
    expect(status).toBe(200);
    // The refused order left nothing: the balance is what the first test left.
    expect((await getCreditAccount(store, userId)).balance_cents).toBe(1000);
    expect(await store.all(sql`SELECT id FROM orders WHERE user_id = ${userId}`)).toHaveLength(1);
  }, 90_000);
});
