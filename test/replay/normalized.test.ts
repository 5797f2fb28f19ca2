import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WebSocket } from 'ws';
import { LakeSession } from '../../src/lake/session.js';
import { MarketResolver } from '../../src/markets/resolver.js';
import { normalizedMessages, resolveReplayAssets } from '../../src/replay/normalized.js';
import { parseDataType, type NormalizedMessage } from '../../src/replay/normalized-types.js';
import { buildReplayLake, DAY0, getNdjson, iso, micros, SILENCE_FROM, type ReplayLake } from './normalized-lake.js';

/**
 * GET /v1/replay/normalized over a real generated lake with faults and a real server. Every stream is checked
 * against something the replay does not use: level changes, trade prints, fills and quotes against plain DuckDB
 * reads of the lake's Parquet files; book snapshots against GET /v1/orderbook/snapshot at the same instants;
 * trade bars against GET /v1/trades/ohlcv; disconnects against the incidents GET /v1/markets/{id}/coverage lists.
 */

let L: ReplayLake;
/** The market with the busiest tape, its tokens, and the token with the most fills. */
let market = '';
let tokens: string[] = [];
let tradedToken = '';

const W_FROM = `${DAY0}T11:00:00Z`;
const W_TO = `${DAY0}T13:00:00Z`;
const timeOf = (m: { recv_ts?: string | undefined; ts: string }): bigint => micros(m.recv_ts ?? m.ts);

beforeAll(async () => {
  L = await buildReplayLake();
  const busiest = await L.rows(`SELECT asset_id, count(*) AS n FROM read_parquet(${L.files('l2')}) GROUP BY 1 ORDER BY n DESC, asset_id LIMIT 1`);
  const token = String(busiest[0]!.asset_id);
  const m = await L.rows(`SELECT id, outcome_token_ids FROM read_parquet(${L.files('catalog/markets')}) WHERE list_contains(outcome_token_ids, '${token}')`);
  market = String(m[0]!.id);
  tokens = (m[0]!.outcome_token_ids as string[]).map(String);
  const traded = await L.rows(`SELECT token_id, count(*) AS n FROM read_parquet(${L.files('trades')}) GROUP BY 1 ORDER BY n DESC, token_id LIMIT 1`);
  tradedToken = String(traded[0]!.token_id);
}, 120_000);

afterAll(async () => {
  await L?.close();
});

describe('GET /v1/replay/normalized', () => {
  it('book_change, trade and quote equal an independent read of the Parquet files, merged in time order', async () => {
    const r = await getNdjson(L, `/v1/replay/normalized?market_id=${market}&from=${W_FROM}&to=${W_TO}&data_types=book_change,trade,quote`);
    expect(r.status).toBe(200);
    expect(r.type).toMatch(/^application\/x-ndjson/);
    const msgs = r.lines;
    for (let i = 1; i < msgs.length; i += 1) expect(timeOf(msgs[i]) >= timeOf(msgs[i - 1]), `message ${i}`).toBe(true);
    for (const x of msgs) {
      expect(x.market_id).toBe(market);
      expect(tokens).toContain(x.asset_id);
      expect(x.outcome_index).toBe(tokens.indexOf(x.asset_id));
      expect(typeof x.outcome).toBe('string');
      expect(x.condition_id).toMatch(/^0x[0-9a-f]{64}$/);
    }
    const win = (col: string): string => `${col} >= TIMESTAMP '${W_FROM.slice(0, 19)}' AND ${col} < TIMESTAMP '${W_TO.slice(0, 19)}'`;
    for (const t of tokens) {
      // Level changes: the token's rows of the window in arrival order (seq, level_idx), every field.
      const l2 = await L.rows(
        `SELECT epoch_us(recv_ts) AS r, epoch_us(ts) AS t, CASE WHEN lower(side) IN ('buy','bid','bids') THEN 'bid' WHEN side IS NULL THEN NULL ELSE 'ask' END AS side,
           price::DOUBLE AS price, size::DOUBLE AS size, is_snapshot FROM read_parquet(${L.files('l2')})
         WHERE asset_id = '${t}' AND ${win('recv_ts')} ORDER BY seq, level_idx`,
      );
      const got = msgs.filter((x) => x.type === 'book_change' && x.asset_id === t).map((x) => [x.recv_ts, x.ts, x.side, x.price, x.size, x.is_snapshot]);
      const want = l2.map((x) => [iso(BigInt(x.r as bigint)), iso(BigInt(x.t as bigint)), x.side, x.price, x.size, x.is_snapshot]);
      expect(got.length).toBeGreaterThan(100);
      expect(got).toEqual(want);
      // Trade prints of the tape, by receive time, and the on-chain fills, by block time.
      const venue = await L.rows(
        `SELECT epoch_us(recv_ts) AS r, side, price::DOUBLE AS price, size::DOUBLE AS size, transaction_hash FROM read_parquet(${L.files('last_trades')})
         WHERE asset_id = '${t}' AND ${win('recv_ts')} ORDER BY seq`,
      );
      expect(
        msgs.filter((x) => x.type === 'trade' && x.source === 'venue' && x.asset_id === t).map((x) => [x.recv_ts, x.side, x.price, x.size, x.transaction_hash]),
      ).toEqual(venue.map((x) => [iso(BigInt(x.r as bigint)), x.side, x.price, x.size, x.transaction_hash]));
      const chain = await L.rows(
        `SELECT id, epoch_us(ts) AS t, price::DOUBLE AS price, size::DOUBLE AS size FROM read_parquet(${L.files('trades')})
         WHERE token_id = '${t}' AND ${win('ts')} ORDER BY ts, block_number, log_index, id`,
      );
      expect(msgs.filter((x) => x.type === 'trade' && x.source === 'chain' && x.asset_id === t).map((x) => [x.id, x.ts, x.price, x.size])).toEqual(
        chain.map((x) => [x.id, iso(BigInt(x.t as bigint)), x.price, x.size]),
      );
      const tob = await L.rows(
        `SELECT epoch_us(ts) AS t, best_bid::DOUBLE AS bb, best_ask::DOUBLE AS ba, best_bid_size::DOUBLE AS bbs, best_ask_size::DOUBLE AS bas
         FROM read_parquet(${L.files('top_of_book')}) WHERE asset_id = '${t}' AND ${win('ts')} ORDER BY seq`,
      );
      expect(msgs.filter((x) => x.type === 'quote' && x.asset_id === t).map((x) => [x.ts, x.best_bid, x.best_ask, x.best_bid_size, x.best_ask_size])).toEqual(
        tob.map((x) => [iso(BigInt(x.t as bigint)), x.bb, x.ba, x.bbs, x.bas]),
      );
    }
    expect(msgs.some((x) => x.type === 'trade' && x.source === 'venue')).toBe(true);
    expect(msgs.some((x) => x.type === 'quote')).toBe(true);
    expect(new Set(msgs.map((x) => x.asset_id)).size).toBe(2);
  });

  it('book snapshots at an interval equal the book-at-instant endpoint at those instants', async () => {
    const cases = [
      { type: 'book_snapshot_5_1m', from: `${DAY0}T10:00:00Z`, to: `${DAY0}T10:15:00Z`, step: 60_000_000n },
      { type: 'book_snapshot_3_100ms', from: `${DAY1()}T09:00:00.050Z`, to: `${DAY1()}T09:00:01Z`, step: 100_000n },
    ];
    let compared = 0;
    for (const c of cases) {
      const r = await getNdjson(L, `/v1/replay/normalized?assets=${tokens.join(',')}&from=${c.from}&to=${c.to}&data_types=${c.type}`);
      expect(r.status).toBe(200);
      const depth = Number(c.type.split('_')[2]);
      // Every boundary of the window, for each token, in time order.
      const first = ((micros(c.from) + c.step - 1n) / c.step) * c.step;
      const boundaries: bigint[] = [];
      for (let b = first; b < micros(c.to); b += c.step) boundaries.push(b);
      expect(r.lines.map((x) => micros(x.ts))).toEqual(boundaries.flatMap((b) => [b, b]));
      // The book moved between boundaries: the tape after `from` was replayed, not only the book at `from`.
      if (c.step === 60_000_000n) expect(new Set(r.lines.map((x) => JSON.stringify([x.bids, x.asks]))).size).toBeGreaterThan(4);
      for (const s of r.lines) {
        expect(s.type).toBe(c.type);
        const want = await getJson(`/v1/orderbook/snapshot?market_id=${s.asset_id}&at=${s.ts}&depth=${depth}`);
        expect(want.status, s.ts).toBe(200);
        expect(s.bids, `${s.asset_id} bids at ${s.ts}`).toEqual(want.body.bids);
        expect(s.asks, `${s.asset_id} asks at ${s.ts}`).toEqual(want.body.asks);
        expect(s.bids.length + s.asks.length).toBeGreaterThan(0);
        compared += 1;
      }
    }
    expect(compared).toBeGreaterThan(40);
  });

  it('trade bars equal the OHLCV endpoint for the same window and interval', async () => {
    for (const [tf, from, to] of [
      ['1m', `${DAY0}T00:00:00Z`, `${DAY0}T12:00:00Z`],
      ['10s', `${DAY0}T06:00:00Z`, `${DAY0}T09:00:00Z`],
      ['1h', `${DAY0}T00:00:00Z`, `${DAY1()}T00:00:00Z`],
    ] as const) {
      const r = await getNdjson(L, `/v1/replay/normalized?assets=${tradedToken}&from=${from}&to=${to}&data_types=trade_bar_${tf}`);
      expect(r.status).toBe(200);
      const ohlcv = await getJson(`/v1/trades/ohlcv?market_id=${tradedToken}&timeframe=${tf}&start=${from}&end=${to}&limit=10000`);
      expect(ohlcv.status).toBe(200);
      const want = (ohlcv.body as any[]).reverse().map((c) => ({ ...c }));
      expect(want.length, tf).toBeGreaterThan(2);
      expect(
        r.lines.map((b) => ({ timestamp: b.open_ts, open: b.open, high: b.high, low: b.low, close: b.close, volume: b.volume, trade_count: b.trade_count })),
      ).toEqual(
        want.map((c) => ({ timestamp: c.timestamp, open: c.open, high: c.high, low: c.low, close: c.close, volume: c.volume, trade_count: c.trade_count })),
      );
      for (const b of r.lines) {
        expect(b.type).toBe(`trade_bar_${tf}`);
        // Sent when it closes: ts is the bar's end.
        expect(micros(b.ts) - micros(b.open_ts)).toBe(BigInt({ '1m': 60, '10s': 10, '1h': 3600 }[tf]) * 1_000_000n);
      }
    }
  });

  it('disconnect appears exactly where the coverage shows an outage or gap', async () => {
    const days = `start=${DAY0}&end=${DAY1()}`;
    const markets = await L.rows(`SELECT id FROM read_parquet(${L.files('catalog/markets')}) ORDER BY id`);
    let seen = 0;
    let kinds = new Set<string>();
    for (const { id } of markets) {
      const cov = await getJson(`/v1/markets/${String(id)}/coverage?${days}`);
      expect(cov.status).toBe(200);
      expect(cov.body.incidents_truncated).toBe(false);
      const want = (cov.body.incidents as any[])
        .filter((i) => ['gap', 'silence', 'disconnect', 'capture_disconnect'].includes(i.kind))
        .map((i) => `${i.token_id} ${i.kind} ${i.from} ${i.to}`)
        .sort();
      const r = await getNdjson(L, `/v1/replay/normalized?market_id=${String(id)}&from=${DAY0}T00:00:00Z&to=${DAY2()}T00:00:00Z&data_types=disconnect`);
      expect(r.status).toBe(200);
      const got = r.lines.map((x) => `${x.asset_id} ${x.kind} ${x.from_ts} ${x.to_ts}`).sort();
      expect(got, String(id)).toEqual(want);
      for (const x of r.lines) expect(x.ts).toBe(x.from_ts);
      seen += got.length;
      kinds = new Set([...kinds, ...r.lines.map((x) => x.kind)]);
    }
    // The injected faults: the whole capture's silence and dropped lines.
    expect(kinds.has('disconnect')).toBe(true);
    expect(kinds.has('gap')).toBe(true);
    expect(seen).toBeGreaterThan(2);
    // A disconnect under way at `from` is sent at `from`.
    const mid = new Date(SILENCE_FROM + 600_000).toISOString();
    const r = await getNdjson(L, `/v1/replay/normalized?market_id=${market}&from=${mid}&to=${W_TO}&data_types=disconnect`);
    const under = r.lines.filter((x) => x.kind === 'disconnect');
    expect(under.length).toBeGreaterThan(0);
    for (const x of under) {
      expect(micros(x.ts)).toBe(micros(mid));
      expect(micros(x.from_ts) < micros(mid)).toBe(true);
    }
  });

  it('refuses bad input with a 4xx JSON detail', async () => {
    const base = `/v1/replay/normalized?assets=${tokens[0]}&from=${W_FROM}&to=${W_TO}`;
    const cases: [string, number, RegExp][] = [
      [`${base}&data_types=book_changes`, 422, /unknown data type/],
      [`${base}&data_types=book_snapshot_0_1s`, 422, /depth must be/],
      [`${base}&data_types=book_snapshot_1001_1s`, 422, /depth must be/],
      [`${base}&data_types=book_snapshot_10_7x`, 422, /interval must be/],
      [`${base}&data_types=book_snapshot_10_1ms`, 422, /interval must be/],
      [`${base}&data_types=trade_bar_0s`, 422, /timeframe/],
      [`/v1/replay/normalized?assets=${tokens[0]}&from=${W_TO}&to=${W_FROM}&data_types=trade`, 422, /from must be before to/],
      [`/v1/replay/normalized?from=${W_FROM}&to=${W_TO}&data_types=trade`, 422, /assets/],
      [`/v1/replay/normalized?assets=${'9'.repeat(77)}&from=${W_FROM}&to=${W_TO}&data_types=trade`, 404, /Unknown asset/],
      [`/v1/replay/normalized?market_id=99999999&from=${W_FROM}&to=${W_TO}&data_types=trade`, 404, /Unknown market/],
      [
        `/v1/replay/normalized?market_id=${Array.from({ length: 101 }, (_, i) => 500000 + i).join(',')}&from=${W_FROM}&to=${W_TO}&data_types=trade`,
        400,
        /At most 100/,
      ],
    ];
    for (const [p, status, detail] of cases) {
      const r = await getNdjson(L, p);
      expect(r.status, p).toBe(status);
      expect(JSON.stringify(r.body.detail), p).toMatch(detail);
    }
    // The tape's types are the raw tape's plan; a disconnect-only replay is not.
    const free = await getNdjson(L, `${base}&data_types=book_change`, L.freeKey);
    expect(free.status).toBe(402);
    expect(free.body.detail).toBeDefined();
    expect((await getNdjson(L, `${base}&data_types=disconnect`, L.freeKey)).status).toBe(200);
    expect((await getNdjson(L, `${base}&data_types=trade`, null)).status).toBe(401);
  });

  it('stops reading when the client disconnects mid-stream, and charges what was sent', async () => {
    const key = L.key();
    // Every token of every market for two days at 10 ms: far more than the test will read.
    const all = (await L.rows(`SELECT id FROM read_parquet(${L.files('catalog/markets')})`)).map((x) => String(x.id)).join(',');
    const p = `/v1/replay/normalized?market_id=${all}&from=${DAY0}T00:00:00Z&to=${DAY2()}T00:00:00Z&data_types=book_change,book_snapshot_50_10ms`;
    const ac = new AbortController();
    const res = await fetch(`${L.srv.url}${p}`, { headers: { 'x-api-key': key }, signal: ac.signal });
    expect(res.status).toBe(200);
    const reader = res.body!.getReader();
    let got = 0;
    while (got < 256 * 1024) got += (await reader.read()).value?.length ?? 0;
    ac.abort();
    // The pull settles only when the stream has ended: soon, with the bytes sent, far short of the whole.
    const deadline = Date.now() + 20_000;
    let pull: any;
    for (;;) {
      const h = await getJson(`/v1/user/downloads?limit=5`, key);
      pull = (h.body as any[]).find((x) => String(x.description).startsWith('/v1/replay/normalized') && x.description.includes('book_snapshot_50_10ms'));
      if (pull && pull.status !== 'pending') break;
      if (Date.now() > deadline) throw new Error(`the replay did not stop: ${JSON.stringify(pull)}`);
      await new Promise((r) => setTimeout(r, 100));
    }
    expect(pull.status).toBe('completed');
    expect(pull.size_bytes).toBeGreaterThanOrEqual(got);
    expect(pull.size_bytes).toBeLessThan(64 * 1024 * 1024);
  });
});

function DAY1(): string {
  return new Date(Date.parse(`${DAY0}T00:00:00Z`) + 86_400_000).toISOString().slice(0, 10);
}
function DAY2(): string {
  return new Date(Date.parse(`${DAY0}T00:00:00Z`) + 2 * 86_400_000).toISOString().slice(0, 10);
}

async function getJson(p: string, key = L.key()): Promise<{ status: number; body: any }> {
  const res = await fetch(`${L.srv.url}${p}`, { headers: { 'x-api-key': key } });
  return { status: res.status, body: await res.json() };
}

describe('normalizedMessages (the core, no HTTP)', () => {
  const all = ['book_change', 'trade', 'quote', 'disconnect', 'book_snapshot_4_10s', 'trade_bar_1m'].map((n) => {
    const r = parseDataType(n);
    if (!r.ok) throw new Error(r.message);
    return r.type;
  });
  const window = { from: micros(`${DAY0}T11:50:00Z`), to: micros(`${DAY0}T12:40:00Z`) };

  async function collect(opts: { pageRows?: number; signal?: AbortSignal; max?: number }): Promise<NormalizedMessage[]> {
    const lake = new LakeSession(L.db, L.lakeDir);
    const assets = await resolveReplayAssets(lake, new MarketResolver(), { marketIds: [market], assets: [tradedToken] });
    const out: NormalizedMessage[] = [];
    for await (const m of normalizedMessages(lake, { ...window, assets, dataTypes: all, ...opts })) {
      out.push(m);
      if (opts.max !== undefined && out.length >= opts.max) break;
    }
    return out;
  }

  it('pages of a few rows give exactly the messages of large pages: the keyset cursor skips and repeats nothing', async () => {
    const big = await collect({});
    const small = await collect({ pageRows: 7 });
    expect(big.length).toBeGreaterThan(500);
    expect(small).toEqual(big);
    expect(new Set(big.map((m) => m.type))).toEqual(new Set(['book_change', 'trade', 'quote', 'disconnect', 'book_snapshot_4_10s', 'trade_bar_1m']));
    for (let i = 1; i < big.length; i += 1) expect(timeOf(big[i]!) >= timeOf(big[i - 1]!)).toBe(true);
  });

  it('an aborted signal ends the stream at once', async () => {
    const lake = new LakeSession(L.db, L.lakeDir);
    const assets = await resolveReplayAssets(lake, new MarketResolver(), { marketIds: [market] });
    const stop = new AbortController();
    const it = normalizedMessages(lake, { ...window, assets, dataTypes: all, signal: stop.signal, pageRows: 50 })[Symbol.asyncIterator]();
    for (let i = 0; i < 20; i += 1) expect((await it.next()).done).toBe(false);
    stop.abort();
    expect((await it.next()).done).toBe(true);
  });
});

/** A WebSocket replay to its end: the messages (parsed) and the close code; or the HTTP refusal of the handshake. */
function wsReplay(url: string): Promise<{ messages: unknown[]; code: number } | { status: number; detail: string }> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url);
    const messages: unknown[] = [];
    ws.on('message', (d: Buffer) => messages.push(JSON.parse(d.toString())));
    ws.on('unexpected-response', (_req, res) => {
      let body = '';
      res.on('data', (c: Buffer) => (body += c.toString()));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, detail: String((JSON.parse(body) as { detail: unknown }).detail) }));
    });
    ws.on('error', (err) => {
      if (!/Unexpected server response/.test(err.message)) reject(err);
    });
    ws.on('close', (code) => resolve({ messages, code }));
  });
}

describe('GET /v1/replay/ws/normalized', () => {
  const wsUrl = (q: string, key: string | null): string =>
    `${L.srv.url.replace(/^http/, 'ws')}/v1/replay/ws/normalized?${q}${key === null ? '' : `&api_key=${key}`}`;

  it("sends the NDJSON endpoint's messages as text frames, in the same order, and closes 1000 at `to`", async () => {
    const q = `market_id=${market}&from=${W_FROM}&to=${W_TO}&data_types=book_change,trade,quote,book_snapshot_5_1m,trade_bar_1m,disconnect`;
    const nd = await getNdjson(L, `/v1/replay/normalized?${q}`);
    expect(nd.status).toBe(200);
    expect(nd.lines.length).toBeGreaterThan(500);
    const r = await wsReplay(wsUrl(`${q}&speed=0`, L.key()));
    expect('code' in r && r.code).toBe(1000);
    expect('messages' in r && r.messages).toEqual(nd.lines);
  });

  it('refuses before the upgrade with the HTTP status and detail: unknown asset, bad data type, a free plan on the tape, no key', async () => {
    const base = `from=${W_FROM}&to=${W_TO}`;
    const unknown = await wsReplay(wsUrl(`${base}&assets=123&data_types=quote`, L.key()));
    expect(unknown).toMatchObject({ status: 404 });
    const badType = await wsReplay(wsUrl(`${base}&market_id=${market}&data_types=book_snapshot_0_1s`, L.key()));
    expect(badType).toMatchObject({ status: 422 });
    const free = await wsReplay(wsUrl(`${base}&market_id=${market}&data_types=book_change`, L.freeKey));
    expect(free).toMatchObject({ status: 402 });
    const none = await wsReplay(wsUrl(`${base}&market_id=${market}&data_types=quote`, null));
    expect(none).toMatchObject({ status: 401 });
    for (const r of [unknown, badType, free, none]) expect('detail' in r && r.detail.length).toBeGreaterThan(0);
  });
});
