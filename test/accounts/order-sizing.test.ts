import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DuckDBInstance } from '@duckdb/node-api';
import { generate } from '../../sim/generate/index.js';
import { runIngest } from '../../ingest/run.js';
import { openLakeDb } from '../../src/lake/duckdb.js';
import { LakeSession } from '../../src/lake/session.js';
import { sizeItem, type ItemSelector, type OrderDataType } from '../../src/accounts/order-sizing.js';
import { buildAccountsLake } from '../helpers/accounts-lake.js';
import { files } from '../helpers/lake-files.js';

/**
 * Order sizing (the legacy credit model's row counts) on a real ingested lake, for every data type, market and
 * series items, ohlcv at each orderable timeframe and windows open or closed on either side, against counts
 * made in JavaScript from the rows themselves; and on a lake from before versions (the accounts tests' lake)
 * where some data sets have no file at all.
 */
type Win = { start?: string | null; end?: string | null };

describe('order sizing', () => {
  // Not helpers/server's tempDir: this test needs no server, so it does not load the HTTP layer.
  const tmp = { dir: fs.mkdtempSync(path.join(os.tmpdir(), 'pmlake-osize-')), cleanup: (): void => fs.rmSync(tmp.dir, { recursive: true, force: true }) };
  const lakeDir = path.join(tmp.dir, 'lake');
  const oldLake = path.join(tmp.dir, 'old-lake');
  let db: DuckDBInstance;
  let ref: DuckDBInstance;
  /** Per data type: [token, epoch µs] of every row. */
  const rows = new Map<OrderDataType, Array<[string, number]>>();
  let markets: Array<{ id: string; series: string | null; tokens: string[] }>;

  const read = async (sql: string): Promise<Record<string, unknown>[]> => {
    const conn = await ref.connect();
    try {
      return (await conn.runAndReadAll(sql)).getRowObjectsJS() as Record<string, unknown>[];
    } finally {
      conn.closeSync();
    }
  };

  beforeAll(async () => {
    const gen = path.join(tmp.dir, 'gen');
    await generate({ markets: 6, days: 3, seed: 11, out: gen, workers: 0, rate: 0.3 });
    await runIngest([gen], { lakeDir, threads: 2 });
    await buildAccountsLake(oldLake, { trades: 700, books: 300 });
    db = await openLakeDb({ allowedDirectories: [tmp.dir], threads: 2 });
    ref = await DuckDBInstance.create(':memory:', { threads: '2' });
    const sets: Record<OrderDataType, [string, string, string]> = {
      trades: ['trades', 'token_id', 'ts'],
      ohlcv: ['candles_1m', 'token_id', 'bucket'],
      orderbook: ['book_snapshots', 'asset_id', 'ts'],
      snapshots: ['top_of_book', 'asset_id', 'ts'],
    };
    for (const [t, [dir, tok, time]] of Object.entries(sets) as [OrderDataType, [string, string, string]][]) {
      const r = await read(`SELECT ${tok} AS t, epoch_us(${time}) AS us FROM read_parquet(${files(lakeDir, dir)})`);
      rows.set(
        t,
        r.map((x) => [String(x.t), Number(x.us)]),
      );
    }
    markets = (await read(`SELECT id, series_id, outcome_token_ids FROM read_parquet(${files(lakeDir, 'catalog/markets')}) ORDER BY id`)).map((m) => ({
      id: String(m.id),
      series: m.series_id === null ? null : String(m.series_id),
      tokens: (m.outcome_token_ids as string[]).map(String),
    }));
  });
  afterAll(() => {
    db?.closeSync();
    ref?.closeSync();
    tmp.cleanup();
  });

  const STEP_S = { '1m': 60, '1h': 3600, '1d': 86_400 } as const;

  /** The expected count, from the rows: tokens of the item, [start, end) at millisecond precision as ordered. */
  function expected(t: OrderDataType, sel: ItemSelector, w: Win, tf: keyof typeof STEP_S = '1h'): number {
    const ms = markets.filter((m) => ('marketId' in sel ? m.id === sel.marketId : m.series === sel.seriesId));
    const tokens = new Set(ms.flatMap((m) => m.tokens));
    const lo = w.start ? Date.parse(w.start) * 1000 : -Infinity;
    const hi = w.end ? Date.parse(w.end) * 1000 : Infinity;
    const hits = rows.get(t)!.filter(([tok, us]) => tokens.has(tok) && us >= lo && us < hi);
    if (t !== 'ohlcv') return hits.length;
    // What the legacy sizing has always answered: its bucket number `epoch(bucket) // step` is a DOUBLE, and
    // DuckDB's `//` on a DOUBLE does not floor, so every stored minute candle counts whatever the timeframe.
    // Pinned here so that moving the SQL changes no price; `floored` is what the timeframe suggests.
    void tf;
    return new Set(hits.map(([tok, us]) => `${tok}|${us}`)).size;
  }
  function floored(sel: ItemSelector, tf: keyof typeof STEP_S): number {
    const tokens = new Set(markets.filter((m) => 'marketId' in sel && m.id === sel.marketId).flatMap((m) => m.tokens));
    return new Set(
      rows
        .get('ohlcv')!
        .filter(([tok]) => tokens.has(tok))
        .map(([tok, us]) => `${tok}|${Math.floor(us / 1e6 / STEP_S[tf])}`),
    ).size;
  }

  it('counts what each item would deliver, for every type, selector, timeframe and window', async () => {
    const trades = rows.get('trades')!;
    expect(trades.length).toBeGreaterThan(100);
    const us = trades.map(([, u]) => u).sort((a, b) => a - b);
    // Window edges inside the data, with sub-second digits, as the orders endpoint sends them (ISO with Z).
    const at = (f: number) => new Date(Math.floor(us[Math.floor(f * (us.length - 1))]! / 1000) + 123).toISOString();
    const windows: Win[] = [{}, { start: at(0.3) }, { end: at(0.6) }, { start: at(0.2), end: at(0.7) }, { start: at(0.45), end: at(0.45) }];
    const busy = [...markets].sort((a, b) => expected('trades', { marketId: b.id }, {}) - expected('trades', { marketId: a.id }, {}))[0]!;
    const series = markets.find((m) => m.series !== null && markets.filter((x) => x.series === m.series).length > 1)?.series ?? busy.series;
    const sels: ItemSelector[] = [{ marketId: busy.id }, ...(series ? [{ seriesId: series }] : [])];
    expect(sels).toHaveLength(2);
    let nonZero = 0;
    for (const sel of sels) {
      for (const w of windows) {
        for (const t of ['trades', 'orderbook', 'snapshots'] as const) {
          const got = await sizeItem(new LakeSession(db, lakeDir), t, sel, w);
          expect(got, `${t} ${JSON.stringify(sel)} ${JSON.stringify(w)}`).toBe(expected(t, sel, w));
          if (got! > 0) nonZero++;
        }
        for (const tf of [undefined, '1m', '1h', '1d'] as const) {
          const got = await sizeItem(new LakeSession(db, lakeDir), 'ohlcv', sel, w, tf);
          expect(got, `ohlcv ${tf} ${JSON.stringify(sel)} ${JSON.stringify(w)}`).toBe(expected('ohlcv', sel, w, tf ?? '1h'));
        }
      }
    }
    // The checks have teeth: most answers are not zero. Every timeframe counts the minute candles (see
    // `expected`), which a floored bucket number would not.
    expect(nonZero).toBeGreaterThan(sels.length * 9);
    const perTf = await Promise.all((['1m', '1h', '1d'] as const).map((tf) => sizeItem(new LakeSession(db, lakeDir), 'ohlcv', { marketId: busy.id }, {}, tf)));
    expect(perTf).toEqual([floored({ marketId: busy.id }, '1m'), floored({ marketId: busy.id }, '1m'), floored({ marketId: busy.id }, '1m')]);
    expect(floored({ marketId: busy.id }, '1h')).toBeLessThan(perTf[1]!);
  });

  it('null for a market or series the catalogue lacks; 0 for a market without rows', async () => {
    expect(await sizeItem(new LakeSession(db, lakeDir), 'trades', { marketId: '999999999' }, {})).toBeNull();
    expect(await sizeItem(new LakeSession(db, lakeDir), 'ohlcv', { seriesId: 'no-such-series' }, {})).toBeNull();
    const quiet = markets.find((m) => expected('trades', { marketId: m.id }, {}) === 0);
    if (quiet) expect(await sizeItem(new LakeSession(db, lakeDir), 'trades', { marketId: quiet.id }, {})).toBe(0);
    expect(await sizeItem(new LakeSession(db, path.join(tmp.dir, 'no-lake')), 'trades', { marketId: markets[0]!.id }, {})).toBeNull();
  });

  it('a lake from before versions: counted from its files; a data set without files counts 0', async () => {
    expect(await sizeItem(new LakeSession(db, oldLake), 'trades', { marketId: '1001' }, {})).toBe(700);
    expect(
      await sizeItem(new LakeSession(db, oldLake), 'trades', { seriesId: 's1' }, { start: '2025-01-01T01:00:00.000Z', end: '2025-01-01T02:00:00.000Z' }),
    ).toBe(60);
    expect(await sizeItem(new LakeSession(db, oldLake), 'orderbook', { marketId: '1001' }, { end: '2025-01-01T00:01:00.000Z' })).toBe(60);
    expect(await sizeItem(new LakeSession(db, oldLake), 'trades', { marketId: '1002' }, {})).toBe(0);
    expect(await sizeItem(new LakeSession(db, oldLake), 'snapshots', { marketId: '1001' }, {})).toBe(0);
    expect(await sizeItem(new LakeSession(db, oldLake), 'ohlcv', { marketId: '1001' }, {}, '1m')).toBe(0);
    expect(await sizeItem(new LakeSession(db, oldLake), 'trades', { marketId: '1003' }, {})).toBeNull();
  });
});
