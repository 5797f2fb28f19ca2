import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { runIngest } from '../../ingest/run.js';
import { captureRows, writeArchiveFile, type ArchiveRow } from '../../sim/generate/archive.js';
import { files } from '../helpers/lake-files.js';
import { lakeRows, tempDir } from './oracle.js';

/**
 * Identifiers from outside, in the public archive's hourly Parquet (lake/README.md, "What the ingest accepts"): rows
 * whose asset_id is 100,000 digits, not a number, 79 digits or 78 digits above 2^256 − 1, and rows under a market that
 * is no condition id, in a file of good rows. Each is an issue naming the file and its file row; no data set (raw's
 * rebuilt messages included) names it; every good row lands.
 */
const tmp = tempDir('pmlake-ident-archive-');
afterAll(() => tmp.cleanup());
const FIX = path.resolve('test/fixtures/venue/ws/2025-03-02_book_price_change_v1.json');

const tokenOk = (x: string): boolean => /^[0-9]{1,78}$/.test(x) && BigInt(x) < 2n ** 256n;
const conditionOk = (x: string): boolean => /^0x[0-9a-fA-F]{64}$/.test(x);

const HUGE = '1'.repeat(100_000);
const WORDS = 'abc';
const LONG = '9'.repeat(79);
const OVER = (2n ** 256n).toString();
const MAX = (2n ** 256n - 1n).toString();
const BAD_M = `0x${'zz'.repeat(32)}`;

/** Level updates the tape holds for rows: a book's levels (one marker row when empty), a price_change row each. */
function levels(rows: ArchiveRow[]): number {
  let n = 0;
  for (const r of rows) {
    if (r.event_type === 'price_change') n += 1;
    else if (r.event_type === 'book') n += Math.max(1, (JSON.parse(r.bids ?? '[]') as unknown[]).length + (JSON.parse(r.asks ?? '[]') as unknown[]).length);
  }
  return n;
}

describe('identifiers in archive files', () => {
  it('rows naming a bad token or market are issues with their file row, land nowhere, and the good rows land', async () => {
    const base = [...captureRows([FIX])];
    const pc = base.find((r) => r.event_type === 'price_change')!;
    const bk = base.find((r) => r.event_type === 'book')!;
    const trade: ArchiveRow = {
      ...pc,
      event_type: 'last_trade_price',
      price: '0.5',
      size: '1',
      side: 'BUY',
      fee_rate_bps: 0,
      transaction_hash: `0x${'12'.repeat(32)}`,
    };
    const bad: ArchiveRow[] = [
      { ...pc, asset_id: HUGE },
      { ...bk, asset_id: WORDS },
      { ...trade, asset_id: LONG },
      { ...pc, asset_id: OVER },
      { ...pc, market: BAD_M },
      { ...bk, market: BAD_M },
    ];
    const good: ArchiveRow[] = [...base, { ...pc, asset_id: MAX }];
    const all = [...good, ...bad];
    const file = path.join(tmp.dir, 'polymarket_orderbook_2025-03-02T09.parquet');
    await writeArchiveFile(all, file);
    const lake = path.join(tmp.dir, 'lake');
    const r = await runIngest([file], { lakeDir: lake, threads: 1 });
    expect(r.failed).toBe(0);

    // The file's order (the archive's sort, as the writer sorts): a bad value's first file row, 0-based.
    const order = all.map((row, ord) => ({ row, ord }));
    const cmp = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);
    order.sort(
      (a, b) =>
        cmp(a.row.market, b.row.market) ||
        cmp(a.row.asset_id ?? '', b.row.asset_id ?? '') ||
        a.row.timestamp_received - b.row.timestamp_received ||
        a.ord - b.ord,
    );
    const firstRow = (p: (row: ArchiveRow) => boolean): number => order.findIndex((x) => p(x.row));
    const refused = r.issues.filter((i) => i.message.includes('skipped; first at file row'));
    const rowsNamed = refused.map((i) => ({ file: i.file, row: Number(/file row (\d+)$/.exec(i.message)?.[1]) }));
    for (const v of [HUGE, WORDS, LONG, OVER]) expect(rowsNamed, v.slice(0, 10)).toContainEqual({ file, row: firstRow((x) => x.asset_id === v) });
    expect(rowsNamed).toContainEqual({ file, row: firstRow((x) => x.market === BAD_M) });
    expect(refused).toHaveLength(5);
    expect(r.issues).toHaveLength(5);
    for (const i of r.issues) expect(i.message.length).toBeLessThan(400);

    // Every good row landed, no bad one: l2 as the good rows give it.
    expect(r.counts.level_updates).toBe(levels(good));
    const goodTokens = [...new Set(good.map((x) => x.asset_id!))].sort();
    const goodMarkets = [...new Set(good.map((x) => x.market))].sort();
    expect(goodTokens.every(tokenOk) && goodMarkets.every(conditionOk)).toBe(true);
    const l2 = await lakeRows(`SELECT count(*) AS n FROM read_parquet(${files(lake, 'l2')}, hive_partitioning = false)`);
    expect(Number(l2[0]!.n)).toBe(levels(good));
    for (const [dir, col] of [
      ['l2', 'asset_id'],
      ['book_snapshots', 'asset_id'],
      ['top_of_book', 'asset_id'],
      ['coverage', 'asset_id'],
      ['catalog/tokens', 'token_id'],
    ] as const) {
      const rows = await lakeRows(`SELECT DISTINCT ${col} AS t, condition_id AS c FROM read_parquet(${files(lake, dir)}, hive_partitioning = false)`);
      for (const x of rows) expect(goodTokens, dir).toContain(x.t);
      for (const x of rows) expect(goodMarkets, dir).toContain(x.c);
      // A token whose only row is a price_change has no book to snapshot.
      if (!['book_snapshots', 'top_of_book'].includes(dir)) expect(rows.map((x) => x.t).sort(), dir).toEqual(goodTokens);
    }
    // The one trade row named a bad token: no last_trades at all.
    expect(good.some((x) => x.event_type === 'last_trade_price')).toBe(false);
    expect(files(lake, 'last_trades')).toBe('[]');
    const markets = await lakeRows(`SELECT condition_id FROM read_parquet(${files(lake, 'catalog/markets')}) ORDER BY 1`);
    expect(markets.map((x) => x.condition_id)).toEqual(goodMarkets);

    // raw holds the messages rebuilt from the good rows only: one per row (a price_change row each, a book, a trade).
    const raw = await lakeRows(
      `SELECT count(*) AS n, max(strlen(frame)) AS longest, list_distinct(flatten(list(condition_ids))) AS c FROM read_parquet(${files(lake, 'raw')})`,
    );
    expect(Number(raw[0]!.n)).toBe(good.length);
    expect(Number(raw[0]!.longest)).toBeLessThan(10_000);
    expect((raw[0]!.c as string[]).sort()).toEqual(goodMarkets);
  });
});
