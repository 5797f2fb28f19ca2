import fs from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { runIngest } from '../../ingest/run.js';
import { csvMessages, d6, framesOf, lakeRows, tempDir, type Msg } from './oracle.js';
import { files } from '../helpers/lake-files.js';

const FIX = path.resolve('test/fixtures/venue');
const tmp = tempDir('pmlake-ws-');
afterAll(() => tmp.cleanup());

type Level = { price: string; size: string; side?: string; asset_id?: string; hash?: string };

/** Expected l2 rows of one message, as natural-key strings (asset, ts, hash, snapshot, side, price, size). */
function l2Keys(m: Msg): string[] {
  const ts = String(m.timestamp);
  const key = (asset: unknown, hash: unknown, snap: boolean, side: string | null, price: string | null, size: string | null): string =>
    [asset, ts, hash, snap, side, price === null ? null : d6(price), size === null ? null : d6(size)].join('|');
  if (m.event_type === 'book') {
    const bids = (m.bids as Level[]) ?? [];
    const asks = (m.asks as Level[]) ?? [];
    if (bids.length + asks.length === 0) return [key(m.asset_id, m.hash, true, null, null, null)];
    return [
      ...bids.map((l) => key(m.asset_id, m.hash, true, 'bid', l.price, l.size)),
      ...asks.map((l) => key(m.asset_id, m.hash, true, 'ask', l.price, l.size)),
    ];
  }
  if (m.event_type === 'price_change') {
    const side = (s: string | undefined): string => (s === 'BUY' ? 'bid' : 'ask');
    if (Array.isArray(m.price_changes)) {
      return (m.price_changes as Level[]).map((c) => key(c.asset_id, c.hash, false, side(c.side), c.price, c.size));
    }
    return ((m.changes as Level[]) ?? []).map((c) => key(m.asset_id, m.hash, false, side(c.side), c.price, c.size));
  }
  return [];
}

async function ingestOne(file: string, name: string) {
  const lake = path.join(tmp.dir, name);
  const report = await runIngest([file], { lakeDir: lake, derived: false });
  const count = async (ds: string): Promise<number> => {
    if (!fs.existsSync(path.join(lake, ds))) return 0;
    return Number((await lakeRows(`SELECT count(*) AS n FROM read_parquet(${files(lake, ds)})`))[0]!.n);
  };
  return { lake, report, count };
}

const jsonFixtures = [
  ...fs
    .readdirSync(path.join(FIX, 'ws'))
    .filter((f) => /\.jsonl?$/.test(f))
    .map((f) => path.join(FIX, 'ws', f)),
  ...fs.readdirSync(path.join(FIX, 'rest')).map((f) => path.join(FIX, 'rest', f)),
];

describe('every websocket / REST fixture lands with the expected counts', () => {
  for (const file of jsonFixtures) {
    it(path.basename(file), async () => {
      const frames = framesOf(file);
      const msgs = frames.flat();
      const l2 = new Set(msgs.flatMap(l2Keys));
      const trades = new Set(msgs.filter((m) => m.event_type === 'last_trade_price').map((m) => [m.asset_id, m.timestamp, m.price, m.size, m.side].join('|')));
      const { report, count } = await ingestOne(file, path.basename(file));
      expect(report.failed).toBe(0);
      expect(report.ingested).toBe(1);
      expect(report.counts.messages).toBe(msgs.length);
      expect(report.counts.frames).toBe(frames.length);
      for (const t of ['book', 'price_change', 'last_trade_price', 'tick_size_change', 'best_bid_ask']) {
        expect(report.counts[`msg_${t}`] ?? 0, t).toBe(msgs.filter((m) => m.event_type === t).length);
      }
      expect(await count('l2')).toBe(l2.size);
      expect(await count('raw')).toBe(frames.length);
      const restTrades = file.includes('book_trades_prices_history') ? 3 : 0;
      expect(await count('last_trades')).toBe(trades.size + restTrades);
      expect(report.counts.unknown_event_types ?? 0).toBe(0);
    });
  }

  it('the database-export CSV: 3,829 messages, timestamps converted from +0100 to UTC, the repeated hash kept twice', async () => {
    const file = path.join(FIX, 'ws', '2025-01-25_price_change_v1_db_export.csv');
    const msgs = csvMessages(file);
    expect(msgs.length).toBe(3829);
    const l2 = new Set(msgs.flatMap(l2Keys));
    const { lake, report, count } = await ingestOne(file, 'csv');
    expect(report.failed).toBe(0);
    expect(report.counts.msg_price_change).toBe(3829);
    expect(await count('l2')).toBe(l2.size);
    expect(await count('raw')).toBe(3829);
    const first = await lakeRows(
      `SELECT strftime(ts, '%Y-%m-%d %H:%M:%S.%g') AS ts, price, size, side FROM read_parquet(${files(lake, 'l2')}) ORDER BY seq, level_idx LIMIT 1`,
    );
    // CSV row 1: 2025-01-25 18:15:47.925 +0100, SELL 300 @ 0.23
    expect(first[0]).toEqual({ ts: '2025-01-25 17:15:47.925', price: '0.230000', size: '300.000000', side: 'ask' });
    const dup = await lakeRows(
      `SELECT count(DISTINCT seq) AS n FROM read_parquet(${files(lake, 'l2')}) WHERE hash = '7945f7bceec5d3c888b32e07daed1dc99c03934f'`,
    );
    expect(Number(dup[0]!.n)).toBe(2);
  });

  it('wrapped messages take the wrapper timestamp as receive time; token ids stay exact strings', async () => {
    const file = path.join(FIX, 'ws', '2025-03-02_last_trade_price_wrapped.json');
    const wrapped = JSON.parse(fs.readFileSync(file, 'utf8')) as { timestamp: string; asset_id: string }[];
    const { lake } = await ingestOne(file, 'wrapped-recv');
    const rows = await lakeRows(`SELECT epoch_ms(recv_ts) AS r, asset_id FROM read_parquet(${files(lake, 'last_trades')}) ORDER BY seq`);
    const expected = [...wrapped].map((w) => ({ r: Number(w.timestamp), a: w.asset_id }));
    // recv_ts is the running maximum of wrapper times in file order (arrival cannot go backwards)
    let max = 0;
    const want = expected.map((e) => ((max = Math.max(max, e.r)), { r: max, asset_id: e.a }));
    expect(rows.map((r) => ({ r: Number(r.r), asset_id: r.asset_id }))).toEqual(want);
  });

  it('new-shape price_change: one message, two tokens, each with its own hash', async () => {
    const file = path.join(FIX, 'ws', '2026-08-14_frames_price_change_v2.jsonl');
    const { lake } = await ingestOne(file, 'v2');
    const rows = await lakeRows(
      `SELECT asset_id, hash, side, price, size, is_snapshot FROM read_parquet(${files(lake, 'l2')}) WHERE NOT is_snapshot ORDER BY level_idx`,
    );
    expect(rows).toEqual([
      {
        asset_id: '40600137944982070120020561148201046074034528738262880058756488608210871246278',
        hash: 'f3285de052f887d0ce2847581636a69c1046178d',
        side: 'bid',
        price: '0.060000',
        size: '374.340000',
        is_snapshot: false,
      },
      {
        asset_id: '79597156840177168343562124064866301094619106642263695929345529947536386203124',
        hash: 'bc67a217bd1f1f8625f2d099308ee758f95a772c',
        side: 'ask',
        price: '0.940000',
        size: '0.000000',
        is_snapshot: false,
      },
    ]);
  });

  it('unknown message types stay in the raw tape and are counted; a malformed JSONL line is named and skipped', async () => {
    const file = path.join(tmp.dir, 'odd.jsonl');
    const asset = '1234567890123456789012345678901234567890123456789012345678901234567890123';
    const MARKET = `0x${'ab'.repeat(32)}`;
    fs.writeFileSync(
      file,
      [
        JSON.stringify({ event_type: 'new_market', market: MARKET, timestamp: '1786728000000' }),
        '{"event_type": "book", "asset_id": "oops"',
        JSON.stringify({ event_type: 'book', asset_id: asset, market: MARKET, timestamp: '1786728001000', hash: 'h1', bids: [], asks: [] }),
        JSON.stringify({
          event_type: 'price_change',
          asset_id: asset,
          market: MARKET,
          timestamp: '1786728002000',
          hash: 'h2',
          changes: [{ price: 'x', side: 'BUY', size: '1' }],
        }),
      ].join('\n') + '\n',
    );
    const { lake, report } = await ingestOne(file, 'odd');
    expect(report.ingested).toBe(1);
    expect(report.counts.unknown_event_types).toBe(1);
    expect(report.issues).toContainEqual({ file, line: 2, message: 'malformed JSON line skipped' });
    expect(report.issues.some((i) => i.file === file && i.line === 4 && /level update/.test(i.message))).toBe(true);
    const raw = await lakeRows(`SELECT event_types FROM read_parquet(${files(lake, 'raw')}) ORDER BY seq`);
    expect(raw.map((r) => r.event_types)).toEqual([['new_market'], ['book'], ['price_change']]);
    // The empty book is one row with no side/price/size, so the lake records that the book was cleared.
    const l2 = await lakeRows(`SELECT side, price, size, is_snapshot FROM read_parquet(${files(lake, 'l2')})`);
    expect(l2).toEqual([{ side: null, price: null, size: null, is_snapshot: true }]);
  });

  it('a file that is not JSON at all is reported with its line and is not recorded as ingested', async () => {
    const file = path.join(tmp.dir, 'broken.json');
    fs.writeFileSync(file, '[\n  {"event_type": "book",\n  "asset_id": \n');
    const { report } = await ingestOne(file, 'broken');
    expect(report.ingested).toBe(0);
    expect(report.failed).toBe(1);
    expect(report.issues).toHaveLength(1);
    expect(report.issues[0]).toMatchObject({ file, line: 3 });
    expect(report.issues[0]!.message).toMatch(/not valid JSON/);
  });
});
