import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildQueryLake, catalog, glob, type QueryLake } from '../helpers/query-lake.js';
import { runJsonArray } from '../../src/lake/runner.js';
import { LakeSession } from '../../src/lake/session.js';
import { tradesPageQuery } from '../../src/query/trades.js';

type Tr = { id: string; token: string; us: bigint; block: bigint; log: number; side: string; outcome: number };

describe('GET /v1/trades and /v1/trades/recent', () => {
  let L: QueryLake;
  let trades: Tr[];
  let market: { id: string; tokens: string[]; outcomes: string[] };

  /** Newest first: block time, then block, then log index, then id, all descending. */
  const newest = (a: Tr, b: Tr): number =>
    a.us !== b.us ? (a.us > b.us ? -1 : 1) : a.block !== b.block ? (a.block > b.block ? -1 : 1) : a.log !== b.log ? b.log - a.log : a.id > b.id ? -1 : 1;
  const iso = (us: bigint): string => new Date(Number(us / 1000n)).toISOString();

  beforeAll(async () => {
    L = await buildQueryLake();
    const raw = await L.rows(
      `SELECT id, token_id, epoch_us(ts) AS us, coalesce(block_number, -1) AS block, log_index, side, outcome_index FROM read_parquet(${glob(L.lakeDir, 'trades')})`,
    );
    trades = raw.map((r) => ({
      id: String(r.id),
      token: String(r.token_id),
      us: BigInt(r.us as bigint),
      block: BigInt(r.block as bigint),
      log: Number(r.log_index),
      side: String(r.side),
      outcome: Number(r.outcome_index),
    }));
    const m = await L.rows(`SELECT id, outcome_token_ids, outcomes FROM read_parquet(${catalog(L.lakeDir, 'markets')}) ORDER BY trade_count DESC, id LIMIT 1`);
    market = { id: String(m[0]!.id), tokens: m[0]!.outcome_token_ids as string[], outcomes: m[0]!.outcomes as string[] };
  });
  afterAll(async () => {
    await L?.close();
  });

  it('lists a market (numeric id) newest first across its outcomes, token id in market_id', async () => {
    const want = trades.filter((t) => market.tokens.includes(t.token)).sort(newest);
    expect(want.length).toBeGreaterThan(20);
    const r = await L.get(`/v1/trades?market_id=${market.id}&limit=10000`);
    expect(r.status).toBe(200);
    expect(r.body.map((t: { id: string }) => t.id)).toEqual(want.map((t) => t.id));
    const row = r.body[0];
    for (const k of [
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
    ]) {
      expect(row).toHaveProperty(k);
    }
    expect(market.tokens).toContain(row.market_id);
    expect(row.outcome_label).toBe(market.outcomes[market.tokens.indexOf(row.market_id)]);
    expect(row.timestamp).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$/);
    expect(typeof row.price).toBe('number');
    expect(typeof row.block_number).toBe('number');
  });

  it('narrows by token id, outcome and side (BUY accepted as buy)', async () => {
    const tok = market.tokens[1]!;
    const byTok = await L.get(`/v1/trades?market_id=${tok}&limit=10000`);
    expect(byTok.body.map((t: { id: string }) => t.id)).toEqual(
      trades
        .filter((t) => t.token === tok)
        .sort(newest)
        .map((t) => t.id),
    );
    const byOutcome = await L.get(`/v1/trades?market_id=${market.id}&outcome=1&limit=10000`);
    expect(byOutcome.body).toEqual(byTok.body);
    const sells = await L.get(`/v1/trades?market_id=${market.id}&side=SELL&limit=10000`);
    expect(sells.body.map((t: { id: string }) => t.id)).toEqual(
      trades
        .filter((t) => market.tokens.includes(t.token) && t.side === 'sell')
        .sort(newest)
        .map((t) => t.id),
    );
    const anyMarketOutcome = await L.get(`/v1/trades?outcome=0&limit=10000`);
    expect(anyMarketOutcome.body.map((t: { id: string }) => t.id)).toEqual(
      trades
        .filter((t) => t.outcome === 0)
        .sort(newest)
        .slice(0, 10000)
        .map((t) => t.id),
    );
  });

  it('windows: start inclusive, end exclusive, any length (no 24h cap); paging by offset', async () => {
    const mine = trades.filter((t) => market.tokens.includes(t.token)).sort(newest);
    const s = mine[mine.length - 3]!.us;
    const e = mine[2]!.us;
    const r = await L.get(`/v1/trades?market_id=${market.id}&start=${iso(s)}&end=${iso(e)}&limit=10000`);
    const sMs = (s / 1000n) * 1000n;
    const eMs = (e / 1000n) * 1000n;
    expect(r.body.map((t: { id: string }) => t.id)).toEqual(mine.filter((t) => t.us >= sMs && t.us < eMs).map((t) => t.id));
    const all = await L.get(`/v1/trades?limit=10000&start=2000-01-01&end=2100-01-01`);
    expect(all.body.length).toBe(Math.min(10000, trades.length));
    const p = await L.get(`/v1/trades?market_id=${market.id}&limit=5&offset=7`);
    expect(p.body.map((t: { id: string }) => t.id)).toEqual(mine.slice(7, 12).map((t) => t.id));
    const offsetNaive = await L.get(`/v1/trades?market_id=${market.id}&start=${iso(s).replace('Z', '')}&end=${iso(e).replace('Z', '+00:00')}&limit=10000`);
    expect(offsetNaive.body).toEqual(r.body);
    const encoded = await L.get(`/v1/trades?market_id=${market.id}&start=${encodeURIComponent(iso(s).replace('Z', '+00:00'))}&end=${iso(e)}&limit=10000`);
    expect(encoded.body).toEqual(r.body);
  });

  it('pages by offset concatenate to the whole ordered list', async () => {
    const mine = trades.filter((t) => market.tokens.includes(t.token)).sort(newest);
    const got: string[] = [];
    for (let off = 0; off < mine.length + 13; off += 13) {
      const r = await L.get(`/v1/trades?market_id=${market.id}&limit=13&offset=${off}`);
      expect(r.status).toBe(200);
      expect(r.body.length).toBe(Math.max(0, Math.min(13, mine.length - off)));
      got.push(...r.body.map((t: { id: string }) => t.id));
    }
    expect(got).toEqual(mine.map((t) => t.id));
    const sells = mine.filter((t) => t.side === 'sell');
    const p = await L.get(`/v1/trades?market_id=${market.id}&side=sell&limit=4&offset=3`);
    expect(p.body.map((t: { id: string }) => t.id)).toEqual(sells.slice(3, 7).map((t) => t.id));
    const all = [...trades].sort(newest);
    const q = await L.get(`/v1/trades?limit=9&offset=11`);
    expect(q.body.map((t: { id: string }) => t.id)).toEqual(all.slice(11, 20).map((t) => t.id));
    const fullRow = (await L.get(`/v1/trades?market_id=${market.id}&limit=1&offset=0`)).body[0];
    const viaDeep = (await L.get(`/v1/trades?market_id=${market.id}&limit=2&offset=0`)).body[0];
    expect(viaDeep).toEqual(fullRow);
    expect((await L.get(`/v1/trades?market_id=${market.id}&limit=1&offset=1`)).body[0]).toEqual(
      (await L.get(`/v1/trades?market_id=${market.id}&limit=2`)).body[1],
    );
  });

  it('validates every parameter (422 naming it), 401, 404, condition ids and hostile ids', async () => {
    for (const [qs, name] of [
      ['limit=0', 'limit'],
      ['limit=10001', 'limit'],
      ['offset=1000001', 'offset'],
      ['offset=-3', 'offset'],
      ['side=hold', 'side'],
      // Without market_id any outcome index filters (a market may list more than two); past the bound it is refused.
      ['outcome=1001', 'outcome'],
      ['outcome=x', 'outcome'],
      ['start=2025-09-16T25:00:00Z', 'start'],
      ['end=20250916', 'end'],
      ['start=2025-09-16&end=2025-09-15', 'start'],
      [`market_id=0x${'12'.repeat(32)}`, 'market_id'],
    ] as const) {
      const r = await L.get(`/v1/trades?${qs}`);
      expect(r.status, qs).toBe(422);
      expect(r.body.detail[0].loc, qs).toEqual(['query', name]);
    }
    for (const bad of ["';DROP TABLE x;--", '%', '_', 'ünï ✓', '1'.repeat(78), 'q'.repeat(200)]) {
      const r = await L.get(`/v1/trades?market_id=${encodeURIComponent(bad)}`);
      expect(r.status, bad).toBe(404);
      expect(r.body).toEqual({ detail: 'Market not found' });
    }
    expect((await L.get(`/v1/trades?market_id=${'q'.repeat(10_000)}`)).status).toBe(422);
    expect((await L.get('/v1/trades', { key: null })).status).toBe(401);
    expect((await L.get('/v1/trades', { key: 'pm_' + 'f'.repeat(32) })).body).toEqual({ detail: 'Invalid API key' });
  });

  it('recent: newest across all markets, default 50, max 100', async () => {
    const want = [...trades].sort(newest);
    const r = await L.get('/v1/trades/recent');
    expect(r.status).toBe(200);
    expect(r.body.map((t: { id: string }) => t.id)).toEqual(want.slice(0, 50).map((t) => t.id));
    const r100 = await L.get('/v1/trades/recent?limit=100');
    expect(r100.body.map((t: { id: string }) => t.id)).toEqual(want.slice(0, 100).map((t) => t.id));
    for (const l of ['0', '101', 'many']) {
      const bad = await L.get(`/v1/trades/recent?limit=${l}`);
      expect(bad.status).toBe(422);
      expect(bad.body.detail[0].loc).toEqual(['query', 'limit']);
    }
    expect((await L.get('/v1/trades/recent', { key: null })).status).toBe(401);
  });

  it('deep pages (keys first, then rows) equal the plain query and the TypeScript ordering, filters included', async () => {
    // The two-step plan starts at offset 10,000 in the service; this lake is smaller, so both plans are run
    // directly with the threshold at 0 (always two-step) and above any offset (always plain).
    const lake = new LakeSession(L.srv.ctx.db, L.lakeDir).sources;
    const mine = trades.filter((t) => market.tokens.includes(t.token)).sort(newest);
    const sells = mine.filter((t) => t.side === 'sell');
    const all = [...trades].sort(newest);
    const cases = [
      { f: { tokens: market.tokens }, want: mine },
      { f: { tokens: market.tokens, side: 'sell' as const }, want: sells },
      { f: {}, want: all },
      { f: { tokens: market.tokens.slice(1) }, want: mine.filter((t) => t.token === market.tokens[1]) },
      // A window (start inclusive, end exclusive) bound in both scans.
      {
        f: { tokens: market.tokens, start: mine[mine.length - 5]!.us, end: mine[4]!.us },
        want: mine.filter((t) => t.us >= mine[mine.length - 5]!.us && t.us < mine[4]!.us),
      },
    ];
    let compared = 0;
    for (const { f, want } of cases) {
      for (const [offset, limit] of [
        [1, 5],
        [7, 20],
        [Math.floor(want.length / 2), 9],
        [Math.max(0, want.length - 3), 10],
        [want.length + 5, 10],
      ] as const) {
        const two = await runJsonArray(L.srv.ctx.db, tradesPageQuery(lake, f, { limit, offset }, 0), { timestamps: ['timestamp'] });
        const plain = await runJsonArray(L.srv.ctx.db, tradesPageQuery(lake, f, { limit, offset }, Number.MAX_SAFE_INTEGER), { timestamps: ['timestamp'] });
        expect(two.json).toBe(plain.json);
        expect((JSON.parse(two.json) as { id: string }[]).map((t) => t.id)).toEqual(want.slice(offset, offset + limit).map((t) => t.id));
        compared += two.rows;
      }
    }
    expect(compared).toBeGreaterThan(50);
  });
});
