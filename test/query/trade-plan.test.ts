import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generate } from '../../sim/generate/index.js';
import { runIngest } from '../../ingest/run.js';
import { runJsonArray } from '../../src/lake/runner.js';
import { LakeSession } from '../../src/lake/session.js';
import { tradeHours, tradePartitions } from '../../src/markets/trade-hours.js';
import { HOUR_US, planTradePage, type PagePlan } from '../../src/query/trade-plan.js';
import { tradesPageQuery, type TradeFilter } from '../../src/query/trades.js';
import type { RunningServer } from '../../src/server.js';
import { createTestKey, startTestServer, tempDir, testConfig } from '../helpers/server.js';
import { files } from '../helpers/lake-files.js';

/**
 * The fast path for newest-first trade pages of a market (issue 11 item 3): a page is read from the month
 * partitions it lands in, each token from the newest hours that hold it. On a real lake whose trades straddle
 * two month partitions, every page — offsets before, across and after the partition boundary, side filters,
 * windows cutting through hours, one token or both, deep (two-step) pages — equals a TypeScript ordering of the
 * same trades and the plain plan's answer byte for byte, and the plan provably reads less than the market.
 */
type Tr = { id: string; token: string; us: bigint; block: bigint; log: number; side: string };

describe('trade pages from the partitions they land in', () => {
  const tmp = tempDir('pmlake-tplan-');
  const lakeDir = path.join(tmp.dir, 'lake');
  let srv: RunningServer;
  let key: string;
  let trades: Tr[];
  let market: { id: string; tokens: string[] };

  /** Newest first: block time, then block (NULL last), then log index, then id, all descending. */
  const newest = (a: Tr, b: Tr): number =>
    a.us !== b.us ? (a.us > b.us ? -1 : 1) : a.block !== b.block ? (a.block > b.block ? -1 : 1) : a.log !== b.log ? b.log - a.log : a.id > b.id ? -1 : 1;
  const monthOf = (us: bigint): string => new Date(Number(us / 1000n)).toISOString().slice(0, 7);

  beforeAll(async () => {
    const gen = path.join(tmp.dir, 'gen');
    // Four days across the end of August: two month partitions.
    await generate({ markets: 5, days: 4, seed: 17, start: '2025-08-30', out: gen, workers: 0, rate: 0.5 });
    await runIngest([gen], { lakeDir, threads: 2 });
    srv = await startTestServer(testConfig({ PMLAKE_LAKE: lakeDir, PMLAKE_STATE: path.join(tmp.dir, 'state'), PMLAKE_RATE_LIMITS: 'off' }));
    key = await createTestKey(srv);
    const conn = await srv.ctx.db.connect();
    const rows = (
      await conn.runAndReadAll(
        `SELECT id, token_id, epoch_us(ts) AS us, coalesce(block_number, -1) AS block, log_index, side
         FROM read_parquet('${path.join(lakeDir, 'trades', '*', '*.parquet')}')`,
      )
    ).getRowObjectsJS();
    const m = (
      await conn.runAndReadAll(`SELECT id, outcome_token_ids FROM read_parquet(${files(lakeDir, 'catalog/markets')}) ORDER BY trade_count DESC, id LIMIT 1`)
    ).getRowObjectsJS();
    conn.closeSync();
    trades = rows.map((r) => ({
      id: String(r.id),
      token: String(r.token_id),
      us: BigInt(r.us as bigint),
      block: BigInt(r.block as bigint),
      log: Number(r.log_index),
      side: String(r.side),
    }));
    market = { id: String(m[0]!.id), tokens: (m[0]!.outcome_token_ids as string[]).map(String) };
  });
  afterAll(async () => {
    await srv?.close();
    tmp.cleanup();
  });

  async function planFor(f: TradeFilter & { tokens: readonly string[] }, page: { limit: number; offset: number }): Promise<PagePlan> {
    const lake = new LakeSession(srv.ctx.db, lakeDir);
    return planTradePage(tradeHours(lake, tradePartitions(lake), f.tokens, f.side), f, page);
  }

  it('equals the TypeScript ordering and the plain plan on every page, across the partition boundary', async () => {
    const mine = trades.filter((t) => market.tokens.includes(t.token)).sort(newest);
    const months = [...new Set(mine.map((t) => monthOf(t.us)))];
    expect(months.length).toBe(2);
    const inNewest = mine.filter((t) => monthOf(t.us) === months.sort()[1]).length;
    expect(inNewest).toBeGreaterThan(50);
    expect(mine.length - inNewest).toBeGreaterThan(50);
    // A window cutting through hours (not aligned) on both sides, spanning the boundary.
    const wStart = mine[mine.length - 40]!.us + 1_234n;
    const wEnd = mine[30]!.us - 777n;
    const one = market.tokens[0]!;
    const cases: { f: TradeFilter & { tokens: readonly string[] }; want: Tr[] }[] = [
      { f: { tokens: market.tokens }, want: mine },
      { f: { tokens: market.tokens, side: 'buy' }, want: mine.filter((t) => t.side === 'buy') },
      { f: { tokens: [one] }, want: mine.filter((t) => t.token === one) },
      { f: { tokens: market.tokens, start: wStart, end: wEnd }, want: mine.filter((t) => t.us >= wStart && t.us < wEnd) },
      { f: { tokens: market.tokens, side: 'sell', end: wEnd }, want: mine.filter((t) => t.side === 'sell' && t.us < wEnd) },
      { f: { tokens: market.tokens, start: wStart }, want: mine.filter((t) => t.us >= wStart) },
    ];
    const lake = new LakeSession(srv.ctx.db, lakeDir).sources;
    let compared = 0;
    for (const { f, want } of cases) {
      const n = want.filter((t) => monthOf(t.us) === months[1]).length;
      const pages: [number, number][] = [
        [0, 1],
        [0, 100],
        [3, 17],
        [n - 5, 10],
        [n - 1, 2],
        [n, 7],
        [n + 3, 20],
        [want.length - 4, 10],
        [want.length, 5],
        [want.length + 9, 3],
      ];
      for (const [offset, limit] of pages.filter(([o]) => o >= 0)) {
        const page = { limit, offset };
        const plan = await planFor(f, page);
        const expected = want.slice(offset, offset + limit).map((t) => t.id);
        for (const deepFrom of [Number.MAX_SAFE_INTEGER, 0]) {
          const fast = await runJsonArray(srv.ctx.db, tradesPageQuery(lake, { ...f, plan }, page, deepFrom), { timestamps: ['timestamp'] });
          const plain = await runJsonArray(srv.ctx.db, tradesPageQuery(lake, f, page, deepFrom), { timestamps: ['timestamp'] });
          expect(
            (JSON.parse(fast.json) as { id: string }[]).map((t) => t.id),
            JSON.stringify({ f: { ...f, start: String(f.start), end: String(f.end) }, page }),
          ).toEqual(expected);
          expect(fast.json).toBe(plain.json);
          compared += fast.rows;
        }
      }
    }
    expect(compared).toBeGreaterThan(1000);
  });

  it('reads only the partitions and hours a page needs, with the offset adjusted', async () => {
    const mine = trades.filter((t) => market.tokens.includes(t.token)).sort(newest);
    const [older, newer] = [...new Set(mine.map((t) => monthOf(t.us)))].sort();
    const inNewest = mine.filter((t) => monthOf(t.us) === newer).length;

    // A first page: the newest partition only, each token from an hour boundary, not the whole month.
    const first = await planFor({ tokens: market.tokens }, { limit: 10, offset: 0 });
    expect(first.offset).toBe(0);
    expect(new Set(first.scans.map((s) => s.month))).toEqual(new Set([newer]));
    const newestTs = mine[0]!.us;
    for (const s of first.scans) {
      expect(s.floor).not.toBeNull();
      expect(s.floor! % HOUR_US).toBe(0n);
      expect(s.floor! > BigInt(Date.parse(`${newer}-01T00:00:00Z`)) * 1000n).toBe(true);
      expect(s.floor! <= newestTs).toBe(true);
    }

    // A page wholly in the older partition: the newer one is skipped and the offset counted down by its rows.
    const deep = await planFor({ tokens: market.tokens }, { limit: 5, offset: inNewest + 2 });
    expect(deep.offset).toBe(2);
    expect(new Set(deep.scans.map((s) => s.month))).toEqual(new Set([older]));

    // Straddling the boundary: both partitions, the newer one read whole-token, the offset unchanged.
    const across = await planFor({ tokens: market.tokens }, { limit: 10, offset: inNewest - 3 });
    expect(across.offset).toBe(inNewest - 3);
    expect(new Set(across.scans.map((s) => s.month))).toEqual(new Set([older, newer]));

    // Beyond the end: nothing to read at all.
    expect((await planFor({ tokens: market.tokens }, { limit: 5, offset: mine.length })).scans).toEqual([]);
  });

  it('serves the same pages over HTTP, and a page asked again is the same answer', async () => {
    const mine = trades.filter((t) => market.tokens.includes(t.token)).sort(newest);
    const inNewest = mine.filter((t) => monthOf(t.us) === monthOf(mine[0]!.us)).length;
    for (const [offset, limit] of [
      [0, 100],
      [inNewest - 4, 9],
      [inNewest + 1, 13],
    ] as const) {
      const url = `${srv.url}/v1/trades?market_id=${market.id}&limit=${limit}&offset=${offset}`;
      const r = await fetch(url, { headers: { 'x-api-key': key } });
      expect(r.status).toBe(200);
      const body = await r.text();
      expect((JSON.parse(body) as { id: string }[]).map((t) => t.id)).toEqual(mine.slice(offset, offset + limit).map((t) => t.id));
      expect(await (await fetch(url, { headers: { 'x-api-key': key } })).text()).toBe(body);
    }
  });
});
