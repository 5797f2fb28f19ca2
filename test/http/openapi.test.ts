import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chromium, type Browser } from 'playwright-core';
import { SignJWT } from 'jose';
import type { z } from 'zod';
import { routes } from '../../src/http/routes.js';
import { createTestKey, startTestServer, tempDir, testConfig } from '../helpers/server.js';
import type { RunningServer } from '../../src/server.js';

const JWT_SECRET = 'openapi-test-secret-0123456789';

/** Field names of a route's zod object schema (through pipes, defaults and refinements), read from zod itself. */
function shapeKeys(schema: z.ZodType): string[] {
  let s: any = schema;
  for (let i = 0; i < 10 && s; i++) {
    if (s.shape) return Object.keys(s.shape);
    const def = s._zod?.def ?? s.def;
    s = def?.in ?? def?.innerType ?? def?.schema;
  }
  throw new Error('not an object schema');
}

describe('GET /v1/openapi.json and /docs', () => {
  const tmp = tempDir();
  let srv: RunningServer;
  let doc: any;
  beforeAll(async () => {
    srv = await startTestServer(testConfig({ PMLAKE_LAKE: `${tmp.dir}/lake`, PMLAKE_STATE: `${tmp.dir}/state`, PMLAKE_JWT_SECRET: JWT_SECRET }));
    const r = await fetch(`${srv.url}/v1/openapi.json`);
    expect(r.status).toBe(200);
    doc = await r.json();
  });
  afterAll(async () => {
    await srv.close();
    tmp.cleanup();
  });

  it('is OpenAPI 3.1, version 1.0.0, public', () => {
    expect(doc.openapi).toBe('3.1.0');
    expect(doc.info.version).toBe('1.0.0');
    expect(doc.components.securitySchemes.APIKeyHeader).toEqual({ type: 'apiKey', in: 'header', name: 'X-API-Key' });
    expect(doc.components.securitySchemes.HTTPBearer).toMatchObject({ type: 'http', scheme: 'bearer', bearerFormat: 'JWT' });
  });

  it('describes every route of the table with all its parameters; keyed routes with both schemes and 401', () => {
    expect(routes.length).toBeGreaterThan(10);
    const described = new Set<string>();
    for (const r of routes) {
      const p = r.path.replace(/:([A-Za-z0-9_]+)/g, '{$1}');
      const op = doc.paths[p]?.[r.method];
      const at = `${r.method} ${p}`;
      expect(op, at).toBeDefined();
      described.add(at);
      expect(op.summary).toBe(r.summary);
      if (r.auth === 'key') {
        // The bearer JWT is accepted wherever a key is (accountAuthenticator); credentials 'jwt' rows take only it.
        expect(op.security, at).toEqual(r.credentials === 'jwt' ? [{ HTTPBearer: [] }] : [{ HTTPBearer: [] }, { APIKeyHeader: [] }]);
        expect(op.responses['401']).toBeDefined();
      } else expect(op.security).toBeUndefined();
      if (r.query || r.params || r.body) expect(op.responses['422'].content['application/json'].schema.$ref).toBe('#/components/schemas/HTTPValidationError');
      // Every path segment variable and every field of the query schema, each once, in the right place.
      const got = (op.parameters as { in: string; name: string }[]).map((x) => `${x.in}:${x.name}`).sort();
      const pathVars = [...r.path.matchAll(/:([A-Za-z0-9_]+)/g)].map((m) => `path:${m[1]}`);
      const want = [...(r.params ? shapeKeys(r.params).map((k) => `path:${k}`) : []), ...(r.query ? shapeKeys(r.query).map((k) => `query:${k}`) : [])].sort();
      expect(got, at).toEqual(want);
      for (const v of pathVars) expect(got, at).toContain(v);
      // A named body schema (the anchor's names, e.g. DeleteConfirmRequest) is a $ref into components.
      const bodySchema = (s: any) => (s?.$ref ? doc.components.schemas[s.$ref.split('/').pop()] : s);
      if (r.body)
        expect(Object.keys(bodySchema(op.requestBody.content['application/json'].schema).properties ?? {}).sort(), at).toEqual(shapeKeys(r.body).sort());
      else expect(op.requestBody, at).toBeUndefined();
    }
    // Nothing described that the app does not serve (beyond /health).
    const all = Object.entries(doc.paths).flatMap(([p, m]) => Object.keys(m as object).map((k) => `${k} ${p}`));
    expect(all.filter((x) => !described.has(x))).toEqual(['get /health']);
  });

  it('the documented schemes are the ones enforced: bearer JWT and X-API-Key on keyed routes, bearer only where said', async () => {
    const secret = new TextEncoder().encode(JWT_SECRET);
    let n = 0;
    const call = async (method: string, path: string, headers: Record<string, string>): Promise<number> => {
      const res = await fetch(`${srv.url}${path}`, {
        method: method.toUpperCase(),
        headers: { ...headers, 'content-type': 'application/json' },
        body: method === 'get' ? undefined : '{"_":1}',
      });
      await res.arrayBuffer();
      return res.status;
    };
    for (const r of routes.filter((x) => x.auth === 'key')) {
      const p = r.path.replace(/:([A-Za-z0-9_]+)/g, 'x1');
      const op = doc.paths[r.path.replace(/:([A-Za-z0-9_]+)/g, '{$1}')][r.method];
      const schemes = (op.security as Record<string, unknown>[]).map((s) => Object.keys(s)[0]);
      // A user (and key) per route: each has its own rate-limit bucket.
      const email = `scheme${n++}@example.com`;
      const key = await createTestKey(srv, { email, plan: 'professional', name: 'scheme' });
      const jwt = await new SignJWT({ email }).setProtectedHeader({ alg: 'HS256' }).setExpirationTime('5m').sign(secret);
      const at = `${r.method} ${r.path}`;
      // Accepted means: past authentication (the request may still be a 4xx for its missing parameters).
      const withJwt = await call(r.method, p, { authorization: `Bearer ${jwt}` });
      const withKey = await call(r.method, p, { 'x-api-key': key });
      expect(withJwt !== 401 && withJwt !== 403, `${at} bearer → ${withJwt}`).toBe(schemes.includes('HTTPBearer'));
      expect(withKey !== 401 && withKey !== 403, `${at} key → ${withKey}`).toBe(schemes.includes('APIKeyHeader'));
      expect(await call(r.method, p, {}), at).toBe(401);
    }
  });

  it('parameters carry the enforced defaults and bounds (generated from the zod schemas)', () => {
    const param = (path: string, name: string) => doc.paths[path].get.parameters.find((p: { name: string }) => p.name === name);
    expect(param('/v1/markets', 'limit').schema).toMatchObject({ type: 'integer', default: 100, minimum: 1, maximum: 1000 });
    expect(param('/v1/markets', 'offset').schema).toMatchObject({ default: 0, minimum: 0, maximum: 1_000_000 });
    // An optional parameter without a default is written as the anchor writes it: anyOf [its schema, null].
    const opt = (p: { schema: any }) => (expect(p.schema.anyOf[1]).toEqual({ type: 'null' }), p.schema.anyOf[0]);
    expect(opt(param('/v1/markets', 'active')).type).toBe('boolean');
    expect(opt(param('/v1/markets', 'sort_by')).type).toBe('string');
    expect(param('/v1/trades', 'limit').schema).toMatchObject({ default: 100, maximum: 10_000 });
    expect(opt(param('/v1/trades', 'start'))).toMatchObject({ type: 'string', format: 'date-time' });
    expect(param('/v1/trades/ohlcv', 'limit').schema).toMatchObject({ default: 500, maximum: 10_000 });
    expect(param('/v1/trades/ohlcv', 'timeframe').schema.default).toBe('1h');
    expect(param('/v1/trades/ohlcv', 'market_id').required).toBe(true);
    expect(param('/v1/trades/recent', 'limit').schema).toMatchObject({ default: 50, maximum: 100 });
    expect(doc.paths['/v1/markets/{market_id}'].get.parameters[0]).toMatchObject({ name: 'market_id', in: 'path', required: true });
    const trade = doc.components.schemas.TradeResponse;
    expect(Object.keys(trade.properties)).toEqual([
      'id',
      'market_id',
      'timestamp',
      'block_number',
      'transaction_hash',
      'outcome',
      'outcome_label',
      'side',
      'price',
      'size',
      'usd_value',
      'maker',
      'taker',
      'fee',
      'collateral',
    ]);
    expect(doc.paths['/v1/markets'].get.responses['200'].content['application/json'].schema).toEqual({
      type: 'array',
      items: { $ref: '#/components/schemas/MarketResponse' },
    });
    // Request bodies are the anchor's named schemas, $ref'd into components.
    const estimateBody = doc.paths['/v1/markets/{market_id}/estimate'].post.requestBody.content['application/json'].schema;
    expect(estimateBody).toEqual({ $ref: '#/components/schemas/MarketEstimateRequest' });
    expect(doc.components.schemas.MarketEstimateRequest.properties.data_type.default).toBe('trades');
    // Every $ref resolves.
    const refs = JSON.stringify(doc).match(/"#\/components\/schemas\/[^"]+"/g) ?? [];
    for (const ref of refs) expect(doc.components.schemas[ref.slice(22, -1)], ref).toBeDefined();
  });

  it('/docs renders every operation in a real browser', async () => {
    let browser: Browser | undefined;
    try {
      browser = await chromium.launch({
        executablePath: '/usr/bin/chromium',
        args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'],
      });
      const page = await browser.newPage();
      const errors: string[] = [];
      page.on('pageerror', (e) => errors.push(String(e)));
      const res = await page.goto(`${srv.url}/docs`);
      expect(res?.status()).toBe(200);
      await page.waitForSelector('body[data-ready="true"]', { timeout: 30_000 });
      expect(errors).toEqual([]);
      const ops = await page.$$eval('details.op', (els) => els.map((e) => `${(e as HTMLElement).dataset.method} ${(e as HTMLElement).dataset.path}`));
      const want = Object.entries(doc.paths).flatMap(([p, m]) => Object.keys(m as object).map((k) => `${k} ${p}`));
      expect(ops.sort()).toEqual(want.sort());
      expect(await page.textContent('#version')).toBe('1.0.0');
      // The markets list: open it, read the limit row, and try it against the live server without a key.
      const op = page.locator('details.op[data-path="/v1/markets"][data-method="get"]');
      await op.locator('summary').click();
      const limitRow = await op.locator('table.params tr', { hasText: 'limit' }).first().innerText();
      expect(limitRow).toContain('100');
      expect(limitRow).toContain('max 1000');
      await op.locator('button', { hasText: 'Send' }).click();
      await expect.poll(async () => op.locator('pre').innerText()).toContain('401');
      await page.fill('#key', '<script>alert(1)</script>');
      const series = page.locator('details.op[data-path="/v1/series"][data-method="get"]');
      await series.locator('summary').click();
      await series.locator('button', { hasText: 'Send' }).click();
      await expect.poll(async () => series.locator('pre').innerText()).toContain('200');
      expect(errors).toEqual([]);
    } finally {
      await browser?.close();
    }
  });
});
