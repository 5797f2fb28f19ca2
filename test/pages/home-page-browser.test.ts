import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chromium, type Browser } from 'playwright-core';
import { buildQueryLake, type QueryLake } from '../helpers/query-lake.js';
import { currentVersion } from '../../src/lake/versions.js';

/**
 * GET / by content negotiation, over a real server and lake: a real browser (Debian chromium) gets a home page
 * whose links lead to the docs, the charts, the status and the OpenAPI document; API clients (JSON, any type, no
 * Accept header) get the root's JSON byte for byte as before. Screenshots go to test-artifacts/home/ (git-ignored).
 */
const ARTIFACTS = path.resolve('test-artifacts/home');

/** The root's JSON as API clients have always had it. */
const ROOT_JSON = JSON.stringify({ name: 'pmlake', version: '1.0.0', docs: '/docs', openapi: '/v1/openapi.json', health: '/health', status: '/v1/status' });

describe('GET /: a home page for a browser, the JSON for API clients', () => {
  let L: QueryLake;
  let browser: Browser;
  beforeAll(async () => {
    if (!fs.existsSync('/usr/bin/chromium')) execFileSync('bash', ['scripts/ensure-system-deps.sh'], { stdio: 'inherit' });
    L = await buildQueryLake({ markets: 2, days: 1 });
    browser = await chromium.launch({
      executablePath: '/usr/bin/chromium',
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'],
    });
    fs.mkdirSync(ARTIFACTS, { recursive: true });
  }, 180_000);
  afterAll(async () => {
    await browser?.close();
    await L?.close();
  });

  it('API clients get the same JSON as before, whatever they accept short of preferring HTML', async () => {
    const accepts = [undefined, 'application/json', '*/*', 'application/json, text/plain, */*', 'text/plain', 'text/html;q=0.5, application/json'];
    for (const accept of accepts) {
      const r = await fetch(`${L.srv.url}/`, { headers: accept === undefined ? {} : { accept } });
      expect(r.status, String(accept)).toBe(200);
      expect(r.headers.get('content-type'), String(accept)).toBe('application/json; charset=utf-8');
      expect(await r.text(), String(accept)).toBe(ROOT_JSON);
      // A cache keeps the two answers apart.
      expect(r.headers.get('vary') ?? '', String(accept)).toMatch(/\bAccept\b/);
    }
    // A client that asks for HTML above JSON (here by quality) gets the page.
    const html = await fetch(`${L.srv.url}/`, { headers: { accept: 'application/json;q=0.4, text/html' } });
    expect(html.headers.get('content-type')).toBe('text/html; charset=utf-8');
    expect(html.headers.get('vary') ?? '').toMatch(/\bAccept\b/);
  });

  it('a browser gets a home page linking the docs, the charts, the status and the OpenAPI document', async () => {
    // Where the OpenAPI document lives, as the service itself says (the root's JSON).
    const openapiPath = (JSON.parse(ROOT_JSON) as { openapi: string }).openapi;
    const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
    const problems: string[] = [];
    page.on('console', (m) => {
      if (m.type() === 'error' || m.type() === 'warning') problems.push(`${m.type()}: ${m.text()} (${m.location().url} on ${page.url()})`);
    });
    page.on('pageerror', (e) => problems.push(`pageerror: ${e.message}`));
    try {
      const res = await page.goto(`${L.srv.url}/`);
      expect(res!.status()).toBe(200);
      expect(res!.headers()['content-type']).toBe('text/html; charset=utf-8');
      expect(res!.headers()['content-security-policy']).toContain("default-src 'none'");
      expect(await page.title()).toBe('pmlake');
      const links = await page.$$eval('main a', (as) => as.map((a) => ({ id: a.id, href: a.getAttribute('href') })));
      expect(links.filter((l) => l.id)).toEqual([
        { id: 'docs', href: '/docs' },
        { id: 'charts', href: '/charts' },
        { id: 'status', href: '/v1/status' },
        { id: 'openapi', href: openapiPath },
      ]);
      // The lake version it serves, as the lake's manifest says.
      expect(await page.textContent('main')).toContain(`lake version ${currentVersion(L.lakeDir).version}`);
      await page.screenshot({ path: path.join(ARTIFACTS, 'home-1280x800.png'), fullPage: true });
      await page.setViewportSize({ width: 390, height: 844 });
      await page.screenshot({ path: path.join(ARTIFACTS, 'home-390x844.png'), fullPage: true });

      // Each link, clicked as a person would, leads to what it names.
      const want: Record<string, (p: typeof page) => Promise<void>> = {
        docs: async (p) => expect(await p.locator('body').textContent()).toContain('/v1/markets'),
        charts: async (p) => expect(await p.locator('#chart').count()).toBe(1),
        status: async (p) =>
          expect(JSON.parse((await p.locator('body').textContent())!)).toMatchObject({ version: '1.0.0', lake_version: currentVersion(L.lakeDir).version }),
        openapi: async (p) => {
          const doc = JSON.parse((await p.locator('body').textContent())!);
          expect(doc.openapi).toMatch(/^3\.1/);
          expect(doc.paths['/'].get).toBeDefined();
        },
      };
      for (const [id, check] of Object.entries(want)) {
        await page.goto(`${L.srv.url}/`);
        const [nav] = await Promise.all([page.waitForNavigation(), page.click(`#${id}`)]);
        expect(nav!.status(), id).toBe(200);
        expect(new URL(page.url()).pathname, id).toBe(links.find((l) => l.id === id)!.href);
        await check(page);
        // The pages (not the JSON documents, where the browser itself asks for /favicon.ico) say nothing wrong.
        if (id === 'charts') expect(problems).toEqual([]);
      }
    } finally {
      await page.close();
    }
  }, 120_000);
});
