import fs from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { generate } from '../../sim/generate/index.js';
import { runIngest } from '../../ingest/run.js';
import { expectedCandles, expectedTrades, query, tempDir } from './fills-oracle.js';
import { currentFiles, currentVersion } from '../../src/lake/versions.js';
import { VersionDraft } from '../../ingest/versions.js';
import { files } from '../helpers/lake-files.js';

const FILLS = path.resolve('test/fixtures/fills');
// Three files whose trades share minutes (09:20 UTC on 2026-03-12), ingested one run at a time.
const FILES = ['order_filled_synthetic.jsonl', 'order_filled_camel.json', 'goldsky_order_filled.csv'].map((f) => path.join(FILLS, f));

const tmp = tempDir('pmlake-candles-');
afterAll(() => tmp.cleanup());

async function lakeCandles(lake: string, dataset: 'candles_1m' | 'candles_1h' = 'candles_1m') {
  return query(`SELECT token_id, strftime(bucket, '%Y-%m-%d %H:%M:%S') AS bucket, open, high, low, close, volume, usd_volume,
                       trade_count::INTEGER AS trade_count
                FROM read_parquet(${files(lake, dataset)}) ORDER BY token_id || strftime(bucket, '%Y-%m-%d %H:%M:%S')`);
}

describe('candles_1m', () => {
  it('equal an independent computation after each of three ingests touching the same minute', async () => {
    const lake = path.join(tmp.dir, 'lake');
    const seen: string[] = [];
    for (const file of FILES) {
      seen.push(file);
      const report = await runIngest([file], { lakeDir: lake });
      expect(report.ingested).toBe(1);
      const want = expectedCandles(seen.flatMap(expectedTrades));
      expect(await lakeCandles(lake)).toEqual(want);
      expect(await lakeCandles(lake, 'candles_1h')).toEqual(expectedCandles(seen.flatMap(expectedTrades), 3600));
    }
    // The shared minute really was rebuilt from all three files (otherwise the test proves little).
    const shared = expectedCandles(FILES.flatMap(expectedTrades)).find((c) => c.trade_count >= 4);
    expect(shared).toBeDefined();
  });

  it('one batch of all files gives the same candles as three runs, and re-ingest changes nothing', async () => {
    const lake = path.join(tmp.dir, 'one');
    await runIngest(FILES, { lakeDir: lake });
    const want = expectedCandles(FILES.flatMap(expectedTrades));
    expect(await lakeCandles(lake)).toEqual(want);
    const version = currentVersion(lake).version;
    const lakeFiles = currentFiles(lake, 'candles_1m');
    const mtimes = lakeFiles.map((f) => fs.statSync(f).mtimeMs);
    // Same trades under a new content hash: the recomputed candles equal the stored ones, so nothing is written.
    const copy = path.join(tmp.dir, 'copy.json');
    fs.writeFileSync(copy, `${fs.readFileSync(FILES[1]!, 'utf8')}\n`);
    const again = await runIngest([copy], { lakeDir: lake });
    expect(again.ingested).toBe(1);
    expect(again.rows_added.candles_1m ?? 0).toBe(0);
    // Nothing changed, so no version was published and the candle files are the same files, untouched.
    expect(again.versions_published).toEqual([]);
    expect(currentVersion(lake).version).toBe(version);
    expect(currentFiles(lake, 'candles_1m')).toEqual(lakeFiles);
    expect(lakeFiles.map((f) => fs.statSync(f).mtimeMs)).toEqual(mtimes);
    expect(await lakeCandles(lake)).toEqual(want);
  });

  it('candles_1h: hours of generated trades equal the trades bucketed by hour; a lake without them is backfilled', async () => {
    const lake = path.join(tmp.dir, 'hourly');
    await runIngest(FILES, { lakeDir: lake });
    // A lake from before candles_1h: its minute candles stay, its hourly files are gone (a version without them).
    const old = new VersionDraft(lake);
    old.retire(
      'candles_1h',
      old.entries('candles_1h').map((e) => e.path),
    );
    old.publish('ingest', {}, []);
    expect(currentFiles(lake, 'candles_1h')).toEqual([]);
    // Generated fills: other tokens, other months, many trades per hour.
    const gen = path.join(tmp.dir, 'gen');
    await generate({ markets: 6, days: 2, seed: 11, out: gen, workers: 0 });
    const genFills = fs.readdirSync(path.join(gen, 'fills')).map((f) => path.join(gen, 'fills', f));
    const report = await runIngest(genFills, { lakeDir: lake });
    expect(report.counts.candles_1h_backfilled_months).toBe(1);
    const trades = [...FILES, ...genFills].flatMap(expectedTrades);
    const want = expectedCandles(trades, 3600);
    // Several trades per hour somewhere, so the rollup's open/close/high/low choice is really exercised.
    expect(want.some((c) => c.trade_count >= 5)).toBe(true);
    expect(await lakeCandles(lake, 'candles_1h')).toEqual(want);
    expect(await lakeCandles(lake)).toEqual(expectedCandles(trades));
  });

  it('a month too large for one pass is derived in token buckets, each day against the lake, with the same candles', async () => {
    const lake = path.join(tmp.dir, 'chunked');
    const gen = path.join(tmp.dir, 'gen-chunked');
    await generate({ markets: 6, days: 2, seed: 11, out: gen, workers: 0 });
    const days = fs
      .readdirSync(path.join(gen, 'fills'))
      .sort()
      .map((f) => path.join(gen, 'fills', f));
    const seen: string[] = [];
    for (const day of days) {
      seen.push(day);
      // 200 trades a chunk: the second day's month (its trades plus the first day's in the lake) takes many buckets.
      const report = await runIngest([day], { lakeDir: lake, candleChunkRows: 200 });
      expect(report.counts.candle_chunks).toBeGreaterThan(4);
      const trades = seen.flatMap(expectedTrades);
      expect(await lakeCandles(lake)).toEqual(expectedCandles(trades));
      expect(await lakeCandles(lake, 'candles_1h')).toEqual(expectedCandles(trades, 3600));
    }
    // The first day again under another content hash: every minute it touches is recomputed from the lake's
    // trades (found again, de-duplicated) in buckets, and comes out the same.
    const copy = path.join(tmp.dir, 'day-again.jsonl');
    fs.writeFileSync(copy, `${fs.readFileSync(days[0]!, 'utf8')}\n`);
    const again = await runIngest([copy], { lakeDir: lake, candleChunkRows: 200 });
    expect(again.ingested).toBe(1);
    expect(again.counts.candle_chunks).toBeGreaterThanOrEqual(Math.ceil((2 * expectedTrades(days[0]!).length) / 200));
    expect(again.rows_added.candles_1m ?? 0).toBe(0);
    const trades = seen.flatMap(expectedTrades);
    expect(await lakeCandles(lake)).toEqual(expectedCandles(trades));
    expect(await lakeCandles(lake, 'candles_1h')).toEqual(expectedCandles(trades, 3600));
  });
});
