import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildQueryLake, glob, type QueryLake } from '../helpers/query-lake.js';
import { runQuery } from '../../src/lake/runner.js';
import { LakeSession } from '../../src/lake/session.js';
import { bookOnDayQuery } from '../../src/query/orderbook.js';
import { later } from '../../src/markets/book-at.js';

/**
 * The book at arbitrary instants against an independent replay of the whole l2 tape in plain TypeScript:
 * every row received at or before the instant, in arrival (seq) order; a `book` message replaces both
 * sides; a level's size is the new total and 0 removes it. The service starts from a stored snapshot
 * instead, so agreement checks both the snapshots and its replay.
 */
type L2 = { us: bigint; seq: bigint; idx: number; side: string | null; price: bigint; size: bigint; snap: boolean };
type Level = { price: number; size: number };

function replay(rows: L2[], at: bigint): { bids: Level[]; asks: Level[]; n: number } {
  const bids = new Map<bigint, bigint>();
  const asks = new Map<bigint, bigint>();
  let lastSeq = -1n;
  let n = 0;
  for (const r of rows) {
    if (r.us > at) continue;
    n += 1;
    if (r.snap && r.seq !== lastSeq) {
      bids.clear();
      asks.clear();
    }
    lastSeq = r.seq;
    if (r.side === null) continue;
    const book = r.side === 'bid' ? bids : asks;
    if (r.size === 0n) book.delete(r.price);
    else book.set(r.price, r.size);
  }
  const out = (m: Map<bigint, bigint>, desc: boolean): Level[] =>
    [...m.entries()].sort((a, b) => (a[0] === b[0] ? 0 : a[0] < b[0] !== desc ? -1 : 1)).map(([p, s]) => ({ price: Number(p) / 1e6, size: Number(s) / 1e6 }));
  return { bids: out(bids, true), asks: out(asks, false), n };
}

describe('GET /v1/orderbook/snapshot and /top_of_book', () => {
  let L: QueryLake;
  const tapes = new Map<string, L2[]>();
  let tokens: string[] = [];

  async function loadTape(token: string): Promise<L2[]> {
    const raw = await L.rows(
      `SELECT epoch_us(recv_ts) AS us, seq, level_idx, side, (price * 1000000)::BIGINT AS price, (size * 1000000)::BIGINT AS size, is_snapshot
       FROM read_parquet(${glob(L.lakeDir, 'l2')}) WHERE asset_id = '${token}' ORDER BY seq, level_idx`,
    );
    return raw.map((r) => ({
      us: BigInt(r.us as bigint),
      seq: BigInt(r.seq as bigint),
      idx: Number(r.level_idx),
      side: (r.side as string | null) ?? null,
      price: r.price === null ? 0n : BigInt(r.price as bigint),
      size: r.size === null ? 0n : BigInt(r.size as bigint),
      snap: Boolean(r.is_snapshot),
    }));
  }

  beforeAll(async () => {
    L = await buildQueryLake();
    // The busiest tokens of the tape: the database-export fixture (5 days, one token) and generated ones.
    const top = await L.rows(
      `SELECT asset_id, count(DISTINCT seq) AS msgs FROM read_parquet(${glob(L.lakeDir, 'l2')}) GROUP BY 1 ORDER BY msgs DESC, asset_id LIMIT 3`,
    );
    tokens = top.map((r) => String(r.asset_id));
    for (const t of tokens) tapes.set(t, await loadTape(t));
  });
  afterAll(async () => {
    await L?.close();
  });

  it('has busy tapes to replay', () => {
    expect(tokens.length).toBe(3);
    for (const t of tokens) expect(tapes.get(t)!.length).toBeGreaterThan(100);
  });

  it('equals an independent replay of the tape at arbitrary instants', async () => {
    let compared = 0;
    for (const token of tokens) {
      const tape = tapes.get(token)!;
      const lo = tape.reduce((m, r) => (r.us < m ? r.us : m), tape[0]!.us);
      const hi = tape.reduce((m, r) => (r.us > m ? r.us : m), tape[0]!.us);
      const instants: bigint[] = [];
      for (let i = 0; i <= 12; i++) instants.push(lo + ((hi - lo) * BigInt(i)) / 12n + BigInt(i * 7919));
      // Exactly at a message, and one microsecond before it.
      const mid = tape[Math.floor(tape.length / 2)]!.us;
      instants.push(mid, mid - 1n, hi + 86_400_000_000n);
      for (const at of instants) {
        const iso = new Date(Number(at / 1000n)).toISOString().replace('Z', `${String(at % 1000n).padStart(3, '0')}Z`);
        const atUs = at; // the ISO text keeps microseconds
        const want = replay(tape, atUs);
        if (want.n === 0) continue;
        const r = await L.get(`/v1/orderbook/snapshot?market_id=${token}&at=${iso}&depth=1000`);
        expect(r.status, iso).toBe(200);
        expect(r.body.asset_id).toBe(token);
        expect(r.body.bids, `${token} bids at ${iso}`).toEqual(want.bids.slice(0, 1000));
        expect(r.body.asks, `${token} asks at ${iso}`).toEqual(want.asks.slice(0, 1000));
        expect(r.body.bid_levels).toBe(want.bids.length);
        expect(r.body.ask_levels).toBe(want.asks.length);
        expect(r.body.best_bid).toBe(want.bids[0]?.price ?? null);
        expect(r.body.best_ask).toBe(want.asks[0]?.price ?? null);
        expect(r.body.market_id).toMatch(/^0x[0-9a-f]{64}$/);
        compared += 1;
      }
    }
    expect(compared).toBeGreaterThan(20);
  });

  it('agrees with the replay on both paths: a snapshot that day (one statement) and from an earlier day', async () => {
    // Just after midnight a day may have no stored snapshot yet: the general path reads earlier days. Later in
    // the day the one-day statement answers. Both must equal the replay, and both must have been taken.
    const paths = { sameDay: 0, earlier: 0 };
    for (const token of tokens) {
      const tape = tapes.get(token)!;
      const days = [...new Set(tape.map((r) => new Date(Number(r.us / 1000n)).toISOString().slice(0, 10)))];
      for (const day of days) {
        for (const offsetUs of [1_000n, 3_600_000_000n, 43_200_000_000n]) {
          const at = BigInt(Date.parse(`${day}T00:00:00Z`)) * 1000n + offsetUs;
          const want = replay(tape, at);
          if (want.n === 0) continue;
          const iso = new Date(Number(at / 1000n)).toISOString();
          const r = await L.get(`/v1/orderbook/snapshot?market_id=${token}&at=${iso}&depth=1000`);
          expect(r.status, iso).toBe(200);
          expect(r.body.bids, `${token} bids at ${iso}`).toEqual(want.bids);
          expect(r.body.asks, `${token} asks at ${iso}`).toEqual(want.asks);
          const snapDay = typeof r.body.snapshot_timestamp === 'string' ? r.body.snapshot_timestamp.slice(0, 10) : null;
          if (snapDay === day) paths.sameDay += 1;
          else paths.earlier += 1;
        }
      }
    }
    expect(paths.sameDay).toBeGreaterThan(0);
    expect(paths.earlier).toBeGreaterThan(0);
  });

  it('the one-day statement returns the snapshot and exactly the raw tape after it, up to its row limit', async () => {
    const token = tokens[0]!;
    const tape = tapes.get(token)!;
    const lake = new LakeSession(L.db, L.lakeDir).sources;
    let checked = 0;
    let limitedChecked = 0;
    for (const r of tape.filter((_, i) => i % Math.max(1, Math.floor(tape.length / 25)) === 0)) {
      const at = r.us + 1n;
      const rows = await runQuery(L.db, bookOnDayQuery(lake, token, at));
      const snap = rows.find((x) => x.kind === 's');
      if (!snap) continue;
      const snapSeq = BigInt(snap.seq as string);
      const day = new Date(Number(at / 1000n)).toISOString().slice(0, 10);
      const dayOf = (us: bigint): string => new Date(Number(us / 1000n)).toISOString().slice(0, 10);
      // Independent: the tape rows of that day received by `at` with a seq after the snapshot's.
      const want = tape
        .filter((x) => x.us <= at && x.seq > snapSeq && dayOf(x.us) === day)
        .map((x) => `${x.seq}/${x.idx}`)
        .sort();
      const got = rows
        .filter((x) => x.kind === 't')
        .map((x) => `${x.seq}/${x.level_idx}`)
        .sort();
      expect(got).toEqual(want);
      if (want.length >= 2) {
        const limited = await runQuery(L.db, bookOnDayQuery(lake, token, at, 1));
        expect(limited.filter((x) => x.kind === 't').length).toBe(1);
        limitedChecked += 1;
      }
      checked += 1;
    }
    expect(checked).toBeGreaterThan(5);
    expect(limitedChecked).toBeGreaterThan(0);
  });

  it('book_timestamp takes the later instant, not the later text', () => {
    // As text '…:00Z' sorts after '…:00.250Z'; as instants it is earlier.
    expect(later('2025-09-12T13:17:00.250Z', '2025-09-12T13:17:00Z')).toBe('2025-09-12T13:17:00.250Z');
    expect(later('2025-09-12T13:17:00Z', '2025-09-12T13:16:59.999999Z')).toBe('2025-09-12T13:17:00Z');
    expect(later('2025-09-12T13:17:00.000001Z', '2025-09-12T13:17:00Z')).toBe('2025-09-12T13:17:00.000001Z');
    expect(later(null, '2025-09-12T13:17:00Z')).toBe('2025-09-12T13:17:00Z');
    expect(later(null, null)).toBeNull();
  });

  it('limits depth, best price first', async () => {
    const token = tokens[0]!;
    const tape = tapes.get(token)!;
    const at = tape[tape.length - 1]!.us;
    const iso = new Date(Number(at / 1000n) + 1).toISOString();
    const want = replay(tape, at + 1000n);
    const r = await L.get(`/v1/orderbook/snapshot?market_id=${token}&at=${iso}&depth=2`);
    expect(r.status).toBe(200);
    expect(r.body.bids).toEqual(want.bids.slice(0, 2));
    expect(r.body.asks).toEqual(want.asks.slice(0, 2));
    if (r.body.bids.length === 2) expect(r.body.bids[0].price).toBeGreaterThan(r.body.bids[1].price);
    if (r.body.asks.length === 2) expect(r.body.asks[0].price).toBeLessThan(r.body.asks[1].price);
  });

  it("without at: the latest book, stamped with its own time (the tape's last message), not the request's", async () => {
    const micros = (iso: string): bigint => BigInt(Date.parse(iso)) * 1000n + BigInt((/\.\d{3}(\d{1,3})Z$/.exec(iso)?.[1] ?? '').padEnd(3, '0'));
    for (const token of tokens) {
      const tape = tapes.get(token)!;
      const last = tape.reduce((m, r) => (r.us > m ? r.us : m), tape[0]!.us);
      const want = replay(tape, last);
      const r = await L.get(`/v1/orderbook/snapshot?market_id=${token}&depth=1000`);
      expect(r.status).toBe(200);
      expect(micros(r.body.timestamp), token).toBe(last);
      expect(r.body.timestamp).toBe(r.body.book_timestamp);
      expect(r.body.latest).toBe(true);
      expect([r.body.bids, r.body.asks]).toEqual([want.bids, want.asks]);
      // Asked for an instant, the answer is stamped with it and is not "the latest".
      const at = new Date(Number(last / 1000n) + 3_600_000).toISOString();
      const asked = await L.get(`/v1/orderbook/snapshot?market_id=${token}&depth=1000&at=${at}`);
      expect([asked.body.timestamp, asked.body.latest]).toEqual([at.replace('.000Z', 'Z'), false]);
      expect([asked.body.bids, asked.body.asks]).toEqual([want.bids, want.asks]);
    }
  });

  it('404 before any data, 404 unknown market, 422 bad parameters, 401 without key', async () => {
    const token = tokens[0]!;
    const before = await L.get(`/v1/orderbook/snapshot?market_id=${token}&at=2001-01-01T00:00:00Z`);
    expect(before.status).toBe(404);
    expect((await L.get(`/v1/orderbook/snapshot?market_id=77777777`)).body).toEqual({ detail: 'Market not found' });
    for (const [qs, name] of [
      ['depth=0', 'depth'],
      ['depth=1001', 'depth'],
      ['at=2025-02-30', 'at'],
      // With a token id the outcome is the token's (any other is ignored, as everywhere); past the bound it is refused.
      ['outcome=1001', 'outcome'],
    ]) {
      const r = await L.get(`/v1/orderbook/snapshot?market_id=${token}&${qs}`);
      expect(r.status, qs).toBe(422);
      expect(r.body.detail[0].loc).toEqual(['query', name]);
    }
    expect((await L.get(`/v1/orderbook/snapshot?market_id=${token}`, { key: null })).status).toBe(401);
    expect((await L.get(`/v1/orderbook/top_of_book?market_id=${token}`, { key: null })).status).toBe(401);
  });

  it('top_of_book pages a window oldest first with condition id and token id', async () => {
    const token = tokens[0]!;
    const all = await L.rows(
      `SELECT epoch_us(ts) AS us, seq::VARCHAR AS seq, best_bid::DOUBLE AS best_bid, best_ask::DOUBLE AS best_ask
       FROM read_parquet(${glob(L.lakeDir, 'top_of_book')}) WHERE asset_id = '${token}' ORDER BY ts, seq`,
    );
    expect(all.length).toBeGreaterThan(5);
    const r = await L.get(`/v1/orderbook/top_of_book?market_id=${token}&limit=10000`);
    expect(r.status).toBe(200);
    expect(r.body.map((x: { seq: string }) => x.seq)).toEqual(all.map((x) => x.seq));
    expect(r.body[0].asset_id).toBe(token);
    expect(r.body[0].market_id).toMatch(/^0x/);
    const page = await L.get(`/v1/orderbook/top_of_book?market_id=${token}&limit=3&offset=2`);
    expect(page.body).toEqual(r.body.slice(2, 5));
    const s = all[3]!.us as bigint;
    const e = all[all.length - 2]!.us as bigint;
    const iso = (us: bigint): string => new Date(Number(us / 1000n)).toISOString().replace('Z', `${String(us % 1000n).padStart(3, '0')}Z`);
    const win = await L.get(`/v1/orderbook/top_of_book?market_id=${token}&start=${iso(s)}&end=${iso(e)}&limit=10000`);
    expect(win.body.map((x: { seq: string }) => x.seq)).toEqual(all.filter((x) => (x.us as bigint) >= s && (x.us as bigint) < e).map((x) => x.seq));
    for (const [qs, name] of [
      ['limit=0', 'limit'],
      ['limit=10001', 'limit'],
      ['offset=1000001', 'offset'],
      ['start=2025-09-16&end=2025-09-15', 'start'],
    ]) {
      const bad = await L.get(`/v1/orderbook/top_of_book?market_id=${token}&${qs}`);
      expect(bad.status, qs).toBe(422);
      expect(bad.body.detail[0].loc).toEqual(['query', name]);
    }
  });
});
