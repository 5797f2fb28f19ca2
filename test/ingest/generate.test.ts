import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generate, type GenerateReport } from '../../sim/generate/index.js';
import { parseGenerateArgs } from '../../sim/generate/cli.js';
import { runIngest } from '../../ingest/run.js';
import { lakeRows } from './oracle.js';
import { files } from '../helpers/lake-files.js';

/**
 * The generator's output checked by an independent reading in plain TypeScript: JSON.parse every line, replay
 * each token's book from `book` + `price_change` with a Map, and check every trade against that replay and
 * every OrderFilled against the OrderFilled rules of SOURCES.md. Nothing here imports the generator's model.
 */
const root = fs.mkdtempSync(path.join(os.tmpdir(), 'pmlake-gen-'));
const dirA = path.join(root, 'a');
const dirB = path.join(root, 'b');
const dirC = path.join(root, 'c');
// Three days around the price_change shape change (2025-09-15), small enough for a test.
const base = { markets: 12, days: 3, start: '2025-09-13', busy: 1, rate: 0.5 };
let reportA: GenerateReport;

type Msg = Record<string, unknown> & { event_type: string; timestamp: string };
type Fill = {
  event: string;
  block_number: number;
  block_timestamp: number;
  transaction_hash: string;
  log_index: number;
  contract: string;
  order_hash: string;
  maker: string;
  taker: string;
  maker_asset_id: string;
  taker_asset_id: string;
  maker_amount_filled: string;
  taker_amount_filled: string;
  fee: string;
};
type Gamma = Record<string, unknown> & { clobTokenIds: string; outcomes: string; outcomePrices: string; conditionId: string };

function filesUnder(dir: string): string[] {
  const out: string[] = [];
  const walk = (d: string): void => {
    for (const e of fs.readdirSync(d, { withFileTypes: true })) {
      const full = path.join(d, e.name);
      if (e.isDirectory()) walk(full);
      else out.push(path.relative(dir, full));
    }
  };
  walk(dir);
  return out.sort();
}

/** sha256 of every data file (the manifest carries wall-clock timing, so it is compared separately). */
function digest(dir: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const f of filesUnder(dir)) {
    if (f === 'manifest.json') continue;
    out[f] = crypto
      .createHash('sha256')
      .update(fs.readFileSync(path.join(dir, f)))
      .digest('hex');
  }
  return out;
}

function manifestWithoutTiming(dir: string): unknown {
  const m = JSON.parse(fs.readFileSync(path.join(dir, 'manifest.json'), 'utf8')) as Record<string, unknown>;
  delete m.timing;
  return m;
}

function lines<T>(file: string): T[] {
  return fs
    .readFileSync(file, 'utf8')
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => JSON.parse(l) as T);
}

const milli = (p: string): number => Math.round(Number(p) * 1000);
const PRICE_RE = /^0\.\d{1,3}$/;
const SIZE_RE = /^\d+(\.\d{1,2})?$/;
const HEX40 = /^[0-9a-f]{40}$/;

beforeAll(async () => {
  reportA = await generate({ ...base, seed: 11, out: dirA, workers: 0, options: true });
  await generate({ ...base, seed: 11, out: dirB, workers: 2, options: true });
  await generate({ ...base, seed: 12, out: dirC, workers: 0, options: true });
});

afterAll(() => {
  fs.rmSync(root, { recursive: true, force: true });
});

describe('generator determinism', () => {
  it('writes the same bytes for the same seed, in one thread or on workers', () => {
    const a = digest(dirA);
    expect(Object.keys(a)).toContain('markets/gamma_markets.json');
    expect(Object.keys(a).filter((f) => f.startsWith('ws/'))).toHaveLength(3);
    expect(digest(dirB)).toEqual(a);
    expect(manifestWithoutTiming(dirB)).toEqual(manifestWithoutTiming(dirA));
  });

  it('writes different data for a different seed', () => {
    const a = digest(dirA);
    const c = digest(dirC);
    for (const f of Object.keys(a)) expect(c[f], f).not.toBe(a[f]);
  });
});

describe('generated websocket tape', () => {
  const gamma = (): Gamma[] => JSON.parse(fs.readFileSync(path.join(dirA, 'markets/gamma_markets.json'), 'utf8')) as Gamma[];

  it('has Gamma markets shaped like the venue’s', () => {
    const ms = gamma();
    expect(ms).toHaveLength(base.markets);
    for (const m of ms) {
      expect(m.id).toMatch(/^\d{6,}$/);
      expect(m.conditionId).toMatch(/^0x[0-9a-f]{64}$/);
      const tokens = JSON.parse(m.clobTokenIds) as string[];
      expect(tokens).toHaveLength(2);
      for (const t of tokens) expect(t).toMatch(/^[1-9]\d{75,77}$/);
      const outcomes = JSON.parse(m.outcomes) as string[];
      expect([
        ['Yes', 'No'],
        ['Up', 'Down'],
      ]).toContainEqual(outcomes);
      const prices = (JSON.parse(m.outcomePrices) as string[]).map(Number);
      expect(prices[0]! + prices[1]!).toBeCloseTo(1, 9);
      expect(typeof m.volume).toBe('string');
      expect(typeof m.liquidity).toBe('string');
      const events = m.events as Record<string, unknown>[];
      expect(events).toHaveLength(1);
      expect(typeof events[0]!.volume).toBe('number');
      if (m.closed)
        expect([
          [1, 0],
          [0, 1],
        ]).toContainEqual(prices);
    }
    expect(ms.some((m) => m.closed === true)).toBe(true);
    expect(ms.some((m) => m.closed === false)).toBe(true);
    expect(ms.some((m) => Array.isArray((m.events as Record<string, unknown>[])[0]!.series))).toBe(true);
  });

  it('is venue-shaped, replays to uncrossed books, and every trade is at the touch of the replayed book', () => {
    const ms = gamma();
    const tokenOf = new Map<string, { market: string; outcome: number; tick: number }>();
    for (const m of ms) {
      const tokens = JSON.parse(m.clobTokenIds) as string[];
      tokens.forEach((t, i) => tokenOf.set(t, { market: m.conditionId, outcome: i, tick: milli(String(m.orderPriceMinTickSize)) }));
    }
    const counts = { messages: 0, levels: 0, book: 0, oldShape: 0, newShape: 0, trades: 0, tickChanges: 0 };
    const lastTrades: { market: string; token: string; outcome: number; price: number; ts: number }[] = [];
    const tradeByTx = new Map<string, { token: string; price: number; sizeCents: number; side: string }>();

    for (const file of reportA.files.ws) {
      const date = path.basename(file, '.jsonl');
      const msgs = lines<Msg>(path.join(dirA, file));
      // The tick grid: a token announced as changing from 0.01 to 0.001 is on the coarse grid until then.
      const tick = new Map<string, number>();
      for (const [t, info] of tokenOf) tick.set(t, info.tick);
      for (const m of msgs) if (m.event_type === 'tick_size_change') tick.set(m.asset_id as string, 10);
      const books = new Map<string, { bids: Map<number, number>; asks: Map<number, number> }>();
      const best = (t: string): [number, number] => {
        const b = books.get(t)!;
        return [Math.max(0, ...b.bids.keys()), Math.min(1000, ...b.asks.keys())];
      };
      const checkLevel = (t: string, price: string, size: string): void => {
        expect(price).toMatch(PRICE_RE);
        expect(size).toMatch(SIZE_RE);
        const p = milli(price);
        expect(p > 0 && p < 1000).toBe(true);
        expect(p % tick.get(t)!, `${price} on the ${tick.get(t)} grid`).toBe(0);
      };
      const apply = (t: string, side: string, price: string, size: string): void => {
        checkLevel(t, price, size);
        const b = books.get(t);
        expect(b, 'price_change before the token’s first book').toBeDefined();
        const map = side === 'BUY' ? b!.bids : side === 'SELL' ? b!.asks : undefined;
        expect(map).toBeDefined();
        if (Number(size) === 0) map!.delete(milli(price));
        else map!.set(milli(price), Math.round(Number(size) * 100));
        counts.levels++;
      };

      for (const m of msgs) {
        counts.messages++;
        expect(m.timestamp).toMatch(/^\d{13}$/);
        expect(m.market).toMatch(/^0x[0-9a-f]{64}$/);
        switch (m.event_type) {
          case 'book': {
            const t = m.asset_id as string;
            expect(tokenOf.get(t)?.market).toBe(m.market);
            expect(m.hash).toMatch(HEX40);
            const bids = m.bids as { price: string; size: string }[];
            const asks = m.asks as { price: string; size: string }[];
            for (const l of [...bids, ...asks]) checkLevel(t, l.price, l.size);
            // Bids ascending and asks descending: the best price is the last element of each.
            for (let i = 1; i < bids.length; i++) expect(milli(bids[i]!.price)).toBeGreaterThan(milli(bids[i - 1]!.price));
            for (let i = 1; i < asks.length; i++) expect(milli(asks[i]!.price)).toBeLessThan(milli(asks[i - 1]!.price));
            books.set(t, {
              bids: new Map(bids.map((l) => [milli(l.price), Math.round(Number(l.size) * 100)])),
              asks: new Map(asks.map((l) => [milli(l.price), Math.round(Number(l.size) * 100)])),
            });
            if (date >= '2025-09-15') expect(m.tick_size).toBeDefined();
            counts.book++;
            counts.levels += bids.length + asks.length;
            break;
          }
          case 'price_change': {
            if (m.changes) {
              expect(date < '2025-09-15').toBe(true);
              expect(m.hash).toMatch(HEX40);
              for (const ch of m.changes as { price: string; side: string; size: string }[]) apply(m.asset_id as string, ch.side, ch.price, ch.size);
              counts.oldShape++;
            } else {
              expect(date >= '2025-09-15').toBe(true);
              const pcs = m.price_changes as Record<string, string>[];
              expect(pcs.length).toBeGreaterThan(0);
              for (const ch of pcs) {
                expect(tokenOf.get(ch.asset_id!)?.market).toBe(m.market);
                expect(ch.hash).toMatch(HEX40);
                apply(ch.asset_id!, ch.side!, ch.price!, ch.size!);
              }
              // best_bid / best_ask are the token's touch after the whole message.
              for (const ch of pcs) expect([milli(ch.best_bid!), milli(ch.best_ask!)]).toEqual(best(ch.asset_id!));
              counts.newShape++;
            }
            break;
          }
          case 'last_trade_price': {
            const t = m.asset_id as string;
            const [bb, ba] = best(t);
            const p = milli(m.price as string);
            // A taker BUY lifts the ask, a SELL hits the bid, and never for more than rests there.
            if (m.side === 'BUY') expect(p).toBe(ba);
            else expect(m.side).toBe('SELL');
            if (m.side === 'SELL') expect(p).toBe(bb);
            const level = (m.side === 'BUY' ? books.get(t)!.asks : books.get(t)!.bids).get(p)!;
            const sizeCents = Math.round(Number(m.size) * 100);
            expect(sizeCents).toBeGreaterThan(0);
            expect(sizeCents).toBeLessThanOrEqual(level);
            expect(m.transaction_hash).toMatch(/^0x[0-9a-f]{64}$/);
            expect(m.fee_rate_bps).toBe('0');
            const info = tokenOf.get(t)!;
            lastTrades.push({ market: info.market, token: t, outcome: info.outcome, price: p, ts: Number(m.timestamp) });
            tradeByTx.set(m.transaction_hash as string, { token: t, price: p, sizeCents, side: m.side as string });
            counts.trades++;
            break;
          }
          case 'tick_size_change':
            expect(m).toMatchObject({ old_tick_size: '0.01', new_tick_size: '0.001' });
            tick.set(m.asset_id as string, 1);
            counts.tickChanges++;
            break;
          default:
            throw new Error(`unexpected event_type ${m.event_type}`);
        }
        if (m.event_type !== 'tick_size_change') {
          for (const t of [
            ...new Set([m.asset_id as string | undefined, ...((m.price_changes as { asset_id: string }[] | undefined) ?? []).map((c) => c.asset_id)]),
          ]) {
            if (!t) continue;
            const [bb, ba] = best(t);
            expect(bb, `crossed book for ${t} at ${m.timestamp}`).toBeLessThan(ba);
          }
        }
      }
      // The No book mirrors the Yes book: a Yes bid at p is a No ask at 1 − p, same size.
      for (const m of ms) {
        const [yes, no] = JSON.parse(m.clobTokenIds) as string[];
        const y = books.get(yes!);
        const n = books.get(no!);
        if (!y || !n) continue;
        expect([...n.asks].map(([p, s]) => [1000 - p, s]).sort((a, b) => a[0]! - b[0]!)).toEqual([...y.bids].sort((a, b) => a[0]! - b[0]!));
        expect([...n.bids].map(([p, s]) => [1000 - p, s]).sort((a, b) => a[0]! - b[0]!)).toEqual([...y.asks].sort((a, b) => a[0]! - b[0]!));
      }
    }
    expect(counts.oldShape).toBeGreaterThan(0);
    expect(counts.newShape).toBeGreaterThan(0);
    expect(counts.trades).toBeGreaterThan(100);
    expect(counts.messages).toBe(reportA.counts.ws_messages);
    expect(counts.levels).toBe(reportA.counts.level_updates);
    expect(counts.trades).toBe(reportA.counts.last_trade_price_messages);

    // Yes and No trade against one book, so their last prices sum to about 1 (off by at most the spread
    // the two takers crossed, which widens in fast markets).
    const lastBy = new Map<string, { price: number; ts: number }>();
    const gaps: number[] = [];
    for (const tr of lastTrades) {
      lastBy.set(tr.token, { price: tr.price, ts: tr.ts });
      const other = [...tokenOf].find(([t, i]) => i.market === tr.market && t !== tr.token)![0];
      const o = lastBy.get(other);
      if (o && tr.ts - o.ts < 60_000) gaps.push(Math.abs(tr.price + o.price - 1000));
    }
    expect(gaps.length).toBeGreaterThan(10);
    expect(Math.max(...gaps)).toBeLessThanOrEqual(200);
    expect(gaps.filter((g) => g <= 50).length / gaps.length).toBeGreaterThan(0.95);

    // Fills: the OrderFilled rules, checked against the trade each transaction printed on the tape.
    const gammaTokens = new Set(tokenOf.keys());
    let makerFills = 0;
    let fillLines = 0;
    const seenLog = new Set<string>();
    for (const file of reportA.files.fills) {
      const fills = lines<Fill>(path.join(dirA, file));
      fillLines += fills.length;
      const byTx = new Map<string, Fill[]>();
      let lastBlock = 0;
      for (const f of fills) {
        expect(Object.keys(f)).toEqual([
          'event',
          'block_number',
          'block_timestamp',
          'transaction_hash',
          'log_index',
          'contract',
          'order_hash',
          'maker',
          'taker',
          'maker_asset_id',
          'taker_asset_id',
          'maker_amount_filled',
          'taker_amount_filled',
          'fee',
        ]);
        expect(f.event).toBe('OrderFilled');
        expect(f.block_number).toBeGreaterThanOrEqual(lastBlock);
        lastBlock = f.block_number;
        const key = `${f.block_number}:${f.log_index}`;
        expect(seenLog.has(key), `log index reused in block: ${key}`).toBe(false);
        seenLog.add(key);
        expect(f.order_hash).toMatch(/^0x[0-9a-f]{64}$/);
        expect(f.maker).toMatch(/^0x[0-9a-f]{40}$/);
        expect(f.contract).toMatch(/^0x[0-9a-f]{40}$/);
        expect(new Date(f.block_timestamp * 1000).toISOString().slice(0, 10)).toBe(path.basename(file, '.jsonl'));
        byTx.set(f.transaction_hash, [...(byTx.get(f.transaction_hash) ?? []), f]);
      }
      for (const [tx, group] of byTx) {
        const trade = tradeByTx.get(tx);
        expect(trade, `fill without a last_trade_price: ${tx}`).toBeDefined();
        const summaries = group.filter((f) => f.taker === f.contract);
        expect(summaries).toHaveLength(1);
        const makers = group.filter((f) => f.taker !== f.contract);
        expect(makers.length).toBeGreaterThan(0);
        let shares = 0n;
        let usdc = 0n;
        for (const f of group) {
          expect((f.maker_asset_id === '0') !== (f.taker_asset_id === '0')).toBe(true);
          // makerAssetId 0: the maker pays USDC for shares of takerAssetId; otherwise it sells makerAssetId.
          const token = f.maker_asset_id === '0' ? f.taker_asset_id : f.maker_asset_id;
          const fUsdc = BigInt(f.maker_asset_id === '0' ? f.maker_amount_filled : f.taker_amount_filled);
          const fShares = BigInt(f.maker_asset_id === '0' ? f.taker_amount_filled : f.maker_amount_filled);
          expect(gammaTokens.has(token)).toBe(true);
          expect(token).toBe(trade!.token);
          // price = USDC / shares, exact on the tick grid (1000·USDC = price_milli·shares).
          expect(fUsdc * 1000n).toBe(BigInt(trade!.price) * fShares);
          expect(fUsdc > 0n && fUsdc < fShares).toBe(true);
          if (f.taker !== f.contract) {
            shares += fShares;
            usdc += fUsdc;
            // The maker is on the other side of the printed taker side.
            expect(f.maker_asset_id === '0' ? 'SELL' : 'BUY').toBe(trade!.side);
            expect(f.taker).toBe(summaries[0]!.maker);
          }
        }
        expect(shares).toBe(BigInt(trade!.sizeCents) * 10_000n);
        const s = summaries[0]!;
        expect(BigInt(s.maker_asset_id === '0' ? s.maker_amount_filled : s.taker_amount_filled)).toBe(usdc);
        makerFills += makers.length;
      }
      expect([...byTx.keys()].length).toBeGreaterThan(0);
    }
    expect(makerFills).toBe(reportA.counts.trades);
    expect(fillLines).toBe(reportA.counts.fill_events);
    for (const t of tradeByTx.values()) expect(gammaTokens.has(t.token)).toBe(true);
  });

  it('writes Deribit-like options trades with --options', () => {
    let n = 0;
    for (const file of reportA.files.options) {
      let last = 0;
      for (const o of lines<Record<string, unknown>>(path.join(dirA, file))) {
        expect(o.instrument_name).toMatch(/^(BTC|ETH)-\d{1,2}[A-Z]{3}\d{2}-\d+-[CP]$/);
        expect(typeof o.timestamp).toBe('number');
        expect(o.timestamp as number).toBeGreaterThanOrEqual(last);
        last = o.timestamp as number;
        expect(typeof o.trade_id).toBe('string');
        expect(o.price as number).toBeGreaterThan(0);
        expect(o.iv as number).toBeGreaterThan(0);
        expect(o.index_price as number).toBeGreaterThan(0);
        expect(o.amount as number).toBeGreaterThan(0);
        expect(['buy', 'sell']).toContain(o.direction);
        n++;
      }
    }
    expect(n).toBe(reportA.counts.options_trades);
    expect(n).toBeGreaterThan(0);
  });
});

describe('generated data through the real ingest', () => {
  it('lands every trade, level update and frame the manifest counts', async () => {
    const src = path.join(root, 'tiny');
    const lake = path.join(root, 'lake');
    const rep = await generate({ markets: 6, days: 2, start: '2025-09-14', seed: 3, rate: 0.3, out: src, workers: 0 });
    const ing = await runIngest(
      ['markets', 'fills', 'ws'].map((d) => path.join(src, d)),
      { lakeDir: lake, threads: 2 },
    );
    expect(ing.issues).toEqual([]);
    expect(ing.failed).toBe(0);
    expect(ing.rows_added.trades).toBe(rep.counts.trades);
    expect(ing.rows_added.l2).toBe(rep.counts.level_updates);
    expect(ing.rows_added.raw).toBe(rep.counts.ws_messages);
    expect(ing.rows_added.last_trades).toBe(rep.counts.last_trade_price_messages);

    // USD volume in the lake equals the USDC of the maker fills, summed here from the source lines.
    let usdcMicro = 0n;
    for (const f of rep.files.fills) {
      for (const x of lines<Fill>(path.join(src, f))) {
        if (x.taker === x.contract) continue;
        usdcMicro += BigInt(x.maker_asset_id === '0' ? x.maker_amount_filled : x.taker_amount_filled);
      }
    }
    const [row] = await lakeRows(`SELECT count(*)::BIGINT AS n, CAST(sum(usd_value) * 1000000 AS BIGINT) AS usdc FROM read_parquet(${files(lake, 'trades')})`);
    expect(String(row!.n)).toBe(String(rep.counts.trades));
    expect(String(row!.usdc)).toBe(String(usdcMicro));
    const [cat] = await lakeRows(`SELECT count(*)::BIGINT AS n FROM read_parquet(${files(lake, 'catalog/markets')})`);
    expect(String(cat!.n)).toBe(String(rep.counts.markets));
  });
});

describe('generate CLI arguments', () => {
  it('parses the documented flags and refuses bad ones', () => {
    expect(parseGenerateArgs(['--markets', '40', '--days', '14', '--seed', '7', '--out', '/tmp/x', '--options', '--busy', '2'])).toEqual({
      markets: 40,
      days: 14,
      seed: 7,
      out: '/tmp/x',
      options: true,
      busy: 2,
    });
    expect(() => parseGenerateArgs(['--markets', '0', '--days', '1', '--seed', '1', '--out', 'x'])).toThrow(/markets/);
    expect(() => parseGenerateArgs(['--markets', '1', '--days', '1', '--seed', '1', '--out', 'x', '--start', '2025-13-40'])).toThrow(/start/);
    expect(() => parseGenerateArgs(['--markets', '1', '--days', '1', '--seed', '1', '--out', 'x', '--bogus', '1'])).toThrow();
    expect(() => parseGenerateArgs(['--markets', '1', '--days', '1', '--seed', '1'])).toThrow(/out/);
  });
});
