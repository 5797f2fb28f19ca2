import fs from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { runIngest } from '../../ingest/run.js';
import { lakeRows, tempDir } from './oracle.js';
import { fileIntegrity, micro, replayIntegrity, tapeMessages, type Integrity } from './integrity-oracle.js';
import { files } from '../helpers/lake-files.js';

/**
 * Tape integrity on the real venue captures (issue 15): every capture in test/fixtures/venue/ws/ (a copy of
 * shared/fixtures/venue/ws/) is ingested alone into an empty lake by the real ingest, and the `book`
 * checkpoints and `gap` / `top_mismatch` incidents read back from the Parquet must equal what the independent
 * replay in integrity-oracle.ts computes from the file — checkpoint by checkpoint (token, seq, ok), and the
 * levels a failing one lists.
 *
 * PINNED holds the oracle's counts per file, computed once and written here, so that a change in either the
 * oracle or the ingest shows. Every `book` in these captures is its token's first one (nothing to compare)
 * except one: in 2025-03-02_book_price_change_v1.json token 83156492… gets a second book 17 s after its
 * first, and it differs from the replay at one level (bid 0.002: 3621474.03 replayed, 3621472.28 in the
 * venue's book — a 1.75-share sell at the best bid, which the venue sends only as that `book`; the capture
 * holds no last_trade_price). The only new-shape price_change (2026-08-14) names two tokens with no book
 * before it, so it makes no `top` check.
 */
const PINNED: Record<string, { book: { passed: number; failed: number }; top: { passed: number; failed: number }; firstBooks: number }> = {
  '2024-08-25_last_trade_price.json': { book: { passed: 0, failed: 0 }, top: { passed: 0, failed: 0 }, firstBooks: 0 },
  '2024-10-13_book_deep.json': { book: { passed: 0, failed: 0 }, top: { passed: 0, failed: 0 }, firstBooks: 1 },
  '2025-01-21_book.json': { book: { passed: 0, failed: 0 }, top: { passed: 0, failed: 0 }, firstBooks: 1 },
  '2025-01-21_price_change_v1.json': { book: { passed: 0, failed: 0 }, top: { passed: 0, failed: 0 }, firstBooks: 0 },
  '2025-01-25_price_change_v1_db_export.csv': { book: { passed: 0, failed: 0 }, top: { passed: 0, failed: 0 }, firstBooks: 0 },
  '2025-02-09_tick_size_change.json': { book: { passed: 0, failed: 0 }, top: { passed: 0, failed: 0 }, firstBooks: 0 },
  '2025-02-27_initial_books.json': { book: { passed: 0, failed: 0 }, top: { passed: 0, failed: 0 }, firstBooks: 24 },
  '2025-03-02_book_price_change_v1.json': { book: { passed: 0, failed: 1 }, top: { passed: 0, failed: 0 }, firstBooks: 12 },
  '2025-03-02_last_trade_price_wrapped.json': { book: { passed: 0, failed: 0 }, top: { passed: 0, failed: 0 }, firstBooks: 0 },
  '2026-08-14_frames_price_change_v2.jsonl': { book: { passed: 0, failed: 0 }, top: { passed: 0, failed: 0 }, firstBooks: 1 },
};

/**
 * The same real captures across files: the 2025-02-27 subscription books, then (a separate batch) the 2025-03-02
 * capture of 12 of those tokens. Every 2025-03-02 book is now compared with the replay carried over from
 * 2025-02-27 (the capture missed the 2.5 days between: all 12 differ), plus the in-file one: 13 failing, 0 passing.
 */
const ACROSS = ['2025-02-27_initial_books.json', '2025-03-02_book_price_change_v1.json'];
const ACROSS_PINNED = { passed: 0, failed: 13 };

const WS = path.resolve('test/fixtures/venue/ws');
const captures = fs.readdirSync(WS).sort();
const tmp = tempDir('pmlake-integrity-fx-');
afterAll(() => tmp.cleanup());

/** Rows of a data set of the lake, or none when the lake has no file of it. */
async function rowsOf(lake: string, dir: string, sql: (from: string) => string): Promise<Record<string, unknown>[]> {
  let list: string;
  try {
    list = files(lake, dir);
  } catch {
    return [];
  }
  if (list === '[]') return [];
  return lakeRows(sql(`read_parquet(${list}, union_by_name = true)`));
}

const decText = (v: bigint): string => {
  const i = v / 1_000_000n;
  const f = (v % 1_000_000n).toString().padStart(6, '0').replace(/0+$/, '');
  return f ? `${i}.${f}` : String(i);
};

describe('book checkpoints on the real captures equal an independent replay', () => {
  it('pins the oracle: every capture is listed with its counts', () => {
    expect(captures).toEqual(Object.keys(PINNED).sort());
    for (const f of captures) {
      const o = fileIntegrity(path.join(WS, f));
      expect({ book: o.book, top: o.top, firstBooks: o.firstBooks }, f).toEqual(PINNED[f]);
    }
  });

  for (const f of captures) {
    it(f, async () => {
      const oracle: Integrity = fileIntegrity(path.join(WS, f));
      const lake = path.join(tmp.dir, f);
      const report = await runIngest([path.join(WS, f)], { lakeDir: lake, derived: false });
      expect(report.failed).toBe(0);
      const cps = await rowsOf(
        lake,
        'checkpoints',
        (from) =>
          `SELECT asset_id, seq::VARCHAR AS seq, kind, ok, epoch_ms(ts)::DOUBLE AS ts, epoch_ms(since_ts)::DOUBLE AS since FROM ${from} ORDER BY asset_id, seq, kind`,
      );
      const books = cps.filter((c) => c.kind === 'book');
      const want = oracle.checkpoints
        .filter((c) => c.kind === 'book')
        .map((c) => ({ asset_id: c.asset_id, seq: String(c.seq), kind: 'book', ok: c.ok, ts: c.recvMs, since: c.sinceMs }))
        .sort((a, b) => (a.asset_id + a.seq < b.asset_id + b.seq ? -1 : 1));
      expect(books).toEqual(want);
      expect(books.filter((c) => c.ok).length).toBe(PINNED[f]!.book.passed);
      expect(books.filter((c) => !c.ok).length).toBe(PINNED[f]!.book.failed);
      // Failing top checks (the lake keeps the failing ones; these captures have none).
      expect(cps.filter((c) => c.kind === 'top' && !c.ok).length).toBe(oracle.top.failed);

      // Each failing book checkpoint is a `gap` incident at that message listing the differing levels.
      const gaps = await rowsOf(
        lake,
        'incidents',
        (from) => `SELECT asset_id, seq::VARCHAR AS seq, detail FROM ${from} WHERE kind = 'gap' ORDER BY asset_id, seq`,
      );
      const failed = oracle.checkpoints.filter((c) => c.kind === 'book' && !c.ok);
      expect(gaps.map((g) => ({ asset_id: g.asset_id, seq: g.seq }))).toEqual(failed.map((c) => ({ asset_id: c.asset_id, seq: String(c.seq) })));
      for (const [i, g] of gaps.entries()) {
        const detail = JSON.parse(String(g.detail)) as { differing: number; levels: { side: string; price: string; expected: string; replayed: string }[] };
        const c = failed[i]!;
        expect(detail.differing).toBe(c.differing);
        const norm = (l: { side: string; price: string | bigint; expected: string | bigint; replayed: string | bigint }): string =>
          [l.side, micro(l.price), micro(l.expected), micro(l.replayed)].join('|');
        expect(detail.levels.map(norm).sort()).toEqual(
          c
            .levels!.slice(0, 20)
            .map((l) => norm({ ...l, price: decText(l.price), expected: decText(l.expected), replayed: decText(l.replayed) }))
            .sort(),
        );
      }
      const tops = await rowsOf(lake, 'incidents', (from) => `SELECT count(*) AS n FROM ${from} WHERE kind = 'top_mismatch'`);
      expect(Number(tops[0]?.n ?? 0)).toBe(oracle.top.failed);
    });
  }

  it(`across batches: ${ACROSS.join(' then ')}`, async () => {
    const books = new Map();
    const want = ACROSS.flatMap((f) => replayIntegrity(tapeMessages(path.join(WS, f)), books, { trades: true }).checkpoints).filter((c) => c.kind === 'book');
    expect({ passed: want.filter((c) => c.ok).length, failed: want.filter((c) => !c.ok).length }).toEqual(ACROSS_PINNED);
    const lake = path.join(tmp.dir, 'across');
    for (const f of ACROSS) expect((await runIngest([path.join(WS, f)], { lakeDir: lake, derived: false })).failed).toBe(0);
    const got = await rowsOf(
      lake,
      'checkpoints',
      (from) => `SELECT asset_id, seq::VARCHAR AS seq, ok, epoch_ms(since_ts)::DOUBLE AS since FROM ${from} WHERE kind = 'book' ORDER BY asset_id, seq`,
    );
    expect(got).toEqual(
      want
        .map((c) => ({ asset_id: c.asset_id, seq: String(c.seq), ok: c.ok, since: c.sinceMs }))
        .sort((a, b) => (a.asset_id + a.seq < b.asset_id + b.seq ? -1 : 1)),
    );
  });
});
