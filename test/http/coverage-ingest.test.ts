import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DuckDBInstance, type DuckDBConnection } from '@duckdb/node-api';
import { runIngest } from '../../ingest/run.js';
import { createTestKey, startTestServer, tempDir, testConfig } from '../helpers/server.js';
import { glob } from '../helpers/query-lake.js';
import type { RunningServer } from '../../src/server.js';

/**
 * The tape's coverage end to end: a small hand-built websocket tape (one market, two tokens, two UTC days, one
 * `price_change` the capture lost) through the real ingest, then the API. The `verified` flag of a book is computed
 * here by replaying the same messages in plain TypeScript (a `book` after the token's first one is a checkpoint: it
 * passes when it equals the book replayed just before it, and proves the stretch since the previous one); the
 * coverage endpoint must answer exactly the coverage and incidents rows read back from the lake's Parquet.
 */

const MARKET = `0x${'c0ffee'.repeat(10)}abcd`;
const A = '1'.repeat(40) + '2'.repeat(37);
const B = '3'.repeat(40) + '4'.repeat(37);
const T0 = Date.parse('2025-10-06T00:10:00Z');
const H = 3_600_000;

type Lvl = [string, string];
type Msg = { at: number; json: Record<string, unknown> };
const book = (at: number, asset: string, bids: Lvl[], asks: Lvl[]): Msg => ({
  at,
  json: {
    event_type: 'book',
    market: MARKET,
    asset_id: asset,
    timestamp: String(at),
    hash: `b${at}${asset.slice(0, 4)}`,
    bids: bids.map(([price, size]) => ({ price, size })),
    asks: asks.map(([price, size]) => ({ price, size })),
  },
});
/** A new-shape price_change of one token, with the touch after it as the venue sends it. */
const change = (at: number, asset: string, side: 'BUY' | 'SELL', price: string, size: string, bestBid: string, bestAsk: string): Msg => ({
  at,
  json: {
    event_type: 'price_change',
    market: MARKET,
    timestamp: String(at),
    price_changes: [{ asset_id: asset, price, size, side, hash: `c${at}`, best_bid: bestBid, best_ask: bestAsk }],
  },
});

// A: passes at +2h, fails at +5h (the venue's 0.53 ask went to 70 in a message the capture lost), passes next day.
const TAPE: Msg[] = [
  book(
    T0,
    A,
    [
      ['0.50', '100'],
      ['0.49', '200'],
    ],
    [
      ['0.52', '100'],
      ['0.53', '50'],
    ],
  ),
  book(T0 + 60_000, B, [['0.47', '100']], [['0.50', '100']]),
  change(T0 + 1 * H, A, 'BUY', '0.51', '30', '0.51', '0.52'),
  book(
    T0 + 2 * H,
    A,
    [
      ['0.51', '30'],
      ['0.50', '100'],
      ['0.49', '200'],
    ],
    [
      ['0.52', '100'],
      ['0.53', '50'],
    ],
  ),
  change(T0 + 3 * H, A, 'SELL', '0.52', '40', '0.51', '0.52'),
  change(T0 + 3 * H + 5000, B, 'SELL', '0.50', '60', '0.47', '0.50'),
  book(
    T0 + 5 * H,
    A,
    [
      ['0.51', '30'],
      ['0.50', '100'],
      ['0.49', '200'],
    ],
    [
      ['0.52', '40'],
      ['0.53', '70'],
    ],
  ),
  change(T0 + 25 * H, A, 'BUY', '0.50', '120', '0.51', '0.52'),
  book(
    T0 + 26 * H,
    A,
    [
      ['0.51', '30'],
      ['0.50', '120'],
      ['0.49', '200'],
    ],
    [
      ['0.52', '40'],
      ['0.53', '70'],
    ],
  ),
  book(T0 + 26 * H + 60_000, B, [['0.47', '100']], [['0.50', '60']]),
  change(T0 + 27 * H, A, 'SELL', '0.53', '0', '0.51', '0.52'),
];

/** Book checkpoints per token from an independent replay of TAPE: [receive ms, passed, since ms]. */
function checkpoints(): Map<string, { ts: number; ok: boolean; since: number }[]> {
  const books = new Map<string, { bids: Map<string, string>; asks: Map<string, string> }>();
  const last = new Map<string, number>();
  const out = new Map<string, { ts: number; ok: boolean; since: number }[]>();
  const key = (p: string) => Number(p).toFixed(6);
  for (const { at, json } of TAPE) {
    if (json.event_type === 'book') {
      const asset = json.asset_id as string;
      const levels = (l: { price: string; size: string }[]) =>
        new Map(l.filter((x) => Number(x.size) > 0).map((x) => [key(x.price), Number(x.size).toFixed(6)]));
      const venue = { bids: levels(json.bids as never), asks: levels(json.asks as never) };
      const mine = books.get(asset);
      if (mine) {
        const same = (a: Map<string, string>, b: Map<string, string>) => a.size === b.size && [...a].every(([p, s]) => b.get(p) === s);
        const list = out.get(asset) ?? [];
        list.push({ ts: at, ok: same(mine.bids, venue.bids) && same(mine.asks, venue.asks), since: last.get(asset)! });
        out.set(asset, list);
      }
      books.set(asset, venue);
      last.set(asset, at);
    } else {
      for (const e of json.price_changes as { asset_id: string; price: string; size: string; side: string }[]) {
        const b = books.get(e.asset_id);
        if (!b) continue;
        const side = e.side === 'BUY' ? b.bids : b.asks;
        if (Number(e.size) === 0) side.delete(key(e.price));
        else side.set(key(e.price), Number(e.size).toFixed(6));
      }
    }
  }
  return out;
}

describe('tape coverage over a hand-built tape through the real ingest', () => {
  const tmp = tempDir('pmlake-coverage-ingest-');
  const lakeDir = path.join(tmp.dir, 'lake');
  let srv: RunningServer;
  let keys: string[] = [];
  let n = 0;
  let db: DuckDBInstance;
  let conn: DuckDBConnection;
  const get = async (p: string) => {
    const res = await fetch(`${srv.url}${p}`, { headers: { 'x-api-key': keys[n++ % keys.length]! } });
    return { status: res.status, body: (await res.json()) as any };
  };
  const rows = async (sql: string) => (await conn.runAndReadAll(sql)).getRowObjectsJS() as Record<string, unknown>[];

  beforeAll(async () => {
    const file = path.join(tmp.dir, 'tape', '2025-10-06_frames.jsonl');
    fs.mkdirSync(path.dirname(file), { recursive: true });
    fs.writeFileSync(file, TAPE.map((m) => JSON.stringify(m.json)).join('\n') + '\n');
    await runIngest([file], { lakeDir, threads: 1 });
    srv = await startTestServer(testConfig({ PMLAKE_LAKE: lakeDir, PMLAKE_STATE: path.join(tmp.dir, 'state') }));
    keys = [];
    for (let i = 0; i < 6; i += 1) keys.push(await createTestKey(srv, { name: `k${i}` }));
    db = await DuckDBInstance.create(':memory:', { threads: '1' });
    conn = await db.connect();
    await conn.run(`SET TimeZone = 'UTC'`);
  }, 120_000);

  afterAll(async () => {
    conn?.closeSync();
    db?.closeSync();
    await srv?.close();
    tmp.cleanup();
  });

  it('finds the failed checkpoint the lost message caused and no other', async () => {
    const want = checkpoints();
    expect(want.get(A)!.map((c) => c.ok)).toEqual([true, false, true]);
    expect(want.get(B)!.map((c) => c.ok)).toEqual([true]);
    const stored = await rows(
      `SELECT asset_id, epoch_ms(ts) AS ts, ok, epoch_ms(since_ts) AS since FROM read_parquet(${glob(lakeDir, 'checkpoints')}) WHERE kind = 'book' ORDER BY asset_id, ts`,
    );
    for (const t of [A, B]) {
      expect(stored.filter((r) => r.asset_id === t).map((r) => ({ ts: Number(r.ts), ok: r.ok, since: Number(r.since) }))).toEqual(want.get(t));
    }
  });

  it('GET /v1/orderbook/snapshot: verified exactly inside the stretches a passing book closed', async () => {
    const want = checkpoints();
    const seen = new Set<boolean>();
    for (const t of [A, B]) {
      const cps = want.get(t)!;
      const first = TAPE.find((m) => m.json.asset_id === t)!.at;
      const last = TAPE[TAPE.length - 1]!.at + H;
      for (let at = first + 1; at < last; at += 45 * 60_000 + 17) {
        const closing = cps.find((c) => c.ts >= at);
        const verified = closing !== undefined && closing.ok && closing.since < at;
        const r = await get(`/v1/orderbook/snapshot?market_id=${t}&at=${new Date(at).toISOString()}&depth=5`);
        expect(r.status).toBe(200);
        expect(r.body.verified, `${t.slice(0, 3)} at ${new Date(at).toISOString()}`).toBe(verified);
        seen.add(verified);
      }
    }
    expect([...seen].sort()).toEqual([false, true]);
  });

  it('GET /v1/markets/{id}/coverage answers the lake rows: A degraded on the day of the gap, the gap with its levels', async () => {
    const m = await get(`/v1/markets/${A}`);
    expect(m.status).toBe(200);
    const r = await get(`/v1/markets/${m.body.id}/coverage?start=2025-10-06&end=2025-10-07`);
    expect(r.status).toBe(200);
    const cov = await rows(
      `SELECT strftime(date, '%Y-%m-%d') AS date, asset_id, status, seconds_verified, seconds_degraded, seconds_unverified, checkpoints_passed, checkpoints_failed, messages
       FROM read_parquet(${glob(lakeDir, 'coverage')}) ORDER BY date, asset_id`,
    );
    expect(cov.length).toBeGreaterThanOrEqual(4);
    const cols = ['status', 'seconds_verified', 'seconds_degraded', 'seconds_unverified', 'checkpoints_passed', 'checkpoints_failed', 'messages'];
    const pick = (o: Record<string, unknown>) => Object.fromEntries(cols.map((c) => [c, typeof o[c] === 'bigint' ? Number(o[c]) : o[c]]));
    expect(r.body.days.map((d: any) => ({ date: d.date, asset_id: d.token_id, ...pick(d) }))).toEqual(
      cov.map((c) => ({ date: c.date, asset_id: c.asset_id, ...pick(c) })),
    );
    expect(r.body.days.find((d: any) => d.token_id === A && d.date === '2025-10-06')).toMatchObject({
      status: 'degraded',
      checkpoints_failed: 1,
      checkpoints_passed: 1,
    });
    const inc = await rows(
      `SELECT asset_id, kind, epoch_ms(from_ts) AS f, epoch_ms(to_ts) AS t, detail FROM read_parquet(${glob(lakeDir, 'incidents')}) ORDER BY from_ts, asset_id, seq`,
    );
    expect(r.body.incidents.map((i: any) => [i.token_id, i.kind, Date.parse(i.from), Date.parse(i.to), i.detail])).toEqual(
      inc.map((i) => [i.asset_id, i.kind, Number(i.f), Number(i.t), JSON.parse(String(i.detail))]),
    );
    const gap = r.body.incidents.find((i: any) => i.kind === 'gap');
    expect(gap.token_id).toBe(A);
    expect(Date.parse(gap.to)).toBe(T0 + 5 * H);
    expect(JSON.stringify(gap.detail)).toContain('0.53');
    // The venue-wide day lists the market as its worst token.
    const v = await get('/v1/coverage?date=2025-10-06');
    expect(v.body.markets).toEqual([expect.objectContaining({ market_id: m.body.id, status: 'degraded', tokens: 2, checkpoints_failed: 1 })]);
  });
});
