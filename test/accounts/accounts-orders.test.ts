import { OrderResponse } from '../../src/http/account-schemas.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestKey, startTestServer, tempDir, testConfig } from '../helpers/server.js';
import { call } from '../helpers/accounts.js';
import { buildAccountsLake } from '../helpers/accounts-lake.js';
import type { RunningServer } from '../../src/server.js';
import { adjustBalance, getCreditAccount, ledgerSum } from '../../src/state/billing.js';

const TRADES = 5000;
const BOOKS = 3000;
const MB = 1_048_576;
// Independent price model (the legacy rates): rows × bytes/row → MB × USD/MB, in cents.
const cents = (rows: number, bytesPerRow: number, ratePerMb: number) => Math.round(((rows * bytesPerRow) / MB) * ratePerMb * 100);

describe('orders (legacy credit model)', () => {
  const tmp = tempDir();
  let srv: RunningServer;
  const credit = async (email: string, usd: number) => adjustBalance(srv.ctx.state, (await srv.ctx.state.getUserByEmail(email))!.id, usd * 100, 'test credit');
  beforeAll(async () => {
    await buildAccountsLake(`${tmp.dir}/lake`, { trades: TRADES, books: BOOKS });
    srv = await startTestServer(testConfig({ PMLAKE_LAKE: `${tmp.dir}/lake`, PMLAKE_STATE: `${tmp.dir}/state` }));
  });
  afterAll(async () => {
    await srv.close();
    tmp.cleanup();
  });

  it('GET /v1/orders/estimate returns the pricing constants', async () => {
    const k = await createTestKey(srv, { email: 'ord-est@example.com', plan: 'free' });
    const r = await call(srv, 'GET', '/v1/orders/estimate', { key: k });
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({
      rate_per_mb: { trades: 1, ohlcv: 8, orderbook: 2 },
      bytes_per_row: { trades: 230, orderbook: 2076 },
      minimum_order_usd: 10,
    });
  });

  it('402 "Insufficient credits" when the balance is short; nothing is written', async () => {
    const k = await createTestKey(srv, { email: 'ord-poor@example.com', plan: 'free' });
    const r = await call(srv, 'POST', '/v1/orders', { key: k, body: { items: [{ market_id: '1001', data_type: 'trades' }] } });
    expect(r.status).toBe(402);
    expect(r.body).toEqual({ detail: 'Insufficient credits' });
    expect((await call(srv, 'GET', '/v1/orders', { key: k })).body).toEqual([]);
    expect((await call(srv, 'GET', '/v1/billing/transactions', { key: k })).body).toEqual([]);
  });

  it('prices items from the lake at the reference rates, raises small orders to the 10 USD minimum, debits atomically', async () => {
    const k = await createTestKey(srv, { email: 'ord-rich@example.com', plan: 'free' });
    await credit('ord-rich@example.com', 100);
    // Trades alone: 5000 × 230 B ≈ 1.1 MB × 1 USD = 1.10 USD → the 10 USD minimum.
    const small = await call(srv, 'POST', '/v1/orders', { key: k, body: { items: [{ market_id: '1001', data_type: 'trades', format: 'parquet' }] } });
    expect(small.status).toBe(200);
    expect(small.body.items[0]).toMatchObject({
      market_id: '1001',
      data_type: 'trades',
      format: 'parquet',
      record_count: TRADES,
      size_bytes: TRADES * 230,
      status: 'paid',
    });
    expect(small.body.items[0].cost).toBe(cents(TRADES, 230, 1) / 100);
    expect(small.body.total_cost).toBe(10);
    expect(small.body.minimum_applied).toBe(true);
    // Order book + a trades window: 3000 × 2076 B × 2 USD/MB, plus the first 1000 minutes of trades.
    const big = await call(srv, 'POST', '/v1/orders', {
      key: k,
      body: {
        items: [
          { market_id: '1001', data_type: 'orderbook' },
          // A naive datetime (as Python's isoformat() sends one) is UTC.
          { market_id: '1001', data_type: 'trades', start: '2025-01-01T00:00:00', end: '2025-01-01T16:40:00Z' },
        ],
      },
    });
    expect(big.status).toBe(200);
    OrderResponse.parse(big.body);
    const expected = cents(BOOKS, 2076, 2) + cents(1000, 230, 1);
    expect(big.body.items.map((i: any) => i.record_count)).toEqual([BOOKS, 1000]);
    expect(big.body.total_cost).toBe(expected / 100);
    expect(big.body.minimum_applied).toBe(false);
    const bal = await call(srv, 'GET', '/v1/billing/balance', { key: k });
    expect(bal.body.balance).toBe((100_00 - 10_00 - expected) / 100);
    expect(bal.body.lifetime_usage).toBe((10_00 + expected) / 100);
    const list = await call(srv, 'GET', '/v1/orders', { key: k });
    expect(list.body.map((o: any) => o.order_id)).toEqual([big.body.order_id, small.body.order_id]);
    expect(Date.parse(list.body[0].items[0].expires_at) - Date.parse(list.body[0].created_at)).toBe(7 * 86_400_000);
  });

  it('the same idempotency key never charges twice', async () => {
    const k = await createTestKey(srv, { email: 'ord-idem@example.com', plan: 'free' });
    await credit('ord-idem@example.com', 30);
    const body = { items: [{ market_id: '1001', data_type: 'trades' }], idempotency_key: 'cart-42' };
    const a = await call(srv, 'POST', '/v1/orders', { key: k, body });
    const b = await call(srv, 'POST', '/v1/orders', { key: k, body });
    expect(a.status).toBe(200);
    expect(b.status).toBe(200);
    expect(b.body.order_id).toBe(a.body.order_id);
    expect(b.body.replayed).toBe(true);
    expect((await call(srv, 'GET', '/v1/billing/balance', { key: k })).body.balance).toBe(20);
    // Keys are per user: another user with the same key gets their own order.
    const k2 = await createTestKey(srv, { email: 'ord-idem2@example.com', plan: 'free' });
    await credit('ord-idem2@example.com', 10);
    const c = await call(srv, 'POST', '/v1/orders', { key: k2, body });
    expect(c.body.order_id).not.toBe(a.body.order_id);
    expect((await call(srv, 'GET', '/v1/billing/balance', { key: k2 })).body.balance).toBe(0);
  });

  it('a subscriber pays nothing for what the plan covers', async () => {
    const k = await createTestKey(srv, { email: 'ord-pro@example.com' });
    const r = await call(srv, 'POST', '/v1/orders', { key: k, body: { items: [{ market_id: '1001', data_type: 'trades' }] } });
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ total_cost: 0, minimum_applied: false });
    expect(r.body.items[0]).toMatchObject({ cost: 0, status: 'completed' });
  });

  it('errors: 404 unknown market/series, 400 greeks and empty items, 422 bad ids and bodies', async () => {
    const k = await createTestKey(srv, { email: 'ord-err@example.com', plan: 'free' });
    await credit('ord-err@example.com', 50);
    const post = (items: unknown, extra: object = {}) => call(srv, 'POST', '/v1/orders', { key: k, body: { items, ...extra } });
    let r = await post([{ market_id: '999999', data_type: 'trades' }]);
    expect(r.status).toBe(404);
    expect(r.body).toEqual({ detail: 'Market not found' });
    r = await post([{ series_id: 'nope', data_type: 'trades' }]);
    expect(r.status).toBe(404);
    r = await post([{ market_id: '1001', data_type: 'greeks' }]);
    expect(r.status).toBe(400);
    expect(r.body.detail).toMatchObject({ code: 'wrong_data_type', item_index: 0 });
    // Wait for the orders bucket (5/minute) to matter less: use a second key for the rest.
    const k2 = await createTestKey(srv, { email: 'ord-err@example.com', plan: 'free', name: 'second' });
    const post2 = (items: unknown, extra: object = {}) => call(srv, 'POST', '/v1/orders', { key: k2, body: { items, ...extra } });
    r = await post2([{ market_id: '1002', data_type: 'trades' }]);
    expect(r.status).toBe(400);
    expect(r.body.detail).toMatchObject({ code: 'empty_line_item', empty_items: [0] });
    for (const bad of [
      [],
      [{ data_type: 'trades' }],
      [{ market_id: '0xabc', data_type: 'trades' }],
      [{ market_id: '1001', data_type: 'trades', start: '2025-02-01', end: '2025-01-01' }],
      [{ market_id: '1001', data_type: 'trades', start: 'soon' }],
    ]) {
      // A fresh key per case: 4xx answers use the 5/minute orders bucket too.
      const kk = await createTestKey(srv, { email: 'ord-err@example.com', plan: 'free', name: 'bad' });
      expect((await call(srv, 'POST', '/v1/orders', { key: kk, body: { items: bad } })).status, JSON.stringify(bad)).toBe(422);
    }
    const k3 = await createTestKey(srv, { email: 'ord-err@example.com', plan: 'free', name: 'third' });
    expect(
      (await call(srv, 'POST', '/v1/orders', { key: k3, body: { items: [{ market_id: '1001', data_type: 'trades' }], idempotency_key: 'x'.repeat(129) } }))
        .status,
    ).toBe(422);
    expect((await call(srv, 'POST', '/v1/orders', { key: k3, body: { items: Array(51).fill({ market_id: '1001', data_type: 'trades' }) } })).status).toBe(422);
    expect((await call(srv, 'GET', '/v1/orders?limit=201', { key: k3 })).status).toBe(422);
    // Nothing above charged anything.
    expect((await call(srv, 'GET', '/v1/billing/balance', { key: k3 })).body.balance).toBe(50);
  });

  it('a series item sizes every market of the series', async () => {
    const k = await createTestKey(srv, { email: 'ord-series@example.com', plan: 'free' });
    await credit('ord-series@example.com', 10);
    const r = await call(srv, 'POST', '/v1/orders', { key: k, body: { items: [{ series_id: 's1', data_type: 'trades' }] } });
    expect(r.status).toBe(200);
    expect(r.body.items[0]).toMatchObject({ series_id: 's1', record_count: TRADES });
  });

  it('50 parallel orders against one balance never overdraw it and never lose a ledger entry', async () => {
    const email = 'ord-race@example.com';
    // One user, 50 keys (the orders bucket is 5/minute per key), a balance for exactly 20 minimum orders.
    const keys: string[] = [];
    for (let i = 0; i < 50; i += 1) keys.push(await createTestKey(srv, { email, plan: 'free', name: `k${i}` }));
    const user = (await srv.ctx.state.getUserByEmail(email))!;
    await credit(email, 200);
    const replies = await Promise.all(
      keys.map((key) => call(srv, 'POST', '/v1/orders', { key, body: { items: [{ market_id: '1001', data_type: 'trades' }] } })),
    );
    const ok = replies.filter((r) => r.status === 200);
    const short = replies.filter((r) => r.status === 402);
    expect(ok).toHaveLength(20);
    expect(short).toHaveLength(30);
    for (const r of short) expect(r.body).toEqual({ detail: 'Insufficient credits' });
    const acct = await getCreditAccount(srv.ctx.state, user.id);
    expect(acct.balance_cents).toBe(0);
    expect(await ledgerSum(srv.ctx.state, user.id)).toBe(acct.balance_cents);
    const tx = await call(srv, 'GET', '/v1/billing/transactions?limit=500', { key: keys[0]! });
    expect(tx.body).toHaveLength(21);
    expect(tx.body.filter((t: any) => t.type === 'usage_charge')).toHaveLength(20);
    expect(tx.body.reduce((s: number, t: any) => s + Math.round(t.amount * 100), 0)).toBe(0);
    // Every debit names a distinct order that exists.
    const orders = await call(srv, 'GET', '/v1/orders?limit=200', { key: keys[0]! });
    expect(orders.body).toHaveLength(20);
    expect(new Set(tx.body.filter((t: any) => t.type === 'usage_charge').map((t: any) => t.metadata.order_id))).toEqual(
      new Set(orders.body.map((o: any) => o.order_id)),
    );
  });
});
