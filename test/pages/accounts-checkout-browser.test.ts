import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chromium, type Browser } from 'playwright-core';
import { createTestKey, startTestServer, tempDir, testConfig } from '../helpers/server.js';
import { call } from '../helpers/accounts.js';
import type { RunningServer } from '../../src/server.js';

/** The local provider's hosted checkout page, driven by a real browser (Debian chromium). */
describe('checkout page in a real browser', () => {
  const tmp = tempDir();
  let srv: RunningServer;
  let browser: Browser;
  beforeAll(async () => {
    if (!fs.existsSync('/usr/bin/chromium')) execFileSync('bash', ['scripts/ensure-system-deps.sh'], { stdio: 'inherit' });
    srv = await startTestServer(testConfig({ PMLAKE_LAKE: `${tmp.dir}/lake`, PMLAKE_STATE: `${tmp.dir}/state`, PMLAKE_PAYMENT_PROVIDER: 'local' }));
    browser = await chromium.launch({
      executablePath: '/usr/bin/chromium',
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'],
    });
  }, 60_000);
  afterAll(async () => {
    await browser?.close();
    await srv?.close();
    tmp.cleanup();
  });

  it('open the checkout URL, click Pay, land on success_url with the balance credited through the webhook', async () => {
    const key = await createTestKey(srv, { email: 'browser@example.com', plan: 'free' });
    // The return page lives on another origin (localhost vs 127.0.0.1), as a customer's app would.
    const other = srv.url.replace('127.0.0.1', 'localhost');
    const co = await call(srv, 'POST', '/v1/billing/checkout', {
      key,
      body: { amount: 37, success_url: `${other}/health?from=checkout`, cancel_url: `${other}/health?from=cancel` },
    });
    expect(co.status).toBe(200);
    const page = await browser.newPage();
    try {
      await page.goto(co.body.checkout_url);
      expect(await page.textContent('#summary')).toContain('37.00 USD');
      expect((await call(srv, 'GET', '/v1/billing/balance', { key })).body.balance).toBe(0);
      await Promise.all([page.waitForURL(/from=checkout/), page.click('#pay')]);
      expect(page.url()).toBe(`${other}/health?from=checkout&checkout_id=${co.body.checkout_id}`);
      expect(await page.textContent('body')).toContain('"status":"ok"');
      const bal = await call(srv, 'GET', '/v1/billing/balance', { key });
      expect(bal.body.balance).toBe(37);
      const tx = await call(srv, 'GET', '/v1/billing/transactions', { key });
      expect(tx.body).toHaveLength(1);
      expect(tx.body[0]).toMatchObject({ type: 'credit_purchase', amount: 37 });
      // Back to the page: it now says the checkout is closed and offers no button.
      await page.goto(co.body.checkout_url);
      expect(await page.textContent('h1')).toContain('completed');
      expect(await page.$('#pay')).toBeNull();
    } finally {
      await page.close();
    }
  }, 60_000);

  it('Cancel returns to cancel_url and credits nothing', async () => {
    const key = await createTestKey(srv, { email: 'browser-cancel@example.com', plan: 'free' });
    const co = await call(srv, 'POST', '/v1/billing/checkout', {
      key,
      body: { amount: 15, success_url: `${srv.url}/health?from=checkout`, cancel_url: `${srv.url}/health?from=cancel` },
    });
    const page = await browser.newPage();
    try {
      await page.goto(co.body.checkout_url);
      await Promise.all([page.waitForURL(/from=cancel/), page.click('#cancel')]);
      expect((await call(srv, 'GET', '/v1/billing/balance', { key })).body.balance).toBe(0);
    } finally {
      await page.close();
    }
  }, 60_000);
});
