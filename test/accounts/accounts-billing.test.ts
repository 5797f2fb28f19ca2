import { BalanceResponse, CheckoutResponse, TransactionResponse } from '../../src/http/account-schemas.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestKey, startTestServer, tempDir, testConfig } from '../helpers/server.js';
import { call } from '../helpers/accounts.js';
import type { RunningServer } from '../../src/server.js';
import { sign } from '../../src/payments/signature.js';
import { adjustBalance, ledgerSum, getCreditAccount } from '../../src/state/billing.js';
import { StateStore } from '../../src/state/store.js';
import { activeSubscription } from '../../src/state/accounts.js';
import { sql } from '../../src/state/sql.js';

const SECRET = 'test-webhook-secret-0123456789';

async function signedWebhook(srv: RunningServer, event: object, opts: { secret?: string; at?: Date; tamper?: boolean } = {}) {
  const body = JSON.stringify(event);
  const sig = sign(opts.secret ?? SECRET, body, opts.at ?? new Date());
  const res = await fetch(`${srv.url}/v1/billing/webhook/local`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', 'Pmlake-Signature': sig },
    body: opts.tamper ? body.replace('checkout.completed', 'checkout.canceled') : body,
  });
  return { status: res.status, body: await res.json() };
}

const evt = (n: number, checkout: string) => ({
  id: `evt_${n.toString(16).padStart(24, '0')}`,
  type: 'checkout.completed',
  checkout_id: checkout,
  created_at: new Date().toISOString(),
});

describe('billing: pricing, balance, ledger, checkout, webhook, subscription', () => {
  const tmp = tempDir();
  const stateDir = `${tmp.dir}/state`;
  let srv: RunningServer;
  beforeAll(async () => {
    srv = await startTestServer(
      testConfig({ PMLAKE_LAKE: `${tmp.dir}/lake`, PMLAKE_STATE: stateDir, PMLAKE_WEBHOOK_SECRET: SECRET, PMLAKE_PAYMENT_PROVIDER: 'local' }),
    );
  });
  afterAll(async () => {
    await srv.close();
    tmp.cleanup();
  });

  it('GET /v1/billing/pricing is public: plans, reference rates 1/8/2 USD per MB, 10 USD minimum', async () => {
    const r = await call(srv, 'GET', '/v1/billing/pricing');
    expect(r.status).toBe(200);
    expect(r.body.reference_rates_per_mb).toMatchObject({ trades: 1, ohlcv: 8, orderbook: 2 });
    expect(r.body.minimum_order_usd).toBe(10);
    expect(r.body.usage_pricing).toMatchObject({ minimum_order_usd: 10, rate_per_mb: { trades: 1, ohlcv: 8, orderbook: 2 } });
    expect(r.body.plans.map((p: any) => p.id)).toEqual(['free', 'professional']);
    const pro = r.body.plans.find((p: any) => p.id === 'professional');
    expect(pro).toMatchObject({ downloads_per_hour: 300, downloads_per_minute: 20, fair_use_gb_month: 50 });
    expect(r.body.payg_enabled).toBe(false);
  });

  it('balance starts at zero; the ledger is empty; both need a key', async () => {
    const k = await createTestKey(srv, { email: 'bal@example.com', plan: 'free' });
    const b = await call(srv, 'GET', '/v1/billing/balance', { key: k });
    expect(b.status).toBe(200);
    expect(b.body).toMatchObject({ balance: 0, currency: 'USD', lifetime_credits: 0, lifetime_usage: 0, lifetime_refunds: 0 });
    expect((await call(srv, 'GET', '/v1/billing/transactions', { key: k })).body).toEqual([]);
    expect((await call(srv, 'GET', '/v1/billing/balance')).status).toBe(401);
    expect((await call(srv, 'GET', '/v1/billing/transactions?limit=501', { key: k })).status).toBe(422);
  });

  it('POST /v1/billing/checkout validates amount 10–10,000 and http(s) return URLs', async () => {
    const k = await createTestKey(srv, { email: 'chk-validate@example.com', plan: 'free' });
    const ok = { amount: 25, success_url: 'http://localhost:3000/ok', cancel_url: 'http://localhost:3000/no' };
    for (const body of [
      { ...ok, amount: 9.99 },
      { ...ok, amount: 10_000.01 },
      { ...ok, amount: '25' },
      { amount: 25 },
      { ...ok, success_url: 'javascript:alert(1)' },
    ]) {
      const r = await call(srv, 'POST', '/v1/billing/checkout', { key: k, body });
      expect(r.status, JSON.stringify(body)).toBe(422);
    }
    // The rejected attempts used this key's 5/minute checkout bucket (4xx answers count): use a fresh key.
    const k2 = await createTestKey(srv, { email: 'chk-validate2@example.com', plan: 'free' });
    const r = await call(srv, 'POST', '/v1/billing/checkout', { key: k2, body: ok });
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ amount: 25 });
    expect(r.body.checkout_id).toMatch(/^chk_[0-9a-f]{24}$/);
    expect(r.body.checkout_url).toBe(`${srv.url}/v1/billing/checkout/local/${r.body.checkout_id}`);
  });

  it('checkout → hosted page → confirm: the signed webhook credits the balance once', async () => {
    const k = await createTestKey(srv, { email: 'chk-flow@example.com', plan: 'free' });
    const co = await call(srv, 'POST', '/v1/billing/checkout', {
      key: k,
      body: { amount: 42.5, success_url: 'http://localhost:3000/paid?x=1', cancel_url: 'http://localhost:3000/no' },
    });
    const pageRes = await fetch(co.body.checkout_url);
    expect(pageRes.status).toBe(200);
    expect(pageRes.headers.get('content-type')).toMatch(/text\/html/);
    expect(await pageRes.text()).toContain('42.50 USD');
    const confirm = await fetch(`${co.body.checkout_url}/confirm`, { method: 'POST', redirect: 'manual' });
    expect(confirm.status).toBe(303);
    expect(confirm.headers.get('location')).toBe(`http://localhost:3000/paid?x=1&checkout_id=${co.body.checkout_id}`);
    const bal = await call(srv, 'GET', '/v1/billing/balance', { key: k });
    expect(bal.body).toMatchObject({ balance: 42.5, lifetime_credits: 42.5 });
    BalanceResponse.parse(bal.body);
    CheckoutResponse.parse(co.body);
    // Confirming again (double click, back button) credits nothing more.
    await fetch(`${co.body.checkout_url}/confirm`, { method: 'POST', redirect: 'manual' });
    expect((await call(srv, 'GET', '/v1/billing/balance', { key: k })).body.balance).toBe(42.5);
    const tx = await call(srv, 'GET', '/v1/billing/transactions', { key: k });
    expect(tx.body).toHaveLength(1);
    TransactionResponse.parse(tx.body[0]);
    expect(tx.body[0]).toMatchObject({ type: 'credit_purchase', amount: 42.5, currency: 'USD', status: 'completed' });
    expect(tx.body[0].metadata).toMatchObject({ checkout_id: co.body.checkout_id, balance_after: 42.5 });
  });

  it('webhook: forged signature rejected (nothing credited); valid one credits once; replay ignored', async () => {
    const k = await createTestKey(srv, { email: 'hook@example.com', plan: 'free' });
    const co = await call(srv, 'POST', '/v1/billing/checkout', {
      key: k,
      body: { amount: 100, success_url: 'http://localhost/ok', cancel_url: 'http://localhost/no' },
    });
    const id = co.body.checkout_id;
    const balance = async () => (await call(srv, 'GET', '/v1/billing/balance', { key: k })).body.balance;

    // Forged: wrong secret, tampered body, stale timestamp, no signature at all.
    expect((await signedWebhook(srv, evt(1, id), { secret: 'not-the-secret-xxxxxxxx' })).status).toBe(400);
    expect((await signedWebhook(srv, evt(2, id), { tamper: true })).status).toBe(400);
    expect((await signedWebhook(srv, evt(3, id), { at: new Date(Date.now() - 3600_000) })).status).toBe(400);
    const unsigned = await fetch(`${srv.url}/v1/billing/webhook/local`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify(evt(4, id)),
    });
    expect(unsigned.status).toBe(400);
    expect(await unsigned.json()).toEqual({ detail: 'Invalid webhook signature' });
    expect(await balance()).toBe(0);

    const first = await signedWebhook(srv, evt(5, id));
    expect(first).toEqual({ status: 200, body: { received: true, event_id: evt(5, id).id, outcome: 'credited' } });
    expect(await balance()).toBe(100);
    const replay = await signedWebhook(srv, evt(5, id));
    expect(replay.body.outcome).toBe('duplicate');
    // A different event for the same, already paid checkout credits nothing either.
    expect((await signedWebhook(srv, evt(6, id))).body.outcome).toBe('already_completed');
    expect((await signedWebhook(srv, evt(7, 'chk_' + '0'.repeat(24)))).body.outcome).toBe('unknown_checkout');
    expect(await balance()).toBe(100);
    const u = (await srv.ctx.state.getUserByEmail('hook@example.com'))!;
    expect(await ledgerSum(srv.ctx.state, u.id)).toBe((await getCreditAccount(srv.ctx.state, u.id)).balance_cents);
  });

  it('subscription: redeem from credits (402 short, 409 active), cancel at period end, checkout 409', async () => {
    const k = await createTestKey(srv, { email: 'sub@example.com', plan: 'free' });
    const s0 = await call(srv, 'GET', '/v1/billing/subscription', { key: k });
    expect(s0.body).toEqual({ active: false, tier: 'free', billing_period: null, status: null, current_period_end: null });
    expect((await call(srv, 'POST', '/v1/billing/subscription/cancel', { key: k })).status).toBe(404);

    const short = await call(srv, 'POST', '/v1/billing/subscription/redeem', { key: k, body: { tier: 'professional', billing_period: 'monthly' } });
    expect(short.status).toBe(402);
    expect(short.body).toEqual({ detail: 'Insufficient credits' });
    expect((await call(srv, 'POST', '/v1/billing/subscription/redeem', { key: k, body: { tier: 'enterprise', billing_period: 'monthly' } })).status).toBe(422);

    const u = (await srv.ctx.state.getUserByEmail('sub@example.com'))!;
    await adjustBalance(srv.ctx.state, u.id, 150_00, 'test credit');
    const ok = await call(srv, 'POST', '/v1/billing/subscription/redeem', { key: k, body: { tier: 'professional', billing_period: 'monthly' } });
    expect(ok.status).toBe(200);
    expect(ok.body).toMatchObject({
      active: true,
      tier: 'professional',
      billing_period: 'monthly',
      status: 'active',
      funded_by: 'credits',
      charged: 99,
      balance: 51,
    });
    const days = (Date.parse(ok.body.current_period_end) - Date.parse(ok.body.current_period_start)) / 86_400_000;
    expect(days).toBe(30);
    expect((await call(srv, 'GET', '/v1/user/me', { key: k })).body.plan).toBe('professional');
    const again = await call(srv, 'POST', '/v1/billing/subscription/redeem', { key: k, body: { tier: 'professional', billing_period: 'monthly' } });
    expect(again.status).toBe(409);
    expect((await call(srv, 'GET', '/v1/billing/balance', { key: k })).body.balance).toBe(51);
    const subCo = await call(srv, 'POST', '/v1/billing/subscription/checkout', {
      key: k,
      body: { tier: 'professional', billing_period: 'annual', success_url: 'http://localhost/ok', cancel_url: 'http://localhost/no' },
    });
    expect(subCo.status).toBe(409);

    const cancel = await call(srv, 'POST', '/v1/billing/subscription/cancel', { key: k });
    expect(cancel.body).toMatchObject({ status: 'canceling', effective: 'period_end', current_period_end: ok.body.current_period_end });
    const s1 = await call(srv, 'GET', '/v1/billing/subscription', { key: k });
    expect(s1.body).toMatchObject({ active: true, cancel_at_period_end: true });

    const tx = await call(srv, 'GET', '/v1/billing/transactions', { key: k });
    expect(tx.body.map((t: any) => [t.type, t.amount])).toEqual([
      ['usage_charge', -99],
      ['adjustment', 150],
    ]);
  });

  it('a read-only key cannot redeem (403)', async () => {
    const ro = await createTestKey(srv, { email: 'sub-ro@example.com', plan: 'free', scopes: ['read'] });
    const r = await call(srv, 'POST', '/v1/billing/subscription/redeem', { key: ro, body: { tier: 'professional', billing_period: 'monthly' } });
    expect(r.status).toBe(403);
  });

  it('subscription checkout through the hosted page activates the plan via the webhook', async () => {
    const k = await createTestKey(srv, { email: 'sub-card@example.com', plan: 'free' });
    const co = await call(srv, 'POST', '/v1/billing/subscription/checkout', {
      key: k,
      body: { tier: 'professional', billing_period: 'annual', success_url: 'http://localhost/ok', cancel_url: 'http://localhost/no' },
    });
    expect(co.status).toBe(200);
    expect(co.body).toMatchObject({ tier: 'professional', billing_period: 'annual', amount: 990 });
    const confirm = await fetch(`${co.body.checkout_url}/confirm`, { method: 'POST', redirect: 'manual' });
    expect(confirm.status).toBe(303);
    const sub = await call(srv, 'GET', '/v1/billing/subscription', { key: k });
    expect(sub.body).toMatchObject({ active: true, tier: 'professional', billing_period: 'annual', funded_by: 'card' });
    // Card payments do not touch the credit balance.
    expect((await call(srv, 'GET', '/v1/billing/balance', { key: k })).body.balance).toBe(0);
  });

  it('cancel on the hosted page returns to cancel_url and credits nothing', async () => {
    const k = await createTestKey(srv, { email: 'chk-cancel@example.com', plan: 'free' });
    const co = await call(srv, 'POST', '/v1/billing/checkout', {
      key: k,
      body: { amount: 10, success_url: 'http://localhost/ok', cancel_url: 'http://localhost/no' },
    });
    const r = await fetch(`${co.body.checkout_url}/cancel`, { method: 'POST', redirect: 'manual' });
    expect(r.status).toBe(303);
    expect(r.headers.get('location')).toBe(`http://localhost/no?checkout_id=${co.body.checkout_id}`);
    await fetch(`${co.body.checkout_url}/confirm`, { method: 'POST', redirect: 'manual' });
    expect((await call(srv, 'GET', '/v1/billing/balance', { key: k })).body.balance).toBe(0);
    expect((await fetch(`${srv.url}/v1/billing/checkout/local/chk_${'f'.repeat(24)}`)).status).toBe(404);
    expect((await fetch(`${srv.url}/v1/billing/checkout/local/nope`)).status).toBe(422);
  });

  it('checkout routes are limited to 5/minute', async () => {
    const k = await createTestKey(srv, { email: 'chk-rate@example.com', plan: 'free' });
    const body = { amount: 10, success_url: 'http://localhost/ok', cancel_url: 'http://localhost/no' };
    for (let i = 0; i < 5; i++) expect((await call(srv, 'POST', '/v1/billing/checkout', { key: k, body })).status).toBe(200);
    const over = await call(srv, 'POST', '/v1/billing/checkout', { key: k, body });
    expect(over.status).toBe(429);
    expect(over.body).toEqual({ detail: 'Rate limit exceeded' });
    expect(Number(over.headers.get('retry-after'))).toBeGreaterThan(0);
  });

  it('state survives a restart: balances, ledger and subscriptions reopen intact', async () => {
    const u = (await srv.ctx.state.getUserByEmail('sub@example.com'))!;
    const before = { acct: await getCreditAccount(srv.ctx.state, u.id), sub: await activeSubscription(srv.ctx.state, u.id) };
    await srv.close();
    const reopened = StateStore.open(stateDir);
    try {
      expect(await getCreditAccount(reopened, u.id)).toEqual(before.acct);
      expect(await ledgerSum(reopened, u.id)).toBe(before.acct.balance_cents);
      expect(await activeSubscription(reopened, u.id)).toEqual(before.sub);
      // The ledger is append-only, enforced by the database itself.
      await expect(reopened.run(sql`UPDATE ledger SET amount_cents = 0`)).rejects.toThrow(/append-only/);
      await expect(reopened.run(sql`DELETE FROM ledger`)).rejects.toThrow(/append-only/);
    } finally {
      await reopened.close();
    }
    srv = await startTestServer(
      testConfig({ PMLAKE_LAKE: `${tmp.dir}/lake`, PMLAKE_STATE: stateDir, PMLAKE_WEBHOOK_SECRET: SECRET, PMLAKE_PAYMENT_PROVIDER: 'local' }),
    );
  });
});
