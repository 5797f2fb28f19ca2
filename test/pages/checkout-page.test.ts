import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestKey, startTestServer, tempDir, testConfig } from '../helpers/server.js';
import { call } from '../helpers/accounts.js';
import type { RunningServer } from '../../src/server.js';

/**
 * The local provider's hosted checkout page over HTTP: its headers (a locked-down CSP that lets the form
 * redirect only to the session's return origins, no-store), its states, and the page shown when the provider
 * side cannot deliver its webhook. PMLAKE_PUBLIC_URL points the webhook at a stand-in that refuses it.
 */
describe('local checkout page', () => {
  const tmp = tempDir();
  let srv: RunningServer;
  let refuser: http.Server;
  let refused = 0;
  beforeAll(async () => {
    refuser = http.createServer((req, res) => {
      refused++;
      req.resume();
      res.statusCode = 503;
      res.end('down');
    });
    await new Promise<void>((resolve) => refuser.listen(0, '127.0.0.1', resolve));
    const publicUrl = `http://127.0.0.1:${(refuser.address() as AddressInfo).port}`;
    srv = await startTestServer(
      testConfig({ PMLAKE_LAKE: `${tmp.dir}/lake`, PMLAKE_STATE: `${tmp.dir}/state`, PMLAKE_PAYMENT_PROVIDER: 'local', PMLAKE_PUBLIC_URL: publicUrl }),
    );
  });
  afterAll(async () => {
    await srv?.close();
    await new Promise((resolve) => refuser?.close(resolve));
    tmp.cleanup();
  });

  const open = async (key: string) => {
    const co = await call(srv, 'POST', '/v1/billing/checkout', {
      key,
      body: { amount: 12.5, success_url: 'http://localhost:9/ok?a=1', cancel_url: 'https://example.com/no' },
    });
    expect(co.status).toBe(200);
    return co.body.checkout_id as string;
  };

  it('an open session: what is bought, Pay and Cancel forms, a CSP allowing only its return origins', async () => {
    const id = await open(await createTestKey(srv, { email: 'page-open@example.com', plan: 'free' }));
    const r = await call(srv, 'GET', `/v1/billing/checkout/local/${id}`);
    expect(r.status).toBe(200);
    expect(r.headers.get('content-type')).toBe('text/html; charset=utf-8');
    expect(r.headers.get('cache-control')).toBe('no-store');
    expect(r.headers.get('content-security-policy')).toBe(
      "default-src 'none'; style-src 'unsafe-inline'; form-action 'self' http://localhost:9 https://example.com; base-uri 'none'; frame-ancestors 'none'",
    );
    expect(r.body).toMatch(/^<!doctype html><html lang="en"><head><meta charset="utf-8"><title>pmlake checkout<\/title>\n/);
    expect(r.body).toContain('<p id="summary">Buy 12.50 USD of credits</p>');
    expect(r.body).toContain(
      `<form method="post" action="/v1/billing/checkout/local/${id}/confirm" style="display:inline"><button id="pay" type="submit">Pay 12.50 USD</button></form>`,
    );
    expect(r.body).toContain(
      `<form method="post" action="/v1/billing/checkout/local/${id}/cancel" style="display:inline"><button id="cancel" type="submit">Cancel</button></form>`,
    );
  });

  it('the webhook cannot be delivered: 502 page naming the status, nothing credited, the session still open', async () => {
    const key = await createTestKey(srv, { email: 'page-refused@example.com', plan: 'free' });
    const id = await open(key);
    const before = refused;
    const r = await call(srv, 'POST', `/v1/billing/checkout/local/${id}/confirm`);
    expect(refused).toBe(before + 1);
    expect(r.status).toBe(502);
    expect(r.headers.get('content-type')).toBe('text/html; charset=utf-8');
    expect(r.headers.get('cache-control')).toBe('no-store');
    expect(r.headers.get('content-security-policy')).toBe(
      "default-src 'none'; style-src 'unsafe-inline'; form-action 'self' ; base-uri 'none'; frame-ancestors 'none'",
    );
    expect(r.body).toContain('<title>Payment not confirmed</title>');
    expect(r.body).toContain('<h1>Payment not confirmed</h1><p>The payment provider could not notify pmlake (status 503). Nothing was charged; try again.</p>');
    expect((await call(srv, 'GET', '/v1/billing/balance', { key })).body.balance).toBe(0);
    const again = await call(srv, 'GET', `/v1/billing/checkout/local/${id}`);
    expect(again.body).toContain('id="pay"');
  });

  it('a canceled session: redirect to cancel_url, then a closed page without buttons', async () => {
    const id = await open(await createTestKey(srv, { email: 'page-cancel@example.com', plan: 'free' }));
    const c = await call(srv, 'POST', `/v1/billing/checkout/local/${id}/cancel`);
    expect(c.status).toBe(303);
    expect(c.headers.get('location')).toBe(`https://example.com/no?checkout_id=${id}`);
    const r = await call(srv, 'GET', `/v1/billing/checkout/local/${id}`);
    expect(r.status).toBe(200);
    expect(r.headers.get('content-security-policy')).toBe(
      "default-src 'none'; style-src 'unsafe-inline'; form-action 'self' ; base-uri 'none'; frame-ancestors 'none'",
    );
    expect(r.body).toContain('<title>Checkout closed</title>');
    expect(r.body).toContain('<h1>Checkout canceled</h1><p class="muted">Buy 12.50 USD of credits</p>');
    expect(r.body).not.toContain('<form');
  });

  it('an unknown or malformed checkout id: 404 / 422', async () => {
    expect((await call(srv, 'GET', '/v1/billing/checkout/local/chk_000000000000000000000000')).status).toBe(404);
    expect((await call(srv, 'GET', '/v1/billing/checkout/local/nope')).status).toBe(422);
  });
});
