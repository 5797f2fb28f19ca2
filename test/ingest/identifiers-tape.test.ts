import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { runIngest } from '../../ingest/run.js';
import { files } from '../helpers/lake-files.js';
import { lakeRows, tempDir } from './oracle.js';
import { captureText, rawRows, writeFile, type Line } from './capture-util.js';

/**
 * Identifiers from outside, on the tape (lake/README.md, "What the ingest accepts"): a capture whose frames name a token
 * id of 100,000 digits, one that is not a number, one of 79 digits, one of 78 digits above 2^256 − 1, a malformed
 * condition id and a book hash over 256 bytes, among good frames (one of them of token 2^256 − 1 exactly, which lands).
 * Each is an issue naming the file and its line; no derived data set names it; the good frames (and the good entries
 * of a message) land; every frame stays in raw as recorded.
 */
const tmp = tempDir('pmlake-ident-tape-');
afterAll(() => tmp.cleanup());

/** The rules, in plain TypeScript: a uint256 in decimal; 0x and 64 hex digits. */
const tokenOk = (x: string): boolean => /^[0-9]{1,78}$/.test(x) && BigInt(x) < 2n ** 256n;
const conditionOk = (x: string): boolean => /^0x[0-9a-fA-F]{64}$/.test(x);

const M = `0x${'ab'.repeat(32)}`;
const A = `1${'2'.repeat(76)}`;
const B = `3${'4'.repeat(76)}`;
const MAX = (2n ** 256n - 1n).toString();
const HUGE = '1'.repeat(100_000);
const WORDS = 'abc';
const LONG = '9'.repeat(79);
const OVER = (2n ** 256n).toString();
const BAD_M = `0x${'zz'.repeat(32)}`;
const LONG_TICK = `${'12345678901234567890'.repeat(4)}1`;
const XYZ = 'xyz';
const LONG_HASH = 'h'.repeat(300);

const T = 1_780_000_000_000;
type Msg = Record<string, unknown>;
const book = (asset: string, ts: number, market = M, bid = '0.40', ask = '0.60'): Msg => ({
  market,
  asset_id: asset,
  timestamp: String(ts),
  hash: `h${ts}`,
  bids: [{ price: bid, size: '10' }],
  asks: [{ price: ask, size: '10' }],
  event_type: 'book',
});
const entry = (asset: string, price: string, ts: number): Msg => ({
  asset_id: asset,
  price,
  size: '5',
  side: 'BUY',
  hash: `e${ts}${asset.slice(0, 4)}`,
  best_bid: price,
  best_ask: '0.6',
});
const priceChange = (ts: number, entries: Msg[], market = M): Msg => ({ market, price_changes: entries, timestamp: String(ts), event_type: 'price_change' });
const trade = (asset: string, ts: number): Msg => ({
  market: M,
  asset_id: asset,
  price: '0.6',
  size: '1',
  side: 'BUY',
  fee_rate_bps: '0',
  timestamp: String(ts),
  event_type: 'last_trade_price',
  transaction_hash: `0x${'12'.repeat(32)}`,
});

/** The body of the capture: [frame (one message or an array), the bad value it carries (for the issue), if any]. */
const FRAMES: [Msg | Msg[], string | null][] = [
  [book(A, T + 1), null],
  [book(B, T + 2), null],
  [book(HUGE, T + 3), HUGE],
  [priceChange(T + 4, [entry(A, '0.41', T + 4), entry(WORDS, '0.42', T + 4)]), WORDS],
  [trade(LONG, T + 5), LONG],
  [book(OVER, T + 6), OVER],
  [book(MAX, T + 7), null],
  [priceChange(T + 8, [entry(A, '0.43', T + 8)], BAD_M), BAD_M],
  [{ event_type: 'tick_size_change', asset_id: LONG_TICK, market: M, old_tick_size: '0.01', new_tick_size: '0.001', timestamp: String(T + 9) }, LONG_TICK],
  [[priceChange(T + 10, [entry(B, '0.44', T + 10)]), trade(XYZ, T + 10)], XYZ],
  [trade(A, T + 11), null],
  [book(A, T + 12, M, '0.43', '0.60'), null],
  [{ ...book(B, T + 13), hash: LONG_HASH }, LONG_HASH],
];

/** Every message of a frame that names a bad token or market is not derived; in a price_change, only its bad entries. */
function goodLevels(): string[] {
  const out: string[] = [];
  for (const [f] of FRAMES) {
    for (const m of Array.isArray(f) ? f : [f]) {
      if (typeof m.market === 'string' && !conditionOk(m.market)) continue;
      if (typeof m.hash === 'string' && m.hash.length > 256) continue;
      if (m.event_type === 'book' && tokenOk(m.asset_id as string)) {
        for (const l of m.bids as Msg[]) out.push([m.asset_id, 'bid', Number(l.price), Number(l.size), true].join('|'));
        for (const l of m.asks as Msg[]) out.push([m.asset_id, 'ask', Number(l.price), Number(l.size), true].join('|'));
      }
      if (m.event_type === 'price_change') {
        for (const e of m.price_changes as Msg[])
          if (tokenOk(e.asset_id as string)) out.push([e.asset_id, 'bid', Number(e.price), Number(e.size), false].join('|'));
      }
    }
  }
  return out.sort();
}

describe('identifiers on the tape', () => {
  it('a bad token or condition id is an issue with its line, lands in no derived data, and the good frames land', async () => {
    const dir = path.join(tmp.dir, 'caps');
    const body: Line[] = FRAMES.map(([f], i) => ({ recv_ms: T + 1 + i, conn: 0, frame: JSON.stringify(f) }));
    // An outage of a good and a bad asset: one incident, for the good one.
    body.push({ recv_ms: T + 20, event: 'outage', from_ms: T + 13, to_ms: T + 19, assets: [A, HUGE], reason: 'test' });
    body.push({ recv_ms: T + 21, conn: 0, frame: JSON.stringify(book(A, T + 21)) });
    const file = writeFile(dir, 'market-20260528T000000Z-rec-abcdef01.capture.jsonl', captureText('rec', 's1', [{ conn: 0, assets: [A, B, MAX] }], body, T));
    const lake = path.join(tmp.dir, 'lake');
    const r = await runIngest([dir], { lakeDir: lake, threads: 1 });
    expect(r.failed).toBe(0);

    // Line 1 is the start line, line 2 the assets line: frame i is on line 3 + i.
    const lineOf = (bad: string): number => 3 + FRAMES.findIndex(([, b]) => b === bad);
    const named = r.issues.map((i) => ({ file: i.file, line: i.line }));
    for (const bad of [HUGE, WORDS, LONG, OVER, BAD_M, LONG_TICK, XYZ, LONG_HASH]) expect(named, bad.slice(0, 10)).toContainEqual({ file, line: lineOf(bad) });
    expect(named).toContainEqual({ file, line: 3 + FRAMES.length });
    expect(r.issues).toHaveLength(9);
    // An issue shows the head of a value, never the whole.
    for (const i of r.issues) expect(i.message.length).toBeLessThan(400);

    // raw: every frame as recorded; its lists of markets only the good one.
    expect((await rawRows(lake)).map(([, f]) => f)).toEqual(body.filter((l) => 'frame' in l).map((l) => (l as { frame: string }).frame));
    const rawMarkets = await lakeRows(`SELECT DISTINCT unnest(condition_ids) AS c FROM read_parquet(${files(lake, 'raw')})`);
    expect(rawMarkets.map((x) => x.c)).toEqual([M]);
    const indexed = await lakeRows(`SELECT DISTINCT condition_id AS c FROM read_parquet(${files(lake, 'raw_by_market')})`);
    expect(indexed.map((x) => x.c)).toEqual([M]);

    // l2: exactly the good levels (a book for A again at the end).
    const l2 = await lakeRows(
      `SELECT asset_id, side, price::DOUBLE AS p, size::DOUBLE AS s, is_snapshot FROM read_parquet(${files(lake, 'l2')}, hive_partitioning = false)`,
    );
    const want = [...goodLevels(), `${A}|bid|0.4|10|true`, `${A}|ask|0.6|10|true`].sort();
    expect(l2.map((x) => [x.asset_id, x.side, x.p, x.s, x.is_snapshot].join('|')).sort()).toEqual(want);

    const trades = await lakeRows(`SELECT asset_id FROM read_parquet(${files(lake, 'last_trades')}, hive_partitioning = false)`);
    expect(trades.map((x) => x.asset_id)).toEqual([A]);
    const incidents = await lakeRows(
      `SELECT asset_id, kind FROM read_parquet(${files(lake, 'incidents')}, hive_partitioning = false) WHERE kind = 'capture_disconnect'`,
    );
    expect(incidents).toEqual([{ asset_id: A, kind: 'capture_disconnect' }]);

    // Every data set that names a token or a market names only good ones, and each good token is there.
    const good = [A, B, MAX].sort();
    for (const [dir, col] of [
      ['l2', 'asset_id'],
      ['book_snapshots', 'asset_id'],
      ['top_of_book', 'asset_id'],
      ['checkpoints', 'asset_id'],
      ['incidents', 'asset_id'],
      ['coverage', 'asset_id'],
      ['catalog/tokens', 'token_id'],
    ] as const) {
      const rows = await lakeRows(`SELECT DISTINCT ${col} AS t, condition_id AS c FROM read_parquet(${files(lake, dir)}, hive_partitioning = false)`);
      for (const x of rows) {
        expect(good, `${dir}: ${String(x.t).slice(0, 20)}`).toContain(x.t);
        if (x.c !== null) expect(x.c, dir).toBe(M);
      }
      if (!['checkpoints', 'incidents'].includes(dir)) expect(rows.map((x) => x.t).sort(), dir).toEqual(good);
    }
    const markets = await lakeRows(`SELECT condition_id, outcome_token_ids FROM read_parquet(${files(lake, 'catalog/markets')})`);
    // One placeholder market, of the good tokens (sorted, as a tape-only placeholder lists them).
    expect(markets).toEqual([{ condition_id: M, outcome_token_ids: good }]);
    const tokenMarkets = await lakeRows(`SELECT DISTINCT condition_id FROM read_parquet(${files(lake, 'catalog/tokens')})`);
    expect(tokenMarkets).toEqual([{ condition_id: M }]);
  });
});
