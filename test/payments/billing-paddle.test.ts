import crypto from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningServer } from '../../src/server.js';
import { getCreditAccount, ledgerSum } from '../../src/state/billing.js';
import { call } from '../helpers/accounts.js';
import { createTestKey, startTestServer, tempDir, testConfig } from '../helpers/server.js';
import { sqliteOf } from '../helpers/state.js';

/**
 * Paddle Billing end to end. The real Paddle cannot run here, so its API is a loopback HTTP server that
 * records what pmlake sends and answers as Paddle's POST /transactions does. Webhook signatures are made
 * here, independently of src/payments, exactly as Paddle documents them: HMAC-SHA256 over `<ts>:<raw body>`.
 */
const SECRET = 'pdl_ntfset_01test_0123456789abcdefghij';
const API_KEY = 'pdl_apikey_test_0123456789';

type Recorded = { method: string; url: string; headers: http.IncomingHttpHeaders; body: any };
const recorded: Recorded[] = [];
let mode: 'ok' | 'fail' | 'no-url' = 'ok';

const txnId = () => `txn_${crypto.randomBytes(13).toString('hex')}`;
const evtId = () => `evt_${crypto.randomBytes(13).toString('hex')}`;

function startPaddleApi(): Promise<http.Server> {
  const server = http.createServer((req, res) => {
    let text = '';
    req.setEncoding('utf8');
    req.on('data', (c) => (text += c));
    req.on('end', () => {
      recorded.push({ method: req.method!, url: req.url!, headers: req.headers, body: text ? JSON.parse(text) : null });
      res.setHeader('Content-Type', 'application/json');
      if (mode === 'fail') {
        res.statusCode = 500;
        res.end(JSON.stringify({ error: { type: 'api_error', code: 'internal_error', detail: 'boom' }, meta: { request_id: 'r1' } }));
        return;
      }
      const id = txnId();
      res.statusCode = 201;
      res.end(
        JSON.stringify({
          data: { id, status: 'ready', checkout: { url: mode === 'ok' ? `https://pay.example.test/checkout?_ptxn=${id}` : null } },
          meta: { request_id: 'r2' },
        }),
      );
    });
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server)));
}

function signature(body: string, opts: { ts?: number; secret?: string } = {}): string {
  const ts = opts.ts ?? Math.floor(Date.now() / 1000);
  return `ts=${ts};h1=${crypto
    .createHmac('sha256', opts.secret ?? SECRET)
    .update(`${ts}:${body}`)
    .digest('hex')}`;
}

function completed(transactionId: string, checkoutId: string | null, eventId = evtId()) {
  return {
    event_id: eventId,
    event_type: 'transaction.completed',
    occurred_at: new Date().toISOString(),
    notification_id: `ntf_${crypto.randomBytes(13).toString('hex')}`,
    data: {
      id: transactionId,
      status: 'completed',
      currency_code: 'USD',
      custom_data: checkoutId ? { pmlake_checkout_id: checkoutId, pmlake_kind: 'credits' } : null,
      details: { totals: { subtotal: '4250', tax: '0', total: '4250', grand_total: '4250', currency_code: 'USD' } },
    },
  };
}

async function deliver(srv: RunningServer, body: string, header: string | null) {
  const res = await fetch(`${srv.url}/v1/billing/webhook/paddle`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', ...(header === null ? {} : { 'Paddle-Signature': header }) },
    body,
  });
  return { status: res.status, body: await res.json() };
}

describe('Paddle Billing: checkout through the API, credits through the signed webhook', () => {
  const tmp = tempDir();
  let srv: RunningServer;
  let api: http.Server;
  beforeAll(async () => {
    api = await startPaddleApi();
    srv = await startTestServer(
      testConfig({
        PMLAKE_LAKE: `${tmp.dir}/lake`,
        PMLAKE_STATE: `${tmp.dir}/state`,
        PMLAKE_PAYMENT_PROVIDER: 'paddle',
        PMLAKE_PADDLE_API_URL: `http://127.0.0.1:${(api.address() as AddressInfo).port}/`,
        PMLAKE_PADDLE_API_KEY: API_KEY,
        PMLAKE_PADDLE_WEBHOOK_SECRET: SECRET,
        // Wide enough for a loaded test machine; the default (5 s, Paddle's) is checked in billing-providers.
        PMLAKE_PADDLE_WEBHOOK_TOLERANCE_SECONDS: '60',
      }),
    );
  });
  afterAll(async () => {
    await srv.close();
    await new Promise((r) => api.close(r));
    tmp.cleanup();
  });

  async function checkout(key: string, amount = 42.5) {
    mode = 'ok';
    const r = await call(srv, 'POST', '/v1/billing/checkout', { key, body: { amount, success_url: 'http://localhost/ok', cancel_url: 'http://localhost/no' } });
    expect(r.status).toBe(200);
    const req = recorded.at(-1)!;
    const txn = /_ptxn=(txn_[0-9a-f]+)/.exec(r.body.checkout_url)![1]!;
    return { id: r.body.checkout_id as string, url: r.body.checkout_url as string, txn, req };
  }

  it('POST /v1/billing/checkout creates a Paddle transaction and hands out its payment link', async () => {
    const k = await createTestKey(srv, { email: 'paddle-co@example.com', plan: 'free' });
    const co = await checkout(k);
    expect(co.url).toBe(`https://pay.example.test/checkout?_ptxn=${co.txn}`);
    expect(co.req.method).toBe('POST');
    expect(co.req.url).toBe('/transactions');
    expect(co.req.headers.authorization).toBe(`Bearer ${API_KEY}`);
    expect(co.req.headers['content-type']).toBe('application/json');
    expect(co.req.body).toMatchObject({
      currency_code: 'USD',
      collection_mode: 'automatic',
      custom_data: { pmlake_checkout_id: co.id, pmlake_kind: 'credits' },
    });
    expect(co.req.body.items).toHaveLength(1);
    expect(co.req.body.items[0]).toMatchObject({
      quantity: 1,
      price: { unit_price: { amount: '4250', currency_code: 'USD' }, quantity: { minimum: 1, maximum: 1 }, product: { tax_category: 'standard' } },
    });
    // The session is stored with Paddle's transaction id; the local provider's page does not exist here.
    const row = sqliteOf(srv.ctx.state).prepare('SELECT provider, provider_ref, status FROM checkouts WHERE id = ?').get(co.id);
    expect(row).toEqual({ provider: 'paddle', provider_ref: co.txn, status: 'open' });
    expect((await fetch(`${srv.url}/v1/billing/checkout/local/${co.id}`)).status).toBe(404);
    expect((await fetch(`${srv.url}/v1/billing/webhook/local`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: '{}' })).status).toBe(
      404,
    );
  });

  it('webhook: refused without a valid, fresh signature; credits once; a replay credits nothing', async () => {
    const k = await createTestKey(srv, { email: 'paddle-hook@example.com', plan: 'free' });
    const user = (await srv.ctx.state.getUserByEmail('paddle-hook@example.com'))!;
    const co = await checkout(k);
    const balance = async () => (await getCreditAccount(srv.ctx.state, user.id)).balance_cents;
    const event = completed(co.txn, co.id);
    const body = JSON.stringify(event);
    const now = Math.floor(Date.now() / 1000);

    const refused = [
      await deliver(srv, body, null),
      await deliver(srv, body, ''),
      await deliver(srv, body, signature(body, { secret: 'pdl_ntfset_not_the_secret_0000000' })),
      await deliver(srv, body.replace('"4250"', '"999999"'), signature(body)),
      await deliver(srv, body.replace(co.id, `chk_${'b'.repeat(24)}`), signature(body)),
      await deliver(srv, body, signature(body, { ts: now - 600 })),
      await deliver(srv, body, signature(body, { ts: now + 600 })),
      await deliver(srv, body, signature(body).replace(/^ts=\d+;/, '')),
      await deliver(srv, body, signature(body).replace(/h1=[0-9a-f]+/, 'h1=zz')),
    ];
    for (const r of refused) expect(r).toEqual({ status: 400, body: { detail: 'Invalid webhook signature' } });
    expect(await balance()).toBe(0);

    const first = await deliver(srv, body, signature(body));
    expect(first).toEqual({ status: 200, body: { received: true, event_id: event.event_id, outcome: 'credited' } });
    expect(await balance()).toBe(4250);
    // Paddle retries with a fresh signature; an attacker replays the captured request as it was.
    expect((await deliver(srv, body, signature(body))).body.outcome).toBe('duplicate');
    // Another event for the same, already paid transaction credits nothing either.
    const again = JSON.stringify(completed(co.txn, co.id));
    expect((await deliver(srv, again, signature(again))).body.outcome).toBe('already_completed');
    expect(await balance()).toBe(4250);
    expect(await ledgerSum(srv.ctx.state, user.id)).toBe(4250);
    const tx = await call(srv, 'GET', '/v1/billing/transactions', { key: k });
    expect(tx.body).toHaveLength(1);
    expect(tx.body[0]).toMatchObject({ type: 'credit_purchase', amount: 42.5, metadata: { checkout_id: co.id, provider: 'paddle', event_id: event.event_id } });
    expect(sqliteOf(srv.ctx.state).prepare('SELECT type, outcome FROM webhook_events WHERE event_id = ?').get(event.event_id)).toEqual({
      type: 'transaction.completed',
      outcome: 'credited',
    });
  });

  it('the same event delivered many times at once credits exactly once', async () => {
    const k = await createTestKey(srv, { email: 'paddle-race@example.com', plan: 'free' });
    const user = (await srv.ctx.state.getUserByEmail('paddle-race@example.com'))!;
    const co = await checkout(k, 10);
    const body = JSON.stringify(completed(co.txn, co.id));
    const outs = await Promise.all(Array.from({ length: 8 }, () => deliver(srv, body, signature(body))));
    expect(outs.map((o) => o.body.outcome).sort()).toEqual(['credited', ...Array(7).fill('duplicate')]);
    expect((await getCreditAccount(srv.ctx.state, user.id)).balance_cents).toBe(1000);
  });

  it('secret rotation: any matching h1 is accepted', async () => {
    const k = await createTestKey(srv, { email: 'paddle-rotate@example.com', plan: 'free' });
    const user = (await srv.ctx.state.getUserByEmail('paddle-rotate@example.com'))!;
    const co = await checkout(k, 25);
    const body = JSON.stringify(completed(co.txn, co.id));
    const ts = Math.floor(Date.now() / 1000);
    const old = signature(body, { ts, secret: 'pdl_ntfset_the_old_secret_00000000' }).split(';')[1];
    const cur = signature(body, { ts }).split(';')[1];
    const r = await deliver(srv, body, `ts=${ts};${old};${cur}`);
    expect(r.body.outcome).toBe('credited');
    expect((await getCreditAccount(srv.ctx.state, user.id)).balance_cents).toBe(2500);
  });

  it('an event must name the transaction pmlake opened: custom_data alone credits nothing', async () => {
    const k = await createTestKey(srv, { email: 'paddle-bind@example.com', plan: 'free' });
    const user = (await srv.ctx.state.getUserByEmail('paddle-bind@example.com'))!;
    const co = await checkout(k, 500);
    // A cheaper transaction whose custom_data a customer's browser set to this checkout's id.
    const forged = JSON.stringify(completed(txnId(), co.id));
    expect((await deliver(srv, forged, signature(forged))).body).toMatchObject({ received: true, outcome: 'provider_ref_mismatch' });
    expect((await getCreditAccount(srv.ctx.state, user.id)).balance_cents).toBe(0);
    // The real payment still lands afterwards.
    const real = JSON.stringify(completed(co.txn, co.id));
    expect((await deliver(srv, real, signature(real))).body.outcome).toBe('credited');
    expect((await getCreditAccount(srv.ctx.state, user.id)).balance_cents).toBe(50_000);
  });

  it('other event types and transactions pmlake did not open are acknowledged and ignored', async () => {
    const created = JSON.stringify({ ...completed(txnId(), null), event_type: 'transaction.created' });
    expect(await deliver(srv, created, signature(created))).toMatchObject({ status: 200, body: { outcome: 'ignored' } });
    const foreign = JSON.stringify(completed(txnId(), null));
    expect(await deliver(srv, foreign, signature(foreign))).toMatchObject({ status: 200, body: { outcome: 'ignored' } });
    // Signed but not a Paddle event at all.
    const junk = JSON.stringify({ hello: 'world' });
    expect(await deliver(srv, junk, signature(junk))).toEqual({ status: 400, body: { detail: 'Invalid webhook payload' } });
  });

  it('subscription checkout: the completed transaction activates the plan, the balance is untouched', async () => {
    const k = await createTestKey(srv, { email: 'paddle-sub@example.com', plan: 'free' });
    mode = 'ok';
    const r = await call(srv, 'POST', '/v1/billing/subscription/checkout', {
      key: k,
      body: { tier: 'professional', billing_period: 'annual', success_url: 'http://localhost/ok', cancel_url: 'http://localhost/no' },
    });
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ tier: 'professional', billing_period: 'annual', amount: 990 });
    const req = recorded.at(-1)!;
    expect(req.body.items[0].price.unit_price).toEqual({ amount: '99000', currency_code: 'USD' });
    expect(req.body.custom_data).toEqual({ pmlake_checkout_id: r.body.checkout_id, pmlake_kind: 'subscription' });
    const txn = /_ptxn=(txn_[0-9a-f]+)/.exec(r.body.checkout_url)![1]!;
    const body = JSON.stringify(completed(txn, r.body.checkout_id));
    expect((await deliver(srv, body, signature(body))).body.outcome).toBe('subscription_activated');
    expect((await call(srv, 'GET', '/v1/billing/subscription', { key: k })).body).toMatchObject({
      active: true,
      tier: 'professional',
      billing_period: 'annual',
      funded_by: 'card',
    });
    expect((await call(srv, 'GET', '/v1/user/me', { key: k })).body.plan).toBe('professional');
    expect((await call(srv, 'GET', '/v1/billing/balance', { key: k })).body.balance).toBe(0);
  });

  it('when Paddle refuses or gives no payment link: 502, nothing stored, and the detail names no address', async () => {
    const k = await createTestKey(srv, { email: 'paddle-down@example.com', plan: 'free' });
    const user = (await srv.ctx.state.getUserByEmail('paddle-down@example.com'))!;
    for (const m of ['fail', 'no-url'] as const) {
      mode = m;
      const r = await call(srv, 'POST', '/v1/billing/checkout', {
        key: k,
        body: { amount: 10, success_url: 'http://localhost/ok', cancel_url: 'http://localhost/no' },
      });
      expect(r.status).toBe(502);
      expect(r.body.detail).toMatch(/payment provider could not start the checkout/);
      expect(JSON.stringify(r.body)).not.toMatch(/127\.0\.0\.1|paddle|boom/i);
    }
    mode = 'ok';
    expect((sqliteOf(srv.ctx.state).prepare('SELECT COUNT(*) AS n FROM checkouts WHERE user_id = ?').get(user.id) as { n: number }).n).toBe(0);
  });
});
