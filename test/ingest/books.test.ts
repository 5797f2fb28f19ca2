import fs from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { runIngest } from '../../ingest/run.js';
import { apply, csvMessages, d6, framesOf, lakeRows, replay, sorted, tempDir, type Book, type Msg } from './oracle.js';
import { files } from '../helpers/lake-files.js';

const FIX = path.resolve('test/fixtures/venue/ws');
const tmp = tempDir('pmlake-books-');
afterAll(() => tmp.cleanup());

type Level = { price: string; size: string };
type Row = Record<string, unknown>;

/**
 * The lake's book of every token at the end of the tape: its last stored snapshot, then every l2 row after
 * that snapshot applied in seq order (a `book` message replaces the book; size 0 removes a level).
 */
async function lakeBooksAtEnd(lake: string): Promise<Map<string, { bids: Level[]; asks: Level[] }>> {
  const snaps = await lakeRows(
    `SELECT asset_id, seq::VARCHAR AS seq, bids, asks FROM read_parquet(${files(lake, 'book_snapshots')})
     QUALIFY row_number() OVER (PARTITION BY asset_id ORDER BY seq DESC, reason) = 1`,
  );
  const out = new Map<string, { bids: Level[]; asks: Level[] }>();
  for (const s of snaps) {
    const book: Book = { bids: new Map(), asks: new Map() };
    for (const l of s.bids as Level[]) book.bids.set(l.price, l.size);
    for (const l of s.asks as Level[]) book.asks.set(l.price, l.size);
    const later = await lakeRows(
      `SELECT seq::VARCHAR AS seq, side, price, size, is_snapshot FROM read_parquet(${files(lake, 'l2')})
       WHERE asset_id = '${s.asset_id as string}' AND seq > ${s.seq as string} ORDER BY seq, level_idx`,
    );
    let lastSeq = '';
    for (const r of later) {
      if (r.is_snapshot && r.seq !== lastSeq) {
        book.bids.clear();
        book.asks.clear();
      }
      lastSeq = r.seq as string;
      if (r.side === null) continue;
      const side = r.side === 'bid' ? book.bids : book.asks;
      if (Number(r.size) === 0) side.delete(r.price as string);
      else side.set(r.price as string, r.size as string);
    }
    out.set(s.asset_id as string, { bids: sorted(book.bids, true), asks: sorted(book.asks, false) });
  }
  return out;
}

function expectedBooks(messages: Msg[]): Map<string, { bids: Level[]; asks: Level[] }> {
  const out = new Map<string, { bids: Level[]; asks: Level[] }>();
  for (const [id, b] of replay(messages)) out.set(id, { bids: sorted(b.bids, true), asks: sorted(b.asks, false) });
  return out;
}

async function topAtEnd(lake: string): Promise<Row[]> {
  return lakeRows(
    `SELECT asset_id, best_bid, best_bid_size, best_ask, best_ask_size FROM read_parquet(${files(lake, 'top_of_book')})
     QUALIFY row_number() OVER (PARTITION BY asset_id ORDER BY seq DESC) = 1 ORDER BY asset_id`,
  );
}

function expectedTop(books: Map<string, { bids: Level[]; asks: Level[] }>): Row[] {
  return [...books.entries()]
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([asset_id, b]) => ({
      asset_id,
      best_bid: b.bids[0]?.price ?? null,
      best_bid_size: b.bids[0]?.size ?? null,
      best_ask: b.asks[0]?.price ?? null,
      best_ask_size: b.asks[0]?.size ?? null,
    }));
}

describe('book reconstruction equals an independent replay', () => {
  it('ws/2025-03-02_book_price_change_v1.json: every token at the end, top of book, and every venue book snapshot', async () => {
    const file = path.join(FIX, '2025-03-02_book_price_change_v1.json');
    const lake = path.join(tmp.dir, 'v1');
    await runIngest([file], { lakeDir: lake, derived: false });
    const messages = framesOf(file).flat();
    const want = expectedBooks(messages);
    expect(want.size).toBe(12);
    const got = await lakeBooksAtEnd(lake);
    expect(new Map([...got].sort())).toEqual(new Map([...want].sort()));
    expect(await topAtEnd(lake)).toEqual(expectedTop(want));

    // Each `book` message yields a snapshot holding exactly its levels, best price first.
    const bookSnaps = await lakeRows(
      `SELECT asset_id, hash, bids, asks FROM read_parquet(${files(lake, 'book_snapshots')}) s
       JOIN (SELECT DISTINCT asset_id, seq, hash FROM read_parquet(${files(lake, 'l2')}) WHERE is_snapshot) USING (asset_id, seq)
       WHERE reason = 'book' ORDER BY seq`,
    );
    const books = messages.filter((m) => m.event_type === 'book');
    expect(bookSnaps).toHaveLength(books.length);
    for (const m of books) {
      const s = bookSnaps.find((r) => r.asset_id === m.asset_id && r.hash === m.hash)!;
      const bids = (m.bids as Level[]).map((l) => ({ price: d6(l.price), size: d6(l.size) })).reverse();
      const asks = (m.asks as Level[]).map((l) => ({ price: d6(l.price), size: d6(l.size) })).reverse();
      expect(s.bids).toEqual(bids);
      expect(s.asks).toEqual(asks);
    }
  });

  it('the database-export CSV: the book at the end and every one-minute snapshot', async () => {
    const file = path.join(FIX, '2025-01-25_price_change_v1_db_export.csv');
    const lake = path.join(tmp.dir, 'csv');
    await runIngest([file], { lakeDir: lake, derived: false, snapshotSeconds: 60 });
    const messages = csvMessages(file);
    const want = expectedBooks(messages);
    expect(want.size).toBe(1);
    expect(await lakeBooksAtEnd(lake)).toEqual(want);
    expect(await topAtEnd(lake)).toEqual(expectedTop(want));

    // Interval snapshots: at boundary B the book holds every message received before B (receive time =
    // running max of venue time in arrival order), and one is written only if the book changed since the last.
    const snaps = await lakeRows(
      `SELECT epoch_ms(ts) AS b, bids, asks FROM read_parquet(${files(lake, 'book_snapshots')}) WHERE reason = 'interval' ORDER BY ts`,
    );
    expect(snaps.length).toBeGreaterThan(50);
    const expected: { b: number; bids: Level[]; asks: Level[] }[] = [];
    let recv = 0;
    const live = new Map<string, Book>();
    let lastChange = -1;
    let lastSnap = -1;
    const state = (): { bids: Level[]; asks: Level[] } => {
      const [b] = [...live.values()];
      return { bids: sorted(b!.bids, true), asks: sorted(b!.asks, false) };
    };
    let prev = '';
    for (const m of messages) {
      recv = Math.max(recv, Number(m.timestamp));
      if (lastChange >= 0 && lastChange > lastSnap && Math.floor(recv / 60000) > Math.floor(lastChange / 60000)) {
        const b = (Math.floor(lastChange / 60000) + 1) * 60000;
        expected.push({ b, ...state() });
        lastSnap = b;
      }
      apply(live, m);
      const now = JSON.stringify(state());
      if (now !== prev) lastChange = recv;
      prev = now;
    }
    expect(snaps.map((s) => ({ b: Number(s.b), bids: s.bids, asks: s.asks }))).toEqual(expected);
  });

  it('books carry across batches and chunks: halves ingested separately, or one file in many chunks and batches, give the same rows as the whole', async () => {
    const messages = csvMessages(path.join(FIX, '2025-01-25_price_change_v1_db_export.csv'));
    let cut = Math.floor(messages.length / 2);
    while (messages[cut]!.timestamp === messages[cut - 1]!.timestamp) cut += 1;
    const write = (name: string, ms: Msg[]): string => {
      const f = path.join(tmp.dir, name);
      fs.writeFileSync(f, ms.map((m) => JSON.stringify(m)).join('\n') + '\n');
      return f;
    };
    const whole = write('whole.jsonl', messages);
    const first = write('first.jsonl', messages.slice(0, cut));
    const second = write('second.jsonl', messages.slice(cut));
    const lakeA = path.join(tmp.dir, 'whole');
    const lakeB = path.join(tmp.dir, 'halves');
    await runIngest([whole], { lakeDir: lakeA, derived: false });
    await runIngest([first], { lakeDir: lakeB, derived: false });
    await runIngest([second], { lakeDir: lakeB, derived: false });
    // The whole file again, staged in ~100 KB chunks with a batch flushed every ~1,500 staged rows.
    const lakeC = path.join(tmp.dir, 'chunked');
    process.env.PMLAKE_TAPE_CHUNK_BYTES = '100000';
    try {
      const r = await runIngest([whole], { lakeDir: lakeC, derived: false, batchRows: 1500 });
      expect(r.counts.tape_chunks).toBeGreaterThan(5);
      expect(r.batches).toBeGreaterThan(3);
    } finally {
      delete process.env.PMLAKE_TAPE_CHUNK_BYTES;
    }
    for (const ds of ['book_snapshots', 'top_of_book', 'l2', 'raw']) {
      const q = (lake: string): Promise<Row[]> =>
        lakeRows(`SELECT * EXCLUDE (date) FROM read_parquet(${files(lake, ds)}, hive_partitioning = true) ORDER BY ALL`);
      const [a, b, c] = [await q(lakeA), await q(lakeB), await q(lakeC)];
      expect(a.length, ds).toBeGreaterThan(0);
      expect(c, `${ds} chunked`).toEqual(a);
      if (ds === 'raw') continue; // the halves are other files: their frames are the same, line for line
      expect(b.length, ds).toBe(a.length);
      expect(b, ds).toEqual(a);
    }
  });
});
