import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildQueryLake, catalog, FIXTURES, glob, type QueryLake } from '../helpers/query-lake.js';
import { tempDir } from '../helpers/server.js';

/**
 * Two anchor behaviours on a real server over a real lake: OHLCV for a market with three outcomes (outcome 2
 * served, checked against a bucketing of the fills this test wrote; outcome 3 refused), and GET /v1/markets
 * filtered by every kind of series id GET /v1/series lists (venue-wide catalogue, raw tape, options, stored).
 */

const HOUR = 3_600_000_000n; // µs
const T0 = 1_767_225_600n * 1_000_000n; // 2026-01-01T00:00:00Z
const hex = (label: string): string => `0x${crypto.createHash('sha256').update(label).digest('hex')}`;
const addr = (label: string): string => hex(label).slice(0, 42);
const TOKENS = ['71', '72', '73'].map((p) => p + '3'.repeat(75));
const CONDITION = hex('three-way-condition');

/** A fill as written: price and size in micro-units, exact (shares are 10 each, so USDC = price × 10). */
type Fill = { us: bigint; block: number; log: number; token: string; price: bigint; size: bigint };

/** Deterministic fills spread over 5 hours on all three tokens, more on the third. */
function makeFills(): Fill[] {
  const out: Fill[] = [];
  let seed = 12345;
  const rnd = (): number => {
    seed = (seed * 1103515245 + 12345) % 2 ** 31;
    return seed / 2 ** 31;
  };
  for (let i = 0; i < 90; i++) {
    const token = TOKENS[i % 3 === 0 ? 0 : i % 5 === 0 ? 1 : 2]!;
    const us = T0 + BigInt(Math.floor(rnd() * 5 * 3600)) * 1_000_000n;
    out.push({ us, block: 70_000_000 + i, log: i % 4, token, price: BigInt(10_000 + Math.floor(rnd() * 980) * 1000), size: 10_000_000n });
  }
  return out;
}

function writeInputs(dir: string, fills: Fill[]): void {
  const base = JSON.parse(fs.readFileSync(path.join(FIXTURES, 'markets', 'gamma_market_btc_5m.json'), 'utf8')) as Record<string, unknown>;
  delete base.events;
  const market = {
    ...base,
    id: '4242001',
    conditionId: CONDITION,
    questionID: hex('three-way-question'),
    slug: 'three-way-test-market',
    question: 'Which of three? (test market)',
    outcomes: JSON.stringify(['Red', 'Green', 'Blue']),
    outcomePrices: JSON.stringify(['0.2', '0.3', '0.5']),
    clobTokenIds: JSON.stringify(TOKENS),
    startDate: '2025-12-31T00:00:00Z',
    endDate: '2026-01-02T00:00:00Z',
  };
  fs.writeFileSync(path.join(dir, 'gamma_market_three_way.json'), JSON.stringify(market));
  const lines = fills.map((f, i) =>
    JSON.stringify({
      event: 'OrderFilled',
      block_number: f.block,
      block_timestamp: Number(f.us / 1_000_000n),
      transaction_hash: hex(`tx${i}`),
      log_index: f.log,
      order_hash: hex(`order${i}`),
      maker: addr(`maker${i % 7}`),
      taker: addr(`taker${i % 5}`),
      // The maker pays USDC for shares of the token: USDC = price × shares exactly.
      maker_asset_id: '0',
      taker_asset_id: f.token,
      maker_amount_filled: String((f.price * f.size) / 1_000_000n),
      taker_amount_filled: String(f.size),
      fee: '0',
    }),
  );
  fs.writeFileSync(path.join(dir, 'fills_three_way.jsonl'), lines.join('\n') + '\n');
  // A few option trades, so the lake has an options series (deribit:btc-options) whose markets are instruments.
  const options = [0, 1, 2].map((i) =>
    JSON.stringify({
      instrument_name: `BTC-27MAR26-${100000 + i * 5000}-C`,
      timestamp: Number(T0 / 1000n) + i * 60_000,
      trade_id: `BTC-9000${i}`,
      price: 0.01 + i / 1000,
      iv: 50 + i,
      index_price: 95000.5,
      amount: 1,
      direction: 'buy',
    }),
  );
  fs.writeFileSync(path.join(dir, 'options_three_way.jsonl'), options.join('\n') + '\n');
}

type Bar = { timestamp: string; open: number; high: number; low: number; close: number; volume: number; trade_count: number };

/** Buckets of `stepUs` from the epoch, newest first; open/close by block time, block, log index. */
function bucketed(fills: Fill[], stepUs: bigint): Bar[] {
  const sorted = [...fills].sort((a, b) => (a.us !== b.us ? (a.us < b.us ? -1 : 1) : a.block - b.block || a.log - b.log));
  const groups = new Map<bigint, Fill[]>();
  for (const f of sorted) {
    const b = (f.us / stepUs) * stepUs;
    groups.set(b, [...(groups.get(b) ?? []), f]);
  }
  const num = (x: bigint): number => Number(x) / 1e6;
  return [...groups.entries()]
    .sort((a, b) => (a[0] > b[0] ? -1 : 1))
    .map(([b, fs]) => ({
      timestamp: new Date(Number(b / 1000n)).toISOString().replace('.000Z', 'Z'),
      open: num(fs[0]!.price),
      high: num(fs.reduce((m, f) => (f.price > m ? f.price : m), 0n)),
      low: num(fs.reduce((m, f) => (f.price < m ? f.price : m), fs[0]!.price)),
      close: num(fs[fs.length - 1]!.price),
      volume: num(fs.reduce((s, f) => s + f.size, 0n)),
      trade_count: fs.length,
    }));
}

let L: QueryLake;
let extra: { dir: string; cleanup(): void };
const fills = makeFills();

beforeAll(async () => {
  extra = tempDir('pmlake-3way-');
  writeInputs(extra.dir, fills);
  L = await buildQueryLake({ markets: 4, days: 2, extra: [extra.dir] });
});
afterAll(async () => {
  await L?.close();
  extra?.cleanup();
});

describe('GET /v1/trades/ohlcv for a market with three outcomes', () => {
  it('the market has three outcome tokens in the order of its outcomes', async () => {
    const r = await L.get('/v1/markets/4242001');
    expect(r.status).toBe(200);
    expect(r.body.outcomes).toEqual(['Red', 'Green', 'Blue']);
    expect(r.body.outcome_token_ids).toEqual(TOKENS);
    expect(r.body.outcome_prices).toEqual([0.2, 0.3, 0.5]);
  });

  it("outcome=2 gives the third token's candles, equal to a bucketing of the fills written (1h, 7m, 30s)", async () => {
    const third = fills.filter((f) => f.token === TOKENS[2]);
    expect(third.length).toBeGreaterThan(20);
    for (const [tf, step] of [
      ['1h', HOUR],
      ['7m', 7n * 60_000_000n],
      ['30s', 30_000_000n],
    ] as const) {
      const r = await L.get(`/v1/trades/ohlcv?market_id=4242001&outcome=2&timeframe=${tf}&limit=10000`);
      expect(r.status, tf).toBe(200);
      expect(r.body, tf).toEqual(bucketed(third, step).map((b) => ({ market_id: TOKENS[2], outcome: 2, ...b })));
      // The token id as market_id names the same outcome.
      const byToken = await L.get(`/v1/trades/ohlcv?market_id=${TOKENS[2]}&timeframe=${tf}&limit=10000`);
      expect(byToken.body, tf).toEqual(r.body);
    }
    // And outcome 1 is the second token's, not the third's.
    const second = await L.get('/v1/trades/ohlcv?market_id=4242001&outcome=1&timeframe=1h&limit=10000');
    expect(second.body).toEqual(
      bucketed(
        fills.filter((f) => f.token === TOKENS[1]),
        HOUR,
      ).map((b) => ({ market_id: TOKENS[1], outcome: 1, ...b })),
    );
  });

  it('the chart datafeed serves the same outcome: UDF history of symbol <id>.2 at 60 equals the bucketing', async () => {
    const want = bucketed(
      fills.filter((f) => f.token === TOKENS[2]),
      HOUR,
    ).reverse();
    const from = Number(T0 / 1_000_000n);
    const r = await L.get(`/v1/charts/udf/history?symbol=4242001.2&resolution=60&from=${from}&to=${from + 6 * 3600}`);
    expect(r.status).toBe(200);
    expect(r.body.s).toBe('ok');
    expect(r.body.t).toEqual(want.map((b) => Date.parse(b.timestamp) / 1000));
    expect(r.body.o).toEqual(want.map((b) => b.open));
    expect(r.body.c).toEqual(want.map((b) => b.close));
    expect(r.body.v).toEqual(want.map((b) => b.volume));
  });

  it('one outcome rule on every endpoint: any outcome the market has is served, another is a 422 naming outcome', async () => {
    // Outcome 2 of the three: the third token's trades, newest first; its (empty) top of book; a book it has no
    // data for is a 404 about the data, not a refusal of the outcome.
    const third = fills.filter((f) => f.token === TOKENS[2]).sort((a, b) => (a.us !== b.us ? (a.us < b.us ? 1 : -1) : b.block - a.block || b.log - a.log));
    const trades = await L.get('/v1/trades?market_id=4242001&outcome=2&limit=10000');
    expect(trades.status).toBe(200);
    expect(trades.body.map((t: { market_id: string; outcome: number; block_number: number }) => [t.market_id, t.outcome, t.block_number])).toEqual(
      third.map((f) => [TOKENS[2], 2, f.block]),
    );
    const top = await L.get('/v1/orderbook/top_of_book?market_id=4242001&outcome=2');
    expect([top.status, top.body]).toEqual([200, []]);
    const book = await L.get('/v1/orderbook/snapshot?market_id=4242001&outcome=2');
    expect(book.status).toBe(404);
    expect(book.body.detail).toMatch(/^No order book data/);
    // Across every market: trades of outcome index 2 are the third token's.
    const anyMarket = await L.get('/v1/trades?outcome=2&limit=10000');
    expect(anyMarket.body.map((t: { market_id: string }) => t.market_id)).toEqual(third.map(() => TOKENS[2]));
    for (const endpoint of ['/v1/trades', '/v1/trades/ohlcv', '/v1/orderbook/top_of_book', '/v1/orderbook/snapshot']) {
      for (const o of [3, 7, 1000, 1001, -1]) {
        const r = await L.get(`${endpoint}?market_id=4242001&outcome=${o}`);
        expect(r.status, `${endpoint} ${o}`).toBe(422);
        expect(r.body.detail[0].loc, `${endpoint} ${o}`).toEqual(['query', 'outcome']);
      }
    }
    expect((await L.get('/v1/trades/ohlcv?market_id=9999999&outcome=2')).status).toBe(404);
  });
});

describe('GET /v1/markets?series_id= for every kind of series', () => {
  const list = async (id: string): Promise<string[]> => {
    const ids: string[] = [];
    for (let offset = 0; ; offset += 1000) {
      const r = await L.get(`/v1/markets?series_id=${encodeURIComponent(id)}&limit=1000&offset=${offset}`);
      expect(r.status, id).toBe(200);
      ids.push(...(r.body as { id: string }[]).map((m) => m.id));
      if (r.body.length < 1000) return ids.sort();
    }
  };
  const sorted = (rows: Record<string, unknown>[]): string[] => rows.map((r) => String(r.id)).sort();

  it('a venue-wide catalogue series (polymarket:ohlcv-1h, trades-recent) lists every market, as many as its catalogued_markets', async () => {
    const every = sorted(await L.rows(`SELECT id FROM read_parquet(${catalog(L.lakeDir, 'markets')})`));
    expect(every.length).toBeGreaterThan(5);
    for (const id of ['polymarket:ohlcv-1h', 'polymarket:ohlcv-1d', 'polymarket:trades-recent']) {
      expect(await list(id), id).toEqual(every);
      expect((await L.get(`/v1/series/${id}`)).body.catalogued_markets, id).toBe(every.length);
    }
  });

  it('a catalogue series pmlake does not serve lists none; an unknown series is a 404', async () => {
    expect(await list('polymarket:prices-history')).toEqual([]);
    expect((await L.get('/v1/series/polymarket:prices-history')).body.catalogued_markets).toBe(0);
    const nf = await L.get('/v1/markets?series_id=polymarket:no-such-series');
    expect(nf.status).toBe(404);
    expect(nf.body).toEqual({ detail: 'Series not found' });
  });

  it("a raw tape series lists the markets whose condition ids its frames carry (the tape's own event types)", async () => {
    const want = sorted(
      await L.rows(
        `SELECT DISTINCT m.id FROM read_parquet(${catalog(L.lakeDir, 'markets')}) m
         WHERE m.condition_id IN (SELECT unnest(condition_ids) FROM read_parquet(${glob(L.lakeDir, 'raw')})
                                  WHERE list_has_any(event_types, ['book', 'price_change', 'tick_size_change']))`,
      ),
    );
    expect(want.length).toBeGreaterThan(0);
    expect(await list('polymarket:l2-delta-tape')).toEqual(want);
    const trades = sorted(
      await L.rows(
        `SELECT DISTINCT m.id FROM read_parquet(${catalog(L.lakeDir, 'markets')}) m
         WHERE m.condition_id IN (SELECT unnest(condition_ids) FROM read_parquet(${glob(L.lakeDir, 'raw')}) WHERE list_contains(event_types, 'last_trade_price'))`,
      ),
    );
    expect(await list('polymarket:trades-tape')).toEqual(trades);
    expect(trades).not.toEqual(want);
  });

  it('a stored market series lists its markets by either spelling; an options series lists none (its markets are instruments)', async () => {
    const s = (
      await L.rows(
        `SELECT series_id, list(id) AS ids FROM read_parquet(${catalog(L.lakeDir, 'markets')}) WHERE series_id IS NOT NULL GROUP BY 1 ORDER BY 1 LIMIT 1`,
      )
    )[0]!;
    expect(await list(String(s.series_id))).toEqual((s.ids as string[]).map(String).sort());
    const series = (await L.get('/v1/series')).body as { series_id: string; asset_class: string }[];
    const options = series.filter((x) => x.asset_class === 'options').map((x) => x.series_id);
    expect(options).toContain('deribit:btc-options');
    for (const o of options) expect(await list(o), o).toEqual([]);
    // An options series the lake has no trades for is no series at all: 404 on both routes alike.
    expect((await L.get('/v1/series/deribit:eth-options')).status).toBe(404);
    expect((await L.get('/v1/markets?series_id=deribit:eth-options')).status).toBe(404);
  });
});
