import http from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config.js';
import { sign } from '../../src/payments/signature.js';
import { createCheckout, getCreditAccount } from '../../src/state/billing.js';
import type { RunningServer } from '../../src/server.js';
import { call } from '../helpers/accounts.js';
import { createTestKey, startTestServer, tempDir, testConfig } from '../helpers/server.js';
import { sqliteOf } from '../helpers/state.js';

/** A POST with a Host header of our choosing (fetch would send the URL's own host). */
function postWithHost(srv: RunningServer, path: string, host: string, key: string, body: unknown): Promise<{ status: number; body: any }> {
  const u = new URL(srv.url);
  const data = JSON.stringify(body);
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        host: u.hostname,
        port: u.port,
        path,
        method: 'POST',
        headers: { Host: host, 'X-API-Key': key, 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(data) },
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (c) => (text += c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: JSON.parse(text) }));
      },
    );
    req.on('error', reject);
    req.end(data);
  });
}

const CREDITS = { amount: 99, success_url: 'http://localhost/ok', cancel_url: 'http://localhost/no' };
const SUB = { tier: 'professional', billing_period: 'monthly', success_url: 'http://localhost/ok', cancel_url: 'http://localhost/no' };
const count = (srv: RunningServer, userId: string) =>
  (sqliteOf(srv.ctx.state).prepare('SELECT COUNT(*) AS n FROM checkouts WHERE user_id = ?').get(userId) as { n: number }).n;

describe('payment provider configuration', () => {
  it('defaults to none; paddle needs its API key and webhook secret; unknown providers are refused', () => {
    const c = loadConfig({});
    expect(c.payments.provider).toBe('none');
    expect(c.payments.paddle).toMatchObject({ apiUrl: 'https://api.paddle.com', toleranceSeconds: 5 });
    expect(c.allowedHosts).toEqual([]);
    expect(() => loadConfig({ PMLAKE_PAYMENT_PROVIDER: 'paddle' })).toThrow(/PMLAKE_PADDLE_API_KEY[\s\S]*PMLAKE_PADDLE_WEBHOOK_SECRET/);
    expect(() => loadConfig({ PMLAKE_PAYMENT_PROVIDER: 'stripe' })).toThrow(ConfigError);
    expect(() => loadConfig({ PMLAKE_ALLOWED_HOSTS: 'ok.example, http://bad/' })).toThrow(/PMLAKE_ALLOWED_HOSTS/);
    expect(loadConfig({ PMLAKE_ALLOWED_HOSTS: 'API.example.com, 10.0.0.1:8443,' }).allowedHosts).toEqual(['api.example.com', '10.0.0.1:8443']);
  });
});

describe('serve without a payment provider (the default)', () => {
  const tmp = tempDir();
  let srv: RunningServer;
  beforeAll(async () => {
    srv = await startTestServer(testConfig({ PMLAKE_LAKE: `${tmp.dir}/lake`, PMLAKE_STATE: `${tmp.dir}/state` }));
  });
  afterAll(async () => {
    await srv.close();
    tmp.cleanup();
  });

  it('checkout and subscription checkout answer 503 with a detail and store nothing', async () => {
    const k = await createTestKey(srv, { email: 'none@example.com', plan: 'free' });
    const userId = (await srv.ctx.state.getUserByEmail('none@example.com'))!.id;
    const co = await call(srv, 'POST', '/v1/billing/checkout', { key: k, body: CREDITS });
    expect(co.status).toBe(503);
    expect(co.body).toEqual({ detail: 'Checkout is not available: this server has no payment provider configured' });
    const sub = await call(srv, 'POST', '/v1/billing/subscription/checkout', { key: k, body: SUB });
    expect(sub.status).toBe(503);
    expect(typeof sub.body.detail).toBe('string');
    expect(count(srv, userId)).toBe(0);
    // Validation still comes first: a bad body is a 422, not a 503.
    expect((await call(srv, 'POST', '/v1/billing/checkout', { key: k, body: { amount: 1 } })).status).toBe(422);
  });

  it("the issue's path is closed: no page, no confirm, no local webhook; nothing credited, no plan", async () => {
    const k = await createTestKey(srv, { email: 'mint@example.com', plan: 'free' });
    const user = (await srv.ctx.state.getUserByEmail('mint@example.com'))!;
    // Even a session left behind by an earlier local-provider deployment cannot be confirmed now.
    const id = `chk_${'a'.repeat(24)}`;
    await createCheckout(srv.ctx.state, {
      id,
      user_id: user.id,
      provider: 'local',
      kind: 'credits',
      amount_cents: 9900,
      tier: null,
      billing_period: null,
      success_url: 'http://localhost/ok',
      cancel_url: 'http://localhost/no',
      status: 'open',
      created_at: new Date().toISOString(),
      completed_at: null,
      provider_ref: null,
    });
    const base = `${srv.url}/v1/billing/checkout/local/${id}`;
    expect((await fetch(base)).status).toBe(404);
    const confirm = await fetch(`${base}/confirm`, { method: 'POST', redirect: 'manual' });
    expect(confirm.status).toBe(404);
    expect(await confirm.json()).toEqual({ detail: 'Not Found' });
    expect((await fetch(`${base}/cancel`, { method: 'POST', redirect: 'manual' })).status).toBe(404);
    // A local webhook signed with the built-in default secret is not accepted either.
    const event = JSON.stringify({ id: `evt_${'1'.repeat(24)}`, type: 'checkout.completed', checkout_id: id, created_at: new Date().toISOString() });
    const hook = await fetch(`${srv.url}/v1/billing/webhook/local`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', 'Pmlake-Signature': sign(srv.ctx.config.webhookSecret, event) },
      body: event,
    });
    expect(hook.status).toBe(404);
    // No Paddle secret configured: its webhook does not exist here.
    expect((await fetch(`${srv.url}/v1/billing/webhook/paddle`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: '{}' })).status).toBe(
      404,
    );

    expect((await getCreditAccount(srv.ctx.state, user.id)).balance_cents).toBe(0);
    expect((await call(srv, 'GET', '/v1/billing/balance', { key: k })).body.balance).toBe(0);
    expect((await call(srv, 'POST', '/v1/billing/subscription/redeem', { key: k, body: { tier: 'professional', billing_period: 'monthly' } })).status).toBe(
      402,
    );
    expect((await call(srv, 'GET', '/v1/user/me', { key: k })).body.plan).toBe('free');
    expect(sqliteOf(srv.ctx.state).prepare('SELECT COUNT(*) AS n FROM webhook_events').get()).toEqual({ n: 0 });
  });
});

describe('checkout links and the Host header', () => {
  const tmp = tempDir();
  const servers: RunningServer[] = [];
  const start = async (name: string, env: Record<string, string> = {}) => {
    const s = await startTestServer(
      testConfig({ PMLAKE_LAKE: `${tmp.dir}/lake`, PMLAKE_STATE: `${tmp.dir}/state-${name}`, PMLAKE_PAYMENT_PROVIDER: 'local', ...env }),
    );
    servers.push(s);
    return s;
  };
  afterAll(async () => {
    for (const s of servers) await s.close();
    tmp.cleanup();
  });

  it('an unlisted Host never becomes the link: it points at the listen address', async () => {
    const srv = await start('plain');
    const k = await createTestKey(srv, { email: 'host@example.com', plan: 'free' });
    const r = await postWithHost(srv, '/v1/billing/checkout', 'evil.example', k, CREDITS);
    expect(r.status).toBe(200);
    expect(new URL(r.body.checkout_url).host).not.toContain('evil.example');
    expect(r.body.checkout_url).toBe(`${srv.url}/v1/billing/checkout/local/${r.body.checkout_id}`);
    const sub = await postWithHost(srv, '/v1/billing/subscription/checkout', 'evil.example:8443', k, SUB);
    expect(sub.body.checkout_url).toBe(`${srv.url}/v1/billing/checkout/local/${sub.body.checkout_id}`);
  });

  it('a Host the operator allowed is used; others still are not', async () => {
    const srv = await start('allowed', { PMLAKE_ALLOWED_HOSTS: 'evil.example,api.example.com:8443' });
    const k = await createTestKey(srv, { email: 'allowed@example.com', plan: 'free' });
    const ok = await postWithHost(srv, '/v1/billing/checkout', 'evil.example', k, CREDITS);
    expect(ok.body.checkout_url).toBe(`http://evil.example/v1/billing/checkout/local/${ok.body.checkout_id}`);
    const withPort = await postWithHost(srv, '/v1/billing/checkout', 'api.example.com:8443', k, CREDITS);
    expect(withPort.body.checkout_url).toBe(`http://api.example.com:8443/v1/billing/checkout/local/${withPort.body.checkout_id}`);
    const otherPort = await postWithHost(srv, '/v1/billing/checkout', 'api.example.com:9999', k, CREDITS);
    expect(otherPort.body.checkout_url.startsWith(`${srv.url}/`)).toBe(true);
    const other = await postWithHost(srv, '/v1/billing/checkout', 'other.example', k, CREDITS);
    expect(other.body.checkout_url.startsWith(`${srv.url}/`)).toBe(true);
  });

  it('PMLAKE_PUBLIC_URL wins over any Host', async () => {
    const srv = await start('public', { PMLAKE_PUBLIC_URL: 'https://data.example.org/', PMLAKE_ALLOWED_HOSTS: 'evil.example' });
    const k = await createTestKey(srv, { email: 'public@example.com', plan: 'free' });
    const r = await postWithHost(srv, '/v1/billing/checkout', 'evil.example', k, CREDITS);
    expect(r.body.checkout_url).toBe(`https://data.example.org/v1/billing/checkout/local/${r.body.checkout_id}`);
  });
});
