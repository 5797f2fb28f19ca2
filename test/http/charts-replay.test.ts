import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildQueryLake, glob, type QueryLake } from '../helpers/query-lake.js';

/**
 * Replay ticks over a real lake: every page walked by its cursor, compared with the token's trades read back
 * from the Parquet files and put in replay order here (time, block, log index, id).
 */
type T = { us: bigint; block: bigint; log: number; id: string; price: number; size: number; side: string };
type Tick = { time: number; timestamp: string; price: number; size: number; side: string; id: string };

describe('GET /v1/charts/replay/ticks', () => {
  let L: QueryLake;
  let token: string;
  let symbol: string;
  let trades: T[];

  beforeAll(async () => {
    L = await buildQueryLake();
    const busiest = await L.rows(`SELECT token_id, count(*) AS n FROM read_parquet(${glob(L.lakeDir, 'trades')}) GROUP BY 1 ORDER BY n DESC, token_id LIMIT 1`);
    token = String(busiest[0]!.token_id);
    const raw = await L.rows(
      `SELECT epoch_us(ts) AS us, coalesce(block_number, -1) AS block, log_index, id, price::VARCHAR AS price, size::VARCHAR AS size, side
       FROM read_parquet(${glob(L.lakeDir, 'trades')}) WHERE token_id = '${token}'`,
    );
    trades = raw
      .map((r) => ({
        us: BigInt(r.us as bigint),
        block: BigInt(r.block as bigint),
        log: Number(r.log_index),
        id: String(r.id),
        price: Number(r.price),
        size: Number(r.size),
        side: String(r.side),
      }))
      .sort((a, b) =>
        a.us !== b.us ? (a.us < b.us ? -1 : 1) : a.block !== b.block ? (a.block < b.block ? -1 : 1) : a.log !== b.log ? a.log - b.log : a.id < b.id ? -1 : 1,
      );
    const m = (await L.get(`/v1/markets/${token}`)).body;
    const outcome = (m.outcome_token_ids as string[]).indexOf(token);
    symbol = outcome === 0 ? String(m.id) : `${m.id}.${outcome}`;
  });
  afterAll(async () => {
    await L?.close();
  });

  const sec = (t: T): number => Number(t.us / 1_000_000n);
  const view = (t: T) => ({ time: sec(t), price: t.price, size: t.size, side: t.side, id: t.id });

  async function walk(from: number, to: number, limit: number): Promise<{ ticks: Tick[]; pages: Tick[][] }> {
    const pages: Tick[][] = [];
    let cursor: number | null = from;
    while (cursor !== null) {
      const r = await L.get(`/v1/charts/replay/ticks?symbol=${symbol}&from=${cursor}&to=${to}&limit=${limit}`);
      expect(r.status).toBe(200);
      expect(r.body).toMatchObject({ symbol, token_id: token, from: cursor, to, count: r.body.ticks.length });
      pages.push(r.body.ticks);
      if (r.body.next_from !== null) expect(r.body.next_from).toBeGreaterThan(cursor);
      cursor = r.body.next_from;
      expect(pages.length).toBeLessThan(10_000);
    }
    return { ticks: pages.flat(), pages };
  }

  it('the whole window in one page equals the trades in replay order (oldest first)', async () => {
    expect(trades.length).toBeGreaterThan(40);
    const from = sec(trades[0]!);
    const to = sec(trades[trades.length - 1]!);
    const r = await L.get(`/v1/charts/replay/ticks?symbol=${symbol}&from=${from}&to=${to}&limit=5000`);
    expect(r.status).toBe(200);
    expect(r.body.next_from).toBeNull();
    expect(r.body.ticks.map(({ timestamp: _t, ...rest }: Tick) => rest)).toEqual(trades.map(view));
    // The exact instant: the timestamp's microseconds are the trade's.
    const us = (iso: string): bigint => {
      const m = /^(.*?)(?:\.(\d+))?Z$/.exec(iso)!;
      return BigInt(Date.parse(`${m[1]}Z`)) * 1000n + BigInt((m[2] ?? '').padEnd(6, '0'));
    };
    expect(r.body.ticks.map((t: Tick) => us(t.timestamp))).toEqual(trades.map((t) => t.us));
  });

  for (const limit of [1, 3, 7, 50]) {
    it(`walking pages of ${limit} by next_from yields every trade once, no page split inside a second`, async () => {
      const from = sec(trades[0]!) + 60;
      const to = sec(trades[trades.length - 1]!) - 60;
      const want = trades.filter((t) => sec(t) >= from && sec(t) <= to);
      const { ticks, pages } = await walk(from, to, limit);
      // The lake has seconds holding several trades, so pages of 1 go through the whole-second case.
      const perSecond = new Map<number, number>();
      for (const t of want) perSecond.set(sec(t), (perSecond.get(sec(t)) ?? 0) + 1);
      expect(Math.max(...perSecond.values())).toBeGreaterThan(1);
      if (limit === 1) expect(pages.some((p) => p.length > 1)).toBe(true);
      expect(ticks.map(({ timestamp: _t, ...rest }) => rest)).toEqual(want.map(view));
      for (let i = 0; i + 1 < pages.length; i++) {
        const page = pages[i]!;
        const next = pages[i + 1]!;
        // A page over the limit is one whole second.
        if (page.length > limit) expect(new Set(page.map((t) => t.time)).size).toBe(1);
        if (page.length > 0 && next.length > 0) expect(next[0]!.time).toBeGreaterThan(page[page.length - 1]!.time);
      }
    });
  }

  it('bounds: from and to inclusive, an empty window, validation 422 naming the parameter', async () => {
    const t = sec(trades[10]!);
    const one = await L.get(`/v1/charts/replay/ticks?symbol=${symbol}&from=${t}&to=${t}`);
    expect(one.body.ticks.map((x: Tick) => x.id)).toEqual(trades.filter((x) => sec(x) === t).map((x) => x.id));
    const none = await L.get(`/v1/charts/replay/ticks?symbol=${symbol}&from=1000&to=2000`);
    expect(none.body).toMatchObject({ ticks: [], count: 0, next_from: null });
    for (const [qs, name] of [
      [`from=1&to=2`, 'symbol'],
      [`symbol=${symbol}&to=2`, 'from'],
      [`symbol=${symbol}&from=1`, 'to'],
      [`symbol=${symbol}&from=5&to=2`, 'from'],
      [`symbol=${symbol}&from=1&to=2&limit=5001`, 'limit'],
      [`symbol=${symbol}&from=1&to=2&limit=0`, 'limit'],
      [`symbol=0xabc&from=1&to=2`, 'symbol'],
    ] as const) {
      const r = await L.get(`/v1/charts/replay/ticks?${qs}`);
      expect(r.status, qs).toBe(422);
      expect(r.body.detail[0].loc, qs).toEqual(['query', name]);
    }
    expect((await L.get(`/v1/charts/replay/ticks?symbol=999999999&from=1&to=2`)).status).toBe(404);
    expect((await L.get(`/v1/charts/replay/ticks?symbol=${symbol}&from=1&to=2`, { key: null })).status).toBe(401);
  });
});
