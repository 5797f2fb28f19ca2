import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generate } from '../../sim/generate/index.js';
import { runIngest } from '../../ingest/run.js';
import { createApp } from '../../src/http/app.js';
import type { Admission } from '../../src/http/admission.js';
import { marketOut } from '../../src/http/markets/view.js';
import type { Route } from '../../src/http/route.js';
import { routes } from '../../src/http/routes.js';
import { runQuery } from '../../src/lake/runner.js';
import { LakeSession } from '../../src/lake/session.js';
import { listMarketsQuery, type MarketListFilter } from '../../src/query/markets.js';
import { buildQueryLake, catalog, glob, type QueryLake } from '../helpers/query-lake.js';
import { createTestKey, testConfig } from '../helpers/server.js';

/**
 * GET /v1/markets answered from the lake version's catalogue held in memory: every page is the one the SQL
 * list query gives (the answer before), and the one an independent computation over the catalogue Parquet
 * gives; only reading the catalogue — once per version — scans the lake, so only that takes a 'query' slot.
 */
type M = Record<string, any>;
const SORTS = ['top', 'newest_data', 'volume', 'trades', 'orderbook', 'created', 'end_date'] as const;
type Sort = (typeof SORTS)[number];

const n = (x: unknown): number => (x === null || x === undefined ? 0 : Number(x));
const nullable = (x: unknown): number | bigint | null => (x === null || x === undefined ? null : typeof x === 'bigint' ? x : Number(x));

/** Descending by each key in turn, NULL last; then id ascending. */
function ordered(rows: M[], keys: ((m: M) => number | bigint | null)[]): M[] {
  return [...rows].sort((a, b) => {
    for (const key of keys) {
      const x = key(a);
      const y = key(b);
      if (x === y) continue;
      if (x === null) return 1;
      if (y === null) return -1;
      return x > y ? -1 : 1;
    }
    return String(a.id) < String(b.id) ? -1 : String(a.id) > String(b.id) ? 1 : 0;
  });
}

const SORT_KEYS: Record<Sort, ((m: M) => number | bigint | null)[]> = {
  top: [(m) => n(m.trade_count) + n(m.orderbook_count), (m) => nullable(m.volume)],
  newest_data: [(m) => nullable(m.data_to_us)],
  volume: [(m) => nullable(m.volume)],
  trades: [(m) => nullable(m.trade_count)],
  orderbook: [(m) => nullable(m.orderbook_count)],
  created: [(m) => nullable(m.created_us)],
  end_date: [(m) => nullable(m.end_us)],
};

async function readCatalogue(L: QueryLake): Promise<M[]> {
  return L.rows(
    `SELECT id, question, condition_id, category, series_id, active, closed, resolved, trade_count, orderbook_count, volume,
            epoch_us(end_date) AS end_us, epoch_us(created_at) AS created_us, epoch_us(data_to) AS data_to_us
     FROM read_parquet(${catalog(L.lakeDir, 'markets')})`,
  );
}

describe('GET /v1/markets from the catalogue in memory: the same pages as the lake query', () => {
  let L: QueryLake;
  let all: M[];
  let l2Conditions: Set<string>;

  beforeAll(async () => {
    L = await buildQueryLake();
    all = await readCatalogue(L);
    const raw = await L.rows(
      `SELECT DISTINCT unnest(condition_ids) AS c FROM read_parquet(${glob(L.lakeDir, 'raw')})
       WHERE list_contains(event_types, 'book') OR list_contains(event_types, 'price_change') OR list_contains(event_types, 'tick_size_change')`,
    );
    l2Conditions = new Set(raw.map((r) => String(r.c)));
  });
  afterAll(async () => {
    await L?.close();
  });

  it('filters, sorts and pages exactly as the SQL list and as an independent computation over the catalogue Parquet', async () => {
    const series = all.find((m) => m.series_id)!.series_id as string;
    const cat = all.find((m) => m.category)!.category as string;
    const word = String(all.find((m) => n(m.trade_count) > 0 && m.question)!.question)
      .split(' ')
      .find((w) => w.length > 4)!;
    const ends = all
      .filter((m) => m.end_us !== null)
      .map((m) => m.end_us as bigint)
      .sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
    const lo = ends[Math.floor(ends.length / 4)]!;
    const hi = ends[Math.floor((3 * ends.length) / 4)]!;
    const iso = (us: bigint): string => new Date(Number(us / 1000n)).toISOString();
    const hasData = (m: M) => n(m.trade_count) > 0 || n(m.orderbook_count) > 0;
    type Case = { qs: string; f: Omit<MarketListFilter, 'limit' | 'offset' | 'sortBy'>; pred: (m: M) => boolean };
    const cases: Case[] = [
      { qs: '', f: {}, pred: () => true },
      { qs: 'resolved=true', f: { resolved: true }, pred: (m) => m.resolved === true },
      {
        qs: 'active=true&closed=false&has_data=true',
        f: { active: true, closed: false, hasData: true },
        pred: (m) => m.active === true && m.closed === false && hasData(m),
      },
      { qs: 'has_data=true', f: { hasData: true }, pred: hasData },
      { qs: 'data_type=ohlcv', f: { dataType: 'ohlcv' }, pred: (m) => n(m.trade_count) > 0 },
      { qs: 'data_type=orderbook', f: { dataType: 'orderbook' }, pred: (m) => n(m.orderbook_count) > 0 },
      {
        qs: `category=${encodeURIComponent(cat.toUpperCase())}`,
        f: { category: cat.toUpperCase() },
        pred: (m) => typeof m.category === 'string' && m.category.toLowerCase() === cat.toLowerCase(),
      },
      {
        qs: `search=${encodeURIComponent(word.toUpperCase())}`,
        f: { search: word.toUpperCase() },
        pred: (m) => typeof m.question === 'string' && m.question.toLowerCase().includes(word.toLowerCase()),
      },
      { qs: 'search=%25_', f: { search: '%_' }, pred: (m) => typeof m.question === 'string' && m.question.includes('%_') },
      { qs: `series_id=${encodeURIComponent(series)}`, f: { series: { seriesId: series } }, pred: (m) => m.series_id === series },
      {
        qs: 'series_id=polymarket:l2-delta-tape',
        f: { series: { rawEventTypes: ['book', 'price_change', 'tick_size_change'] } },
        pred: (m) => typeof m.condition_id === 'string' && l2Conditions.has(m.condition_id),
      },
      { qs: 'series_id=polymarket:ohlcv-1h', f: { series: { all: true } }, pred: () => true },
      {
        qs: `ending_after=${iso(lo)}&ending_before=${iso(hi)}&has_data=false`,
        f: { endingAfter: lo, endingBefore: hi, hasData: false },
        pred: (m) => m.end_us !== null && m.end_us >= lo && m.end_us <= hi,
      },
    ];
    const lake = new LakeSession(L.db, L.lakeDir).sources;
    let nonEmpty = 0;
    for (const c of cases) {
      const matching = all.filter(c.pred);
      if (matching.length > 0) nonEmpty++;
      const defaultSort: Sort = c.f.series !== undefined ? 'end_date' : 'top';
      for (const sort of [undefined, ...SORTS]) {
        const want = ordered(matching, SORT_KEYS[sort ?? defaultSort]).map((m) => String(m.id));
        const pages: [number, number][] = [
          [1000, 0],
          [7, 7],
        ];
        if (sort === undefined) pages.push([5, Math.max(0, matching.length - 3)]);
        for (const [limit, offset] of pages) {
          const qs = [c.qs, sort ? `sort_by=${sort}` : '', `limit=${limit}`, `offset=${offset}`].filter(Boolean).join('&');
          const r = await L.get(`/v1/markets?${qs}`);
          expect(r.status, qs).toBe(200);
          expect(
            (r.body as M[]).map((m) => m.id),
            qs,
          ).toEqual(want.slice(offset, offset + limit));
          // The whole Market objects: what the lake query answered for the same request.
          const before = (await runQuery(L.db, listMarketsQuery(lake, { ...c.f, sortBy: sort, limit, offset }))).map(marketOut);
          expect(r.body, qs).toEqual(before);
        }
      }
    }
    // The cases are not vacuous: most select some markets (and the whole list is more than a page of 7).
    expect(nonEmpty).toBeGreaterThanOrEqual(cases.length - 2);
    expect(all.length).toBeGreaterThan(14);
  });

  it('search and category compare lower case as the lake query does, one character at a time', async () => {
    // A final capital sigma lowers to σ in DuckDB (ς in String.prototype.toLowerCase); İ lowers to i.
    for (const s of ['ΑΣ', 'ας', 'İ', 'ünïcødé ✓ 市場', "';DROP TABLE x;--", '\\', '%']) {
      const r = await L.get(`/v1/markets?search=${encodeURIComponent(s)}&limit=1000`);
      expect(r.status, s).toBe(200);
      const before = (await runQuery(L.db, listMarketsQuery(new LakeSession(L.db, L.lakeDir).sources, { search: s, limit: 1000, offset: 0 }))).map(marketOut);
      expect(r.body, s).toEqual(before);
      const c = await L.get(`/v1/markets?category=${encodeURIComponent(s)}&limit=1000`);
      expect(c.body, s).toEqual([]);
    }
  });
});

describe('GET /v1/markets pays for a lake scan only when it reads the version catalogue', () => {
  let L: QueryLake;
  let url: string;
  let admission: Admission;
  let key: string;
  const servers: Server[] = [];
  let enter: () => void = () => undefined;
  let release: () => void = () => undefined;
  let done: Promise<void> = Promise.resolve();
  const hold: Route = {
    method: 'get',
    path: '/test/hold-query',
    cost: 'query',
    auth: 'key',
    tag: 't',
    summary: 'holds the query class until the test releases it',
    handler: async () => {
      enter();
      await done;
      return { ok: true };
    },
  };

  beforeAll(async () => {
    L = await buildQueryLake({ markets: 4, days: 2 });
    // Its own app (one query slot, a short queue deadline) over the lake's core; nothing has listed markets yet.
    const config = testConfig({
      PMLAKE_LAKE: L.lakeDir,
      PMLAKE_STATE: path.dirname(L.lakeDir) + '/state',
      PMLAKE_QUERY_CONCURRENCY: '1',
      PMLAKE_QUEUE_TIMEOUT_MS: '150',
    });
    const app = createApp({ ...L.srv.ctx, config }, [...routes, hold]);
    const server = await new Promise<Server>((resolve) => {
      const s = app.listen(0, '127.0.0.1', () => resolve(s));
    });
    servers.push(server);
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    admission = app.locals.admission as Admission;
    key = await createTestKey(L.srv, { email: 'lister@example.com', name: 'lister' });
  });
  afterAll(async () => {
    release();
    for (const s of servers) {
      s.closeAllConnections();
      await new Promise((r) => s.close(r));
    }
    await L?.close();
  });

  const get = async (p: string) => {
    const r = await fetch(`${url}${p}`, { headers: { 'x-api-key': key } });
    return { status: r.status, body: (await r.json()) as any };
  };
  /** Takes the query class's only slot; resolves once the holder is inside its handler. */
  async function holdQuerySlot(): Promise<{ holding: Promise<{ status: number }> }> {
    const entered = new Promise<void>((r) => (enter = r));
    done = new Promise<void>((r) => (release = r));
    const holding = get('/test/hold-query');
    await entered;
    // Wrapped: an async function returning the promise itself would wait for the held response.
    return { holding };
  }
  const independent = async (): Promise<string[]> =>
    ordered(await readCatalogue(L), SORT_KEYS.top)
      .map((m) => String(m.id))
      .slice(0, 1000);

  it('the first list of a version waits for a query slot; later lists are answered while the class is full; a new version is read again', async () => {
    // Reading the catalogue is a lake scan: with the query class full it waits, then is shed like any query.
    let { holding } = await holdQuerySlot();
    const shed = await get('/v1/markets?limit=1000');
    expect(shed.status).toBe(503);
    release();
    expect((await holding).status).toBe(200);

    const first = await get('/v1/markets?limit=1000');
    expect(first.status).toBe(200);
    expect(first.body.map((m: M) => m.id)).toEqual(await independent());

    // Held in memory now: any filter, sort and page is answered with the query class full and nothing queued.
    ({ holding } = await holdQuerySlot());
    for (const qs of ['limit=1000', 'sort_by=volume&limit=3&offset=2', 'has_data=true&sort_by=created', 'search=a&resolved=false']) {
      const r = await get(`/v1/markets?${qs}`);
      expect(r.status, qs).toBe(200);
      expect(admission.queue('query')!.queued, qs).toBe(0);
    }
    // A raw tape series needs the condition ids its frames name: a scan of its own, read once too.
    expect((await get('/v1/markets?series_id=polymarket:trades-tape')).status).toBe(503);
    release();
    expect((await holding).status).toBe(200);
    const tape = await get('/v1/markets?series_id=polymarket:trades-tape&limit=1000');
    expect(tape.status).toBe(200);
    ({ holding } = await holdQuerySlot());
    expect(await get('/v1/markets?series_id=polymarket:trades-tape&limit=1000')).toEqual(tape);
    release();
    expect((await holding).status).toBe(200);

    // A new batch is published: the next list reads the new version's catalogue (a scan again, so a slot).
    const gen = path.join(path.dirname(L.lakeDir), 'gen2');
    await generate({ markets: 3, days: 1, seed: 99, start: '2025-10-02', out: gen, workers: 0, rate: 0.3 });
    await runIngest([gen], { lakeDir: L.lakeDir, threads: 2 });
    ({ holding } = await holdQuerySlot());
    expect((await get('/v1/markets?limit=1000')).status).toBe(503);
    release();
    expect((await holding).status).toBe(200);
    const second = await get('/v1/markets?limit=1000');
    expect(second.status).toBe(200);
    const want = await independent();
    expect(second.body.map((m: M) => m.id)).toEqual(want);
    expect(second.body).not.toEqual(first.body);
  });
});
