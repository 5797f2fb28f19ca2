import { SignJWT } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { routes } from '../../src/http/routes.js';
import { jsonDepthExceeds, MAX_JSON_DEPTH } from '../../src/http/body-limits.js';
import { createTestKey, startTestServer, tempDir, testConfig } from '../helpers/server.js';
import type { RunningServer } from '../../src/server.js';

/**
 * Issue 11, item 2: input that reached a 500. A deeply nested JSON body overflowed the stack while the
 * validation error echoed it; 5xx answers refund the rate-limit slot, so it could be repeated forever. Every
 * route that takes a JSON body is driven here with hostile bodies, and every keyed GET route with hostile
 * query strings: each must be a 4xx with a JSON `detail`, small, and counted against the caller's limit.
 */
const JWT_SECRET = 'hostile-input-jwt-secret-0123456789';
const tmp = tempDir();
let srv: RunningServer;
let base: string;
let jwt: string;

const bodyRoutes = routes.filter((r) => r.body !== undefined);
const fill = (path: string) => path.replace(/:([a-z_]+)/g, (_m, name: string) => (name.endsWith('id') ? '1' : 'x'));

beforeAll(async () => {
  srv = await startTestServer(testConfig({ PMLAKE_LAKE: `${tmp.dir}/lake`, PMLAKE_STATE: `${tmp.dir}/state`, PMLAKE_JWT_SECRET: JWT_SECRET }));
  base = srv.url;
  jwt = await new SignJWT({ email: 'hostile@example.com' })
    .setProtectedHeader({ alg: 'HS256' })
    .setExpirationTime('10m')
    .sign(new TextEncoder().encode(JWT_SECRET));
});
afterAll(async () => {
  await srv?.close();
  tmp.cleanup();
});

// A key per route keeps every request of this file under the 60/min limit (the limits stay on: item 2 is
// also about what they count).
let keys = 0;
const freshKey = () => createTestKey(srv, { email: 'hostile@example.com', name: `k${++keys}`, scopes: ['read', 'download'] });

async function send(method: string, path: string, body: string, auth: 'key' | 'jwt', key: string) {
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  if (auth === 'key') headers['x-api-key'] = key;
  else headers.authorization = `Bearer ${jwt}`;
  const res = await fetch(base + path, { method: method.toUpperCase(), headers, body });
  const text = await res.text();
  return { status: res.status, text, remaining: res.headers.get('x-ratelimit-remaining') };
}

const nestedArray = (depth: number) => '['.repeat(depth) + ']'.repeat(depth);

describe('the nesting check on raw JSON', () => {
  it('counts brackets outside strings only, with escapes', () => {
    // An independent count: depth by parsing a value built to a known depth.
    const deep = (d: number): unknown => (d === 0 ? 1 : { a: [deep(d - 1)] });
    expect(jsonDepthExceeds(Buffer.from(JSON.stringify(deep(10))), 20)).toBe(false); // 20 levels exactly
    expect(jsonDepthExceeds(Buffer.from(JSON.stringify(deep(11))), 20)).toBe(true);
    expect(jsonDepthExceeds(Buffer.from(JSON.stringify({ s: '[[[[[[[[[[\\"[[[[[[' })), 2)).toBe(false);
    expect(jsonDepthExceeds(Buffer.from(nestedArray(MAX_JSON_DEPTH)))).toBe(false);
    expect(jsonDepthExceeds(Buffer.from(nestedArray(MAX_JSON_DEPTH + 1)))).toBe(true);
  });
});

describe('hostile JSON bodies on every JSON-body route', () => {
  it('finds the JSON-body routes', () => {
    // The issue counted 9; a new one joins this test by being in the route table.
    expect(bodyRoutes.length).toBeGreaterThanOrEqual(9);
  });

  it('a 200 KB [[[…]]] body is a 400 naming the limit, never a 500, and counts against the limit', async () => {
    const body = nestedArray(100_000);
    for (const r of bodyRoutes) {
      const auth = r.credentials === 'jwt' ? 'jwt' : 'key';
      const first = await send(r.method, fill(r.path), body, auth, await freshKey());
      expect(first.status, `${r.method} ${r.path}`).toBe(400);
      expect(JSON.parse(first.text).detail).toContain(`${MAX_JSON_DEPTH} levels`);
    }
    // The same body inside a field, and on a route that would otherwise validate it.
    const inField = await send('post', '/v1/billing/checkout', `{"amount":${nestedArray(50_000)}}`, 'key', await freshKey());
    expect(inField.status).toBe(400);
  });

  it('wrong-typed values are named, and what is echoed stays small whatever the input', async () => {
    const hostile = [
      `{"amount":${nestedArray(MAX_JSON_DEPTH - 2)}}`, // deep but under the limit
      `{"amount":[${Array.from({ length: 50_000 }, (_, i) => i).join(',')}]}`, // wide
      `{"amount":"${'x'.repeat(500_000)}"}`, // long
      `{"amount":{${Array.from({ length: 5_000 }, (_, i) => `"k${i}":${i}`).join(',')}}}`, // many keys
      nestedArray(MAX_JSON_DEPTH), // the whole body an array
      `{"__proto__":{"admin":true},"constructor":{"prototype":{"x":1}},"amount":1e400}`,
    ];
    for (const r of bodyRoutes) {
      const auth = r.credentials === 'jwt' ? 'jwt' : 'key';
      const key = await freshKey();
      for (const body of hostile) {
        const got = await send(r.method, fill(r.path), body, auth, key);
        expect(got.status, `${r.method} ${r.path} ${body.slice(0, 40)}`).toBeGreaterThanOrEqual(400);
        expect(got.status, `${r.method} ${r.path} ${body.slice(0, 40)}`).toBeLessThan(500);
        expect(JSON.parse(got.text)).toHaveProperty('detail');
        // Bounded: the answer does not grow with the request.
        expect(got.text.length, `${r.method} ${r.path}`).toBeLessThan(8_192);
      }
    }
  });

  it('repeating a refused body uses up the caller’s requests (a 4xx is not refunded)', async () => {
    const k2 = await createTestKey(srv, { email: 'repeat@example.com', name: 'repeat' });
    const remaining: number[] = [];
    for (let i = 0; i < 3; i++) {
      const res = await fetch(`${base}/v1/billing/checkout`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-api-key': k2 },
        body: `{"amount":${nestedArray(1_000)}}`,
      });
      // Refused by the body check, which runs after the rate limit counted the request.
      expect(res.status).toBe(400);
      remaining.push(Number(res.headers.get('x-ratelimit-remaining') ?? NaN));
    }
    const ok = await fetch(`${base}/v1/user/usage`, { headers: { 'x-api-key': k2 } });
    const after = Number(ok.headers.get('x-ratelimit-remaining'));
    expect(Number.isFinite(after)).toBe(true);
    // 3 refused + this one: all four counted.
    expect(after).toBe(60 - 4);
  });
});

describe('hostile query strings and path parameters on every keyed GET route', () => {
  it('never answer 5xx', async () => {
    const values = [
      "'; DROP TABLE trades; --",
      '%00',
      '\u0000',
      'x'.repeat(5_000),
      '-1',
      '1e309',
      'NaN',
      '0001-01-01T00:00:00Z',
      '9999-12-31T23:59:59.999999999Z',
    ];
    const getRoutes = routes.filter((r) => r.method === 'get' && r.auth === 'key' && r.credentials !== 'jwt');
    for (const r of getRoutes) {
      const key = await freshKey();
      const names = r.query ? Object.keys((r.query as unknown as { shape?: Record<string, unknown> }).shape ?? {}) : [];
      for (const v of values) {
        const qs = [...names.map((n) => `${n}=${encodeURIComponent(v)}`), ...names.map((n) => `${n}[a][b]=1`)].join('&');
        const path = r.path.replace(/:([a-z_]+)/g, () => encodeURIComponent(v));
        const res = await fetch(`${base}${path}?${qs}`, { headers: { 'x-api-key': key } });
        const text = await res.text();
        expect(res.status, `${r.path} ${v.slice(0, 20)}`).toBeLessThan(500);
        if (res.status >= 400 && res.headers.get('content-type')?.includes('json')) expect(JSON.parse(text)).toHaveProperty('detail');
      }
    }
  });
});

describe('years 0000–0099 (item 7)', () => {
  it('a date in year 1 is read as year 1, not 1901, and said back so', async () => {
    const key = await freshKey();
    const res = await fetch(`${base}/v1/download/raw/estimate?data_type=polymarket_raw&start=0001-01-01T00:00:00Z&end=0099-12-31`, {
      headers: { 'x-api-key': key },
    });
    expect(res.status).toBe(200);
    const body = (await res.json()) as { start: string; end: string };
    expect(body.start).toBe('0001-01-01T00:00:00.000Z');
    expect(body.end).toBe('0099-12-31T00:00:00.000Z');
  });
});
