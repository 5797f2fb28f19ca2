import fs from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { runIngest } from '../../ingest/run.js';
import { files } from '../helpers/lake-files.js';
import { lakeRows, tempDir } from './oracle.js';

/**
 * A batch cut between a last_trade_price and the `book` the venue answers it with (the next line): the book's checkpoint compares it with the replayed book minus that trade, whichever batch landed the
 * trade. Ingested in one batch and in one batch per file, the lake holds the same checkpoints, incidents and l2.
 */
const tmp = tempDir('pmlake-trade-cut-');
afterAll(() => tmp.cleanup());

const T0 = Date.parse('2025-09-10T12:00:00Z');
const TOKEN = '1001';
const MARKET = `0x${'aa'.repeat(32)}`;
const lv = (price: string, size: string) => ({ price, size });
const book = (ms: number, hash: string, asks: { price: string; size: string }[]) =>
  JSON.stringify({ event_type: 'book', market: MARKET, asset_id: TOKEN, timestamp: String(ms), hash, bids: [lv('0.4', '100')], asks });
const first = [
  book(T0, 'h1', [lv('0.6', '50')]),
  JSON.stringify({
    event_type: 'price_change',
    market: MARKET,
    asset_id: TOKEN,
    timestamp: String(T0 + 1000),
    hash: 'h2',
    changes: [{ price: '0.5', side: 'SELL', size: '30' }],
  }),
  // The taker takes all of 0.5: the venue's next book has no 0.5 ask.
  JSON.stringify({
    event_type: 'last_trade_price',
    market: MARKET,
    asset_id: TOKEN,
    timestamp: String(T0 + 2000),
    price: '0.5',
    side: 'BUY',
    size: '30',
    fee_rate_bps: '0',
    transaction_hash: `0x${'bb'.repeat(32)}`,
  }),
];
// The next file: a later millisecond (two files sharing one would give two messages one seq).
const second = [book(T0 + 2500, 'h3', [lv('0.6', '50')]), book(T0 + 3000, 'h4', [lv('0.6', '50')])];

/** Rows of a data set (none when it has no file: a lake without incidents writes none). */
async function rows(lake: string, set: string, cols: string): Promise<unknown[]> {
  const list = files(lake, set);
  return list === '[]' ? [] : lakeRows(`SELECT ${cols} FROM read_parquet(${list}, union_by_name = true) ORDER BY ALL`);
}

async function content(lake: string): Promise<Record<string, unknown[]>> {
  return {
    checkpoints: await rows(lake, 'checkpoints', 'asset_id, seq::VARCHAR AS seq, kind, ok'),
    incidents: await rows(lake, 'incidents', 'asset_id, kind, seq::VARCHAR AS seq, detail'),
    l2: await rows(lake, 'l2', 'asset_id, seq::VARCHAR AS seq, level_idx, side, price::VARCHAR AS price, size::VARCHAR AS size, after_gap'),
  };
}

describe('a batch cut between a trade and the book answering it', () => {
  it('lands the checkpoints, incidents and l2 of one batch', async () => {
    const inputs = [first, second].map((lines, i) => {
      const f = path.join(tmp.dir, `tape-${i}.jsonl`);
      fs.writeFileSync(f, lines.join('\n') + '\n');
      return f;
    });
    const one = path.join(tmp.dir, 'one');
    const each = path.join(tmp.dir, 'each');
    expect((await runIngest(inputs, { lakeDir: one, derived: false })).batches).toBe(1);
    expect((await runIngest(inputs, { lakeDir: each, derived: false, batchRows: 1 })).batches).toBe(2);
    const a = await content(one);
    // The trade explains the missing 0.5 ask: both books pass, no gap.
    expect(a.checkpoints.map((r) => (r as { ok: boolean }).ok)).toEqual([true, true]);
    expect(a.incidents).toEqual([]);
    expect(await content(each)).toEqual(a);
  }, 60_000);
});
