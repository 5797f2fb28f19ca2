import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApp } from '../../src/http/app.js';
import type { Admission } from '../../src/http/admission.js';
import type { Route } from '../../src/http/route.js';
import { routes } from '../../src/http/routes.js';
import { buildQueryLake, catalog, type QueryLake } from '../helpers/query-lake.js';
import { createTestKey, testConfig } from '../helpers/server.js';

/**
 * Load shedding (issue 11 item 3) on a real server over a real lake: the service's own route table plus two
 * test routes whose handlers hold their class's only slot until the test lets go, so "the class is full" is a
 * state the test controls, not a race. Each app gets its own configuration (tiny limits, short or long deadline).
 */
type Gate = { entered: Promise<void>; release(): void };

function gateFor(): { next(): Gate; wait(): Promise<void> } {
  let current: { enter: () => void; entered: Promise<void>; done: Promise<void>; release: () => void } | null = null;
  const make = () => {
    let enter!: () => void;
    let release!: () => void;
    const entered = new Promise<void>((r) => (enter = r));
    const done = new Promise<void>((r) => (release = r));
    current = { enter, entered, done, release };
    return current;
  };
  return {
    next: () => make(),
    wait: async () => {
      const c = current!;
      c.enter();
      await c.done;
    },
  };
}

describe('admission: bounded concurrency per cost class, queue deadline, 503 refunded', () => {
  let L: QueryLake;
  let marketId: string;
  const holds = { query: gateFor(), stream: gateFor() };
  const held = (cost: 'query' | 'stream'): Route => ({
    method: 'get',
    path: `/test/hold-${cost}`,
    cost,
    auth: 'key',
    tag: 't',
    summary: 'holds its slot until the test releases it',
    handler: async () => {
      await holds[cost].wait();
      return { ok: true };
    },
  });
  const servers: Server[] = [];

  /** A second app over the same context (state, lake, meter) with its own admission settings. */
  async function appWith(env: Record<string, string>): Promise<{ url: string; admission: Admission }> {
    const config = testConfig({ PMLAKE_LAKE: L.lakeDir, PMLAKE_STATE: path.dirname(L.lakeDir) + '/state', ...env });
    const app = createApp({ ...L.srv.ctx, config }, [...routes, held('query'), held('stream')]);
    const server = await new Promise<Server>((resolve) => {
      const s = app.listen(0, '127.0.0.1', () => resolve(s));
    });
    servers.push(server);
    return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, admission: app.locals.admission as Admission };
  }

  const get = async (url: string, key: string) => {
    const r = await fetch(url, { headers: { 'x-api-key': key } });
    return { status: r.status, headers: r.headers, body: (await r.json()) as any };
  };

  async function until(cond: () => boolean): Promise<void> {
    while (!cond()) await new Promise((r) => setTimeout(r, 5));
  }

  beforeAll(async () => {
    L = await buildQueryLake();
    const m = await L.rows(`SELECT id FROM read_parquet(${catalog(L.lakeDir, 'markets')}) ORDER BY trade_count DESC, id LIMIT 1`);
    marketId = String(m[0]!.id);
  });
  afterAll(async () => {
    for (const s of servers) {
      s.closeAllConnections();
      await new Promise((r) => s.close(r));
    }
    await L?.close();
  });

  it('a query beyond the limit waits, then gets 503 + Retry-After; refunded: rate limit, usage and meter unchanged', async () => {
    const { url, admission } = await appWith({ PMLAKE_QUERY_CONCURRENCY: '1', PMLAKE_STREAM_CONCURRENCY: '1', PMLAKE_QUEUE_TIMEOUT_MS: '150' });
    const holder = await createTestKey(L.srv, { email: 'holder@example.com', name: 'holder' });
    const key = await createTestKey(L.srv, { email: 'shed@example.com', name: 'shed' });
    const reader = await createTestKey(L.srv, { email: 'shed@example.com', name: 'reader' });

    const usage0 = (await get(`${url}/v1/user/usage`, reader)).body;
    const downloads0 = (await get(`${url}/v1/user/downloads`, reader)).body;
    const g = holds.query.next();
    const holding = get(`${url}/test/hold-query`, holder);
    await g.entered;
    expect(admission.queue('query')!.inFlight).toBe(1);

    // A real lake query behind it: queued, then shed at the deadline.
    const shed = await get(`${url}/v1/trades?market_id=${marketId}&limit=5`, key);
    expect(shed.status).toBe(503);
    expect(Number(shed.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    expect(typeof shed.body.detail).toBe('string');
    expect(shed.body.detail).toMatch(/busy/i);
    expect(admission.queue('query')!.queued).toBe(0);

    // The same for a download (stream class): the meter never saw it.
    const gs = holds.stream.next();
    const holdingStream = get(`${url}/test/hold-stream`, holder);
    await gs.entered;
    const shedDownload = await get(`${url}/v1/download/trades?market_id=${marketId}&format=csv`, key);
    expect(shedDownload.status).toBe(503);

    // Refunded: the key's next request sees the whole minute's allowance but that one request.
    const after = await get(`${url}/v1/markets/${marketId}`, key);
    expect(after.status).toBe(200);
    expect(Number(after.headers.get('x-ratelimit-remaining'))).toBe(Number(after.headers.get('x-ratelimit-limit')) - 1);
    // Not counted in usage (only the reader's own first usage call is), no download recorded, no bytes.
    const usage1 = (await get(`${url}/v1/user/usage`, reader)).body;
    // +2: the reader's two calls before (usage, downloads); +1: the markets call after. The 503s: nothing.
    expect(usage1.total_requests).toBe(usage0.total_requests + 3);
    expect(usage1.total_downloads).toBe(usage0.total_downloads);
    expect(usage1.total_bytes).toBe(usage0.total_bytes);
    expect((await get(`${url}/v1/user/downloads`, reader)).body).toEqual(downloads0);

    g.release();
    gs.release();
    expect((await holding).status).toBe(200);
    expect((await holdingStream).status).toBe(200);
    // Every slot given back exactly once.
    await until(() => admission.queue('query')!.inFlight === 0 && admission.queue('stream')!.inFlight === 0);
    expect((await get(`${url}/v1/trades?market_id=${marketId}&limit=5`, key)).status).toBe(200);
  });

  it('cheap lookups and kept trades pages are answered while the query class is full and a query waits; it runs after release', async () => {
    const { url, admission } = await appWith({ PMLAKE_QUERY_CONCURRENCY: '1', PMLAKE_QUEUE_TIMEOUT_MS: '60000', PMLAKE_QUEUE_MAX: '1' });
    const key = await createTestKey(L.srv, { email: 'crowd@example.com', name: 'crowd' });
    // A page answered before is kept (per trades file versions) and takes no query slot.
    const kept = await get(`${url}/v1/trades?market_id=${marketId}&limit=8`, key);
    expect(kept.status).toBe(200);
    const g = holds.query.next();
    const holding = get(`${url}/test/hold-query`, key);
    await g.entered;

    let settled = false;
    const waiting = get(`${url}/v1/trades?market_id=${marketId}&limit=6`, key).finally(() => (settled = true));
    await until(() => admission.queue('query')!.queued === 1);
    // The queue is full (max 1): one more query is refused at once rather than waiting.
    const full = await get(`${url}/v1/trades/recent?limit=3`, key);
    expect(full.status).toBe(503);
    expect(full.headers.get('retry-after')).not.toBeNull();

    const detail = await get(`${url}/v1/markets/${marketId}`, key);
    expect(detail.status).toBe(200);
    expect(String(detail.body.id)).toBe(marketId);
    expect((await get(`${url}/v1/series`, key)).status).toBe(200);
    expect((await get(`${url}/v1/trades?market_id=${marketId}&limit=8`, key)).body).toEqual(kept.body);
    expect(settled).toBe(false);
    expect(admission.queue('query')!.queued).toBe(1);

    g.release();
    const r = await waiting;
    expect(r.status).toBe(200);
    expect(r.body).toEqual((await L.get(`/v1/trades?market_id=${marketId}&limit=6`)).body);
    expect((await holding).status).toBe(200);
    await until(() => admission.queue('query')!.inFlight === 0);
  });

  it('a client that gives up while queued loses its place and its slot is not leaked', async () => {
    const { url, admission } = await appWith({ PMLAKE_QUERY_CONCURRENCY: '1', PMLAKE_QUEUE_TIMEOUT_MS: '60000' });
    const key = await createTestKey(L.srv, { email: 'quitter@example.com', name: 'quitter' });
    const g = holds.query.next();
    const holding = get(`${url}/test/hold-query`, key);
    await g.entered;
    const ac = new AbortController();
    const gone = fetch(`${url}/v1/trades?market_id=${marketId}&limit=7`, { headers: { 'x-api-key': key }, signal: ac.signal }).catch(() => 'aborted');
    await until(() => admission.queue('query')!.queued === 1);
    ac.abort();
    expect(await gone).toBe('aborted');
    g.release();
    expect((await holding).status).toBe(200);
    await until(() => admission.queue('query')!.inFlight === 0);
    expect((await get(`${url}/v1/trades?market_id=${marketId}&limit=7`, key)).status).toBe(200);
    expect(admission.queue('query')!.inFlight).toBe(0);
  });
});
