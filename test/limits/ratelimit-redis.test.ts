import fs from 'node:fs';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Principal } from '../../src/accounts/principal.js';
import { ConfigError, loadConfig } from '../../src/config.js';
import { openLimits, type Limits } from '../../src/limits/index.js';
import { createLogger } from '../../src/log.js';
import type { RunningServer } from '../../src/server.js';
import { insertPull, listPulls, type PullRow } from '../../src/state/pulls.js';
import { StateStore } from '../../src/state/store.js';
import { call, startWithTable, type Reply } from '../helpers/accounts.js';
import { limitTestRoutes as testRoutes } from '../helpers/limit-routes.js';
import { startTestRedis, type TestRedis } from '../helpers/redis.js';
import { tempDir, testConfig } from '../helpers/server.js';

/**
 * Limits shared by two replicas through one real Redis (PMLAKE_REDIS_URL): two app instances on their own
 * loopback ports, each with its OWN state file holding the same accounts (copied before either starts), so
 * the only thing they share is Redis. Without it each replica would allow its own 60 requests and 10 downloads.
 */

const GB = 1024 ** 3;
// The spec's numbers: 60 requests a minute, 5 orders a minute, Free 10 downloads an hour, Professional 20 a minute.
const PER_MINUTE = 60;
const ORDERS = 5;
const FREE_PER_HOUR = 10;
const PRO_BURST = 20;

/** A download row as the meter writes it while the download streams. */
const PENDING: Omit<PullRow, 'id' | 'user_id' | 'created_at'> = {
  key_id: null,
  kind: 'download',
  dataset: 'trades',
  description: 'cut off',
  market_id: null,
  format: 'csv',
  file_name: null,
  timeframe: null,
  start_date: null,
  end_date: null,
  status: 'pending',
  reserved_bytes: 1000,
  bytes: null,
  rows: null,
  reason: null,
  finished_at: null,
};

const ACCOUNTS = ['limit', 'orders', 'refund', 'free-dl', 'pro-dl', 'crash-dl', 'outage', 'poll'] as const;
type Account = (typeof ACCOUNTS)[number];

describe('limits in Redis, shared by two replicas', () => {
  const tmp = tempDir('pmlake-redis-limits-');
  let redis: TestRedis;
  let A: RunningServer;
  let B: RunningServer;
  const keys = {} as Record<Account, string>;
  const users = {} as Record<Account, string>;

  beforeAll(async () => {
    redis = await startTestRedis();
    // One state file with every account, copied for each replica before either starts.
    fs.mkdirSync(`${tmp.dir}/seed`);
    const seed = StateStore.open(`${tmp.dir}/seed`);
    for (const a of ACCOUNTS) {
      const user = await seed.upsertUser(`${a}@example.com`, a === 'free-dl' || a === 'crash-dl' ? 'free' : 'professional');
      users[a] = user.id;
      keys[a] = (await seed.createApiKey({ userId: user.id, name: a, prefix: 'pm_' })).plaintext;
    }
    await seed.close();
    for (const r of ['a', 'b']) fs.cpSync(`${tmp.dir}/seed`, `${tmp.dir}/state-${r}`, { recursive: true });
    A = await startWithTable(cfg('a'), testRoutes);
    B = await startWithTable(cfg('b'), testRoutes);
  });
  afterAll(async () => {
    for (const s of [A, B]) {
      if (!s) continue;
      await s.close();
      await s.ctx.limits.close();
    }
    await redis?.close();
    tmp.cleanup();
  });

  const cfg = (r: string) =>
    testConfig({ PMLAKE_LAKE: `${tmp.dir}/lake`, PMLAKE_STATE: `${tmp.dir}/state-${r}`, PMLAKE_KEY_PREFIX: 'pm_', PMLAKE_REDIS_URL: redis.url });

  /** The i-th request of a sequence goes to A, B, A, B, ... */
  const replica = (i: number) => (i % 2 === 0 ? A : B);

  it('both replicas count in Redis, each with its own state file', () => {
    expect(A.ctx.limits.where).toBe('redis');
    expect(B.ctx.limits.where).toBe('redis');
    expect(A.ctx.state).not.toBe(B.ctx.state);
  });

  it('60 requests a minute per key across replicas: exactly the 61st is refused, with Retry-After', async () => {
    for (let i = 0; i < PER_MINUTE; i++) {
      const r = await call(replica(i), 'GET', '/test/ok', { key: keys.limit });
      expect(r.status).toBe(200);
      expect(r.headers.get('x-ratelimit-limit')).toBe(String(PER_MINUTE));
      // One count for both replicas: the i-th request of the pair leaves 59 - i.
      expect(r.headers.get('x-ratelimit-remaining')).toBe(String(PER_MINUTE - 1 - i));
    }
    const over = await call(replica(PER_MINUTE), 'GET', '/test/ok', { key: keys.limit });
    expect(over.status).toBe(429);
    expect(over.body).toEqual({ detail: 'Rate limit exceeded' });
    const retry = Number(over.headers.get('retry-after'));
    expect(retry).toBeGreaterThanOrEqual(1);
    expect(retry).toBeLessThanOrEqual(60);
    expect(over.headers.get('x-ratelimit-remaining')).toBe('0');
    const reset = Number(over.headers.get('x-ratelimit-reset'));
    expect(reset).toBeGreaterThanOrEqual(Math.floor(Date.now() / 1000));
    expect(reset).toBeLessThanOrEqual(Math.ceil(Date.now() / 1000) + 60);
    // The other replica refuses too; another key has its own bucket on both.
    expect((await call(replica(PER_MINUTE + 1), 'GET', '/test/ok', { key: keys.limit })).status).toBe(429);
    expect((await call(A, 'GET', '/test/ok', { key: keys.poll })).headers.get('x-ratelimit-remaining')).toBe(String(PER_MINUTE - 1));
  });

  it('the orders bucket (5 a minute) is shared, on top of the default one', async () => {
    for (let i = 0; i < ORDERS; i++) {
      const r = await call(replica(i), 'POST', '/test/order', { key: keys.orders });
      expect(r.status).toBe(200);
      expect(r.headers.get('x-ratelimit-remaining')).toBe(String(ORDERS - 1 - i));
    }
    const over = await call(replica(ORDERS), 'POST', '/test/order', { key: keys.orders });
    expect(over.status).toBe(429);
    expect(over.headers.get('x-ratelimit-limit')).toBe(String(ORDERS));
    expect(Number(over.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    // The default bucket counted all six (the refused order too) and still lets plain requests through.
    const ok = await call(replica(ORDERS + 1), 'GET', '/test/ok', { key: keys.orders });
    expect(ok.status).toBe(200);
    expect(ok.headers.get('x-ratelimit-remaining')).toBe(String(PER_MINUTE - ORDERS - 2));
  });

  it('a 5xx gives its slot back through Redis; a 4xx keeps it', async () => {
    for (let i = 0; i < 6; i++) expect((await call(replica(i), 'GET', '/test/boom', { key: keys.refund })).status).toBe(500);
    const ok = await call(B, 'GET', '/test/ok', { key: keys.refund });
    expect(ok.headers.get('x-ratelimit-remaining')).toBe(String(PER_MINUTE - 1));
    expect((await call(A, 'GET', '/test/pull?bytes=abc', { key: keys.refund })).status).toBe(422);
    expect((await call(B, 'GET', '/test/ok', { key: keys.refund })).headers.get('x-ratelimit-remaining')).toBe(String(PER_MINUTE - 3));
  });

  it('the download rate (Free: 10 an hour) is shared; refunded and fair-use-refused downloads free their slot', async () => {
    const k = keys['free-dl'];
    for (let i = 0; i < 3; i++) expect((await call(replica(i), 'GET', '/test/pull?fail=1', { key: k })).status).toBe(500);
    // Larger than Free's monthly volume: refused by the state store after Redis gave a slot, which goes back.
    const tooBig = await call(B, 'GET', `/test/pull?bytes=${2 * GB}`, { key: k });
    expect(tooBig.status).toBe(429);
    expect(tooBig.body.detail).toMatchObject({ code: 'fair_use_cap' });
    for (let i = 0; i < FREE_PER_HOUR; i++) expect((await call(replica(i), 'GET', '/test/pull', { key: k })).status).toBe(200);
    const over = await call(replica(FREE_PER_HOUR), 'GET', '/test/pull', { key: k });
    expect(over.status).toBe(429);
    expect(over.body).toEqual({ detail: 'Rate limit exceeded' });
    expect(over.headers.get('x-ratelimit-limit')).toBe(String(FREE_PER_HOUR));
    expect(over.headers.get('x-ratelimit-remaining')).toBe('0');
    const retry = Number(over.headers.get('retry-after'));
    expect(retry).toBeGreaterThan(3500);
    expect(retry).toBeLessThanOrEqual(3600);
    // Each replica's own history holds its half: the states are separate, the rate was not.
    const completed = async (s: RunningServer) => (await listPulls(s.ctx.state, users['free-dl'], { limit: 100, offset: 0, status: 'completed' })).length;
    expect(await completed(A)).toBe(FREE_PER_HOUR / 2);
    expect(await completed(B)).toBe(FREE_PER_HOUR / 2);
  });

  it('the burst cap (Professional: 20 a minute) is shared', async () => {
    const k = keys['pro-dl'];
    for (let i = 0; i < PRO_BURST; i++) expect((await call(replica(i), 'GET', '/test/pull', { key: k })).status).toBe(200);
    const over = await call(replica(PRO_BURST), 'GET', '/test/pull', { key: k });
    expect(over.status).toBe(429);
    expect(over.headers.get('x-ratelimit-limit')).toBe(String(PRO_BURST));
    const retry = Number(over.headers.get('retry-after'));
    expect(retry).toBeGreaterThanOrEqual(1);
    expect(retry).toBeLessThanOrEqual(60);
  });

  it('downloads cut off by a crashed replica give their Redis slots back when it starts again', async () => {
    const user = users['crash-dl'];
    // Replica C died streaming Free's whole hourly allowance: pending rows in its state file, slots in Redis.
    fs.cpSync(`${tmp.dir}/seed`, `${tmp.dir}/state-c`, { recursive: true });
    const c = StateStore.open(`${tmp.dir}/state-c`);
    const at = new Date();
    for (let i = 0; i < FREE_PER_HOUR; i++) {
      const id = `dl_crashed_${i}`;
      await insertPull(c, { ...PENDING, id, user_id: user, created_at: at.toISOString() });
      await A.ctx.limits.downloadRate!.acquire(user, id, [{ limit: FREE_PER_HOUR, windowMs: 3_600_000 }], at);
    }
    await c.close();
    expect((await call(A, 'GET', '/test/pull', { key: keys['crash-dl'] })).status).toBe(429);
    const C = await startWithTable(cfg('c'), testRoutes);
    try {
      expect(await listPulls(C.ctx.state, user, { limit: 20, offset: 0, status: 'failed' })).toHaveLength(FREE_PER_HOUR);
      // Another replica sees the slots free at once.
      expect((await call(A, 'GET', '/test/pull', { key: keys['crash-dl'] })).status).toBe(200);
    } finally {
      await C.close();
      await C.ctx.limits.close();
    }
  });

  it('Redis stopped: 503 with a JSON detail naming no address, nothing charged; back by itself when Redis returns', async () => {
    const k = keys.outage;
    // Request counts live in each replica's own state: these go to A, whose usage is read.
    for (let i = 0; i < 2; i++) expect((await call(A, 'GET', '/test/ok', { key: k })).status).toBe(200);
    const before = await call(A, 'GET', '/v1/user/usage', { key: k });
    expect(before.status).toBe(200);
    expect(before.body.total_requests).toBe(2);
    const principal = (await A.ctx.auth.authenticate({ apiKey: k })) as Principal;
    expect(principal.userId).toBe(users.outage);

    await redis.stop();
    const refused: Reply[] = [];
    for (const [i, [method, p]] of [
      ['GET', '/test/ok'],
      ['GET', '/test/ok'],
      ['GET', '/test/pull'],
      ['POST', '/test/order'],
      ['GET', '/v1/user/usage'],
    ].entries()) {
      refused.push(await call(replica(i), method!, p!, { key: k }));
    }
    for (const r of refused) {
      expect(r.status).toBe(503);
      expect(r.headers.get('content-type')).toMatch(/application\/json/);
      expect(typeof r.body.detail).toBe('string');
      expect(r.body.detail.length).toBeGreaterThan(10);
      for (const leak of ['127.0.0.1', String(redis.port), 'redis://', 'ECONNREFUSED', 'localhost']) expect(r.body.detail).not.toContain(leak);
      expect(Number(r.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    }
    // The meter (core, no HTTP) refuses a download the same way, before reserving anything.
    await expect(A.ctx.meter.begin(principal, { kind: 'download', dataset: 'trades', description: 'x', estimatedBytes: 1 })).rejects.toMatchObject({
      kind: 'unavailable',
    });
    expect(await listPulls(A.ctx.state, users.outage, { limit: 10, offset: 0 })).toHaveLength(0);
    expect(await listPulls(B.ctx.state, users.outage, { limit: 10, offset: 0 })).toHaveLength(0);

    await redis.start();
    // Bounded wait for each replica's client to reconnect (another account, so the outage account's usage is exact).
    for (const s of [A, B]) {
      let status = 0;
      for (let i = 0; i < 150 && status !== 200; i++) {
        status = (await call(s, 'GET', '/test/ok', { key: keys.poll })).status;
        if (status !== 200) await new Promise((r) => setTimeout(r, 100));
      }
      expect(status).toBe(200);
    }
    const after = await call(A, 'GET', '/v1/user/usage', { key: k });
    expect(after.status).toBe(200);
    // The two requests before, plus the first usage read; none of the five refused ones.
    expect(after.body.total_requests).toBe(3);
    expect(await listPulls(A.ctx.state, users.outage, { limit: 10, offset: 0 })).toHaveLength(0);
    // Counting resumed in the restarted (empty) Redis, shared again: the usage read above was the first hit.
    expect((await call(B, 'GET', '/test/ok', { key: k })).headers.get('x-ratelimit-remaining')).toBe(String(PER_MINUTE - 2));
    expect((await call(A, 'GET', '/test/ok', { key: k })).headers.get('x-ratelimit-remaining')).toBe(String(PER_MINUTE - 3));
    expect((await call(B, 'GET', '/test/pull', { key: k })).status).toBe(200);
  });
});

/** The Redis store against the in-process store's rules (test/limits/ratelimit-store.test.ts), same inputs. */
describe('RedisCounterStore', () => {
  let redis: TestRedis;
  let limits: Limits;
  const W = 60_000;
  const t0 = 1_000_000;

  beforeAll(async () => {
    redis = await startTestRedis();
    limits = await openLimits(redis.url, createLogger('silent'));
  });
  afterAll(async () => {
    await limits?.close();
    await redis?.close();
  });

  it('counts hits in a window that starts at the first hit and ends windowMs later', async () => {
    const s = limits.counters('t1', W);
    const hit = async (key: string, at: number) => ({ ...(await s.increment(key, at)) });
    expect(await hit('k', t0)).toEqual({ hits: 1, resetAt: t0 + W });
    expect(await hit('k', t0 + 10)).toEqual({ hits: 2, resetAt: t0 + W });
    expect(await hit('other', t0 + 10)).toEqual({ hits: 1, resetAt: t0 + 10 + W });
    expect((await hit('k', t0 + W - 1)).hits).toBe(3);
    expect(await hit('k', t0 + W)).toEqual({ hits: 1, resetAt: t0 + 2 * W });
    // Families do not share buckets.
    expect(await limits.counters('t2', W).increment('k', t0 + W)).toEqual({ hits: 1, resetAt: t0 + 2 * W });
  });

  it('gives back a hit only to the window it was counted in, never below zero', async () => {
    const s = limits.counters('t3', W);
    const first = await s.increment('k', t0);
    await s.increment('k', t0 + 1);
    await s.decrement('k', first.resetAt);
    expect((await s.increment('k', t0 + 2)).hits).toBe(2);
    const nextHits = (await s.increment('k', t0 + W)).hits;
    await s.decrement('k', first.resetAt);
    expect((await s.increment('k', t0 + W + 1)).hits).toBe(nextHits + 1);
    const fresh = await s.increment('z', t0);
    await s.decrement('z', fresh.resetAt);
    await s.decrement('z', fresh.resetAt);
    expect((await s.increment('z', t0 + 1)).hits).toBe(1);
  });

  it('runs its script again after Redis forgot it (EVALSHA answered NOSCRIPT → EVAL)', async () => {
    const s = limits.counters('t4', W);
    expect((await s.increment('k', t0)).hits).toBe(1);
    const admin = new Redis(redis.url);
    try {
      expect(await admin.script('FLUSH')).toBe('OK');
    } finally {
      admin.disconnect();
    }
    expect((await s.increment('k', t0 + 1)).hits).toBe(2);
  });

  it('the download rate: one slot per download in every window, the first full window refuses with its oldest start', async () => {
    const d = limits.downloadRate!;
    const windows = [
      { limit: 3, windowMs: 3_600_000 },
      { limit: 2, windowMs: 60_000 },
    ];
    const at = (ms: number) => new Date(t0 + ms);
    await d.acquire('u', 'd1', windows, at(0));
    await d.acquire('u', 'd2', windows, at(1000));
    // The minute window is full: free when d1 leaves it.
    await expect(d.acquire('u', 'd3', windows, at(2000))).rejects.toMatchObject({
      kind: 'rate_limited',
      headers: { 'X-RateLimit-Limit': '2', 'Retry-After': '58', 'X-RateLimit-Reset': String(Math.ceil((t0 + 60_000) / 1000)) },
    });
    await d.acquire('u', 'd3', windows, at(60_001));
    // Now the hour window is full (d1, d2, d3): free an hour after d1.
    await expect(d.acquire('u', 'd4', windows, at(120_000))).rejects.toMatchObject({ kind: 'rate_limited', headers: { 'X-RateLimit-Limit': '3' } });
    await d.release('u', 'd2');
    await d.acquire('u', 'd4', windows, at(120_000));
    // Another user is counted apart.
    await d.acquire('v', 'd1', windows, at(120_000));
  });
});

describe('PMLAKE_REDIS_URL', () => {
  it('is optional (limits in process), must be a redis:// or rediss:// URL, and is refused naming the variable otherwise', () => {
    expect(loadConfig({}).redisUrl).toBeUndefined();
    expect(loadConfig({ PMLAKE_REDIS_URL: 'redis://127.0.0.1:6390/2' }).redisUrl).toBe('redis://127.0.0.1:6390/2');
    expect(loadConfig({ PMLAKE_REDIS_URL: 'rediss://cache.internal:6380' }).redisUrl).toBe('rediss://cache.internal:6380');
    for (const bad of ['http://127.0.0.1:6379', '127.0.0.1:6379', '']) {
      expect(() => loadConfig({ PMLAKE_REDIS_URL: bad })).toThrow(ConfigError);
      expect(() => loadConfig({ PMLAKE_REDIS_URL: bad })).toThrow(/PMLAKE_REDIS_URL/);
    }
  });
});
