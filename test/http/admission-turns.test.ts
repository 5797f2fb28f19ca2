import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApp } from '../../src/http/app.js';
import type { Admission } from '../../src/http/admission.js';
import type { Route } from '../../src/http/route.js';
import { routes } from '../../src/http/routes.js';
import { tradesCountQuery } from '../../src/query/trades.js';
import { buildQueryLake, catalog, type QueryLake } from '../helpers/query-lake.js';
import { createTestKey, testConfig } from '../helpers/server.js';

/**
 * The event loop's share (issue 10 item 10): while a scan holds a 'query' slot, requests that take no slot — the
 * cheap class, kept trades pages — start at most PMLAKE_CHEAP_PER_TURN per turn of the event loop, so each of
 * the scan's DuckDB completions is handled after at most that many of them, however many wait. On a real port
 * over a real lake: a crowd of closed-loop cheap clients runs for as long as a scan of real lake statements does.
 * The server runs in this process, so the test counts the loop's turns itself (a setImmediate that re-arms,
 * one per check phase) and asserts on counts of requests started per turn, never on milliseconds.
 */
const PER_TURN = 1;
const SCAN_STEPS = 12;
const CROWD = 32;

type Start = { turn: number; scanning: boolean };

describe('admission: cheap requests take their turns while a scan runs', () => {
  let L: QueryLake;
  let marketId: string;
  let turn = 0;
  let ticking = false;
  const tick = (): void => {
    turn++;
    if (ticking) setImmediate(tick);
  };
  /** Scan handlers running now; cheap handler starts and scan steps, each with the turn it happened in. */
  let scanning = 0;
  const cheapStarts: Start[] = [];
  const scanSteps: number[] = [];
  const testRoutes: Route[] = [
    {
      method: 'get',
      path: '/test/cheap',
      cost: 'cheap',
      auth: 'key',
      tag: 't',
      summary: 'records the turn it started in',
      handler: async () => {
        cheapStarts.push({ turn, scanning: scanning > 0 });
        return { ok: true };
      },
    },
    {
      method: 'get',
      path: '/test/scan',
      cost: 'query',
      auth: 'key',
      tag: 't',
      summary: 'one real lake statement after another, each step recording its turn',
      handler: async (_input, ctx) => {
        scanning++;
        try {
          let n = 0;
          for (let i = 0; i < SCAN_STEPS; i++) {
            n = await ctx.lake.count(tradesCountQuery(ctx.lake.sources, {}));
            scanSteps.push(turn);
          }
          return { trades: n, steps: SCAN_STEPS };
        } finally {
          scanning--;
        }
      },
    },
  ];
  const servers: Server[] = [];

  async function appWith(env: Record<string, string>): Promise<{ url: string; admission: Admission }> {
    const config = testConfig({ PMLAKE_LAKE: L.lakeDir, PMLAKE_STATE: path.dirname(L.lakeDir) + '/state', PMLAKE_RATE_LIMITS: 'off', ...env });
    const app = createApp({ ...L.srv.ctx, config }, [...testRoutes, ...routes]);
    const server = await new Promise<Server>((resolve) => {
      const s = app.listen(0, '127.0.0.1', () => resolve(s));
    });
    servers.push(server);
    return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, admission: app.locals.admission as Admission };
  }

  const get = async (url: string, key: string) => {
    const r = await fetch(url, { headers: { 'x-api-key': key } });
    return { status: r.status, body: (await r.json()) as any };
  };

  /** `CROWD` closed loops of cheap requests (the recording route, market detail, a kept trades page) until `stop`. */
  function crowd(url: string, key: string, stop: () => boolean): Promise<number[][]> {
    const paths = ['/test/cheap', `/v1/markets/${marketId}`, '/test/cheap', `/v1/trades?market_id=${marketId}&limit=5`];
    return Promise.all(
      Array.from({ length: CROWD }, async (_, c) => {
        const statuses: number[] = [];
        for (let i = c; !stop(); i++) statuses.push((await get(`${url}${paths[i % paths.length]}`, key)).status);
        return statuses;
      }),
    );
  }

  beforeAll(async () => {
    L = await buildQueryLake();
    const m = await L.rows(`SELECT id FROM read_parquet(${catalog(L.lakeDir, 'markets')}) ORDER BY trade_count DESC, id LIMIT 1`);
    marketId = String(m[0]!.id);
  });
  afterAll(async () => {
    ticking = false;
    for (const s of servers) {
      s.closeAllConnections();
      await new Promise((r) => s.close(r));
    }
    await L?.close();
  });

  it('with the cheap class saturated, no turn starts more than its share of cheap requests while the scan runs, and both finish', async () => {
    const { url, admission } = await appWith({ PMLAKE_CHEAP_PER_TURN: String(PER_TURN), PMLAKE_QUERY_CONCURRENCY: '3' });
    const key = await createTestKey(L.srv, { email: 'turns@example.com', name: 'turns' });
    // Kept before the load: the crowd's trades page is an answer held in memory (no slot), paced like a lookup.
    expect((await get(`${url}/v1/trades?market_id=${marketId}&limit=5`, key)).status).toBe(200);
    const alone = await get(`${url}/test/scan`, key);
    expect(alone.status).toBe(200);
    cheapStarts.length = 0;
    scanSteps.length = 0;
    const paced0 = admission.pacer.paced;

    ticking = true;
    setImmediate(tick);
    let done = false;
    const load = crowd(url, key, () => done);
    // The crowd is running (every loop past its first answers) before the scan arrives.
    while (cheapStarts.length < 4 * CROWD) await new Promise((r) => setImmediate(r));
    const scan = get(`${url}/test/scan`, key).finally(() => (done = true));
    const answer = await scan;
    const statuses = (await load).flat();
    ticking = false;

    // Both classes finished: the scan with the same answer as alone, every crowd request 200.
    expect(answer.status).toBe(200);
    expect(answer.body).toEqual(alone.body);
    expect(scanSteps).toHaveLength(SCAN_STEPS);
    expect(statuses.length).toBeGreaterThan(4 * CROWD);
    expect(statuses.every((s) => s === 200)).toBe(true);

    // The crowd saturated the cheap class: requests waited for their turn while the scan ran, and still got
    // turns (the scan did not starve them either).
    const during = cheapStarts.filter((s) => s.scanning);
    expect(admission.pacer.paced).toBeGreaterThan(paced0);
    expect(during.length).toBeGreaterThan(0);
    // The share: per turn of the loop, at most PER_TURN cheap starts in the pacer's own turn (its bookkeeping,
    // kept pages and market detail included) and at most 2 × PER_TURN by this test's count (its turn and the
    // pacer's need not begin at the same callback of a check phase).
    expect(admission.pacer.maxPerTurn).toBeLessThanOrEqual(PER_TURN);
    const perTurn = new Map<number, number>();
    for (const s of during) perTurn.set(s.turn, (perTurn.get(s.turn) ?? 0) + 1);
    expect(Math.max(...perTurn.values())).toBeLessThanOrEqual(2 * PER_TURN);
    await new Promise((r) => setImmediate(r));
    expect(admission.pacer.queued).toBe(0);
  });

  it('without a scan in flight, cheap requests are never paced', async () => {
    const { url, admission } = await appWith({ PMLAKE_CHEAP_PER_TURN: String(PER_TURN), PMLAKE_QUERY_CONCURRENCY: '3' });
    const key = await createTestKey(L.srv, { email: 'unpaced@example.com', name: 'unpaced' });
    expect((await get(`${url}/v1/trades?market_id=${marketId}&limit=5`, key)).status).toBe(200);
    let n = 0;
    const statuses = (await crowd(url, key, () => ++n > 6 * CROWD)).flat();
    expect(statuses.every((s) => s === 200)).toBe(true);
    expect(admission.pacer.paced).toBe(0);
    expect(admission.queue('query')!.inFlight).toBe(0);
  });
});
