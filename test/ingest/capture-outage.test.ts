import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runIngest } from '../../ingest/run.js';
import { lakeRows, tempDir } from './oracle.js';
import { files } from '../helpers/lake-files.js';
import { captureText, generatedFrames, tokensOf, venueMs, writeFile, type Line } from './capture-util.js';

const tmp = tempDir('pmlake-capture-out-');
afterAll(() => tmp.cleanup());

type Msg = { event_type?: string; asset_id?: string; market?: string };
type Cov = { asset_id: string; date: string; status: string; seconds_verified: number; seconds_unverified: number; seconds_degraded: number };

async function coverage(lake: string): Promise<Cov[]> {
  const rows = await lakeRows(
    `SELECT asset_id, CAST(date AS VARCHAR) AS date, status, seconds_verified, seconds_unverified, seconds_degraded
     FROM read_parquet(${files(lake, 'coverage')}) ORDER BY asset_id, date`,
  );
  return rows as Cov[];
}

async function disconnects(lake: string): Promise<Record<string, unknown>[]> {
  return lakeRows(
    `SELECT asset_id, condition_id, epoch_ms(from_ts) AS from_ms, epoch_ms(to_ts) AS to_ms, CAST(seq AS VARCHAR) AS seq, detail
     FROM read_parquet(${files(lake, 'incidents')}) WHERE kind = 'capture_disconnect' ORDER BY asset_id`,
  );
}

type Flag = { asset_id: string; ms: number; seq: string; verified: boolean };

async function flags(lake: string, dir: 'top_of_book' | 'book_snapshots'): Promise<Flag[]> {
  const rows = await lakeRows(
    `SELECT asset_id, epoch_ms(ts) AS ms, CAST(seq AS VARCHAR) AS seq, verified FROM read_parquet(${files(lake, dir)}) ORDER BY asset_id, seq, ms`,
  );
  return rows.map((r) => ({ asset_id: String(r.asset_id), ms: Number(r.ms), seq: String(r.seq), verified: r.verified === true }));
}

describe('an outage line is a capture_disconnect per asset and unverifies its stretch (coverage, books, tops) until the next book', () => {
  let frames: { recv_ms: number; frame: string }[];
  beforeAll(async () => {
    const gen = await generatedFrames(path.join(tmp.dir, 'gen'), { markets: 2, rate: 0.3, seed: 5 });
    let run = 0;
    frames = gen.map((frame) => ({ recv_ms: (run = Math.max(run, venueMs(frame))), frame }));
  });

  it('one batch and the same files in two batches give the same incidents and coverage', async () => {
    // The token with the most books; the outage lies strictly inside the stretch between its 2nd and 3rd book.
    const booksOf = new Map<string, number[]>();
    for (const f of frames) {
      const m = JSON.parse(f.frame) as Msg;
      if (m.event_type === 'book' && m.asset_id) booksOf.set(m.asset_id, [...(booksOf.get(m.asset_id) ?? []), f.recv_ms]);
    }
    const [token, books] = [...booksOf.entries()].sort((a, b) => b[1].length - a[1].length)[0]!;
    expect(books.length).toBeGreaterThanOrEqual(3);
    const [b1, b2] = [books[1]!, books[2]!];
    expect(b2 - b1).toBeGreaterThan(10);
    const fromMs = b1 + 1;
    const toMs = b2 - 1;
    const market = (JSON.parse(frames.find((f) => tokensOf(f.frame).includes(token))!.frame) as Msg).market;
    const other = '777'; // an asset of the outage the tape never mentions: no condition id known
    const assets = [...new Set(frames.flatMap((f) => tokensOf(f.frame)))];
    const outage: Line = { recv_ms: toMs, event: 'outage', from_ms: fromMs, to_ms: toMs, assets: [token, other], reason: 'socket closed' };
    const before = frames.filter((f) => f.recv_ms < toMs).map((f) => ({ ...f, conn: 0 }));
    const after = frames.filter((f) => f.recv_ms >= toMs).map((f) => ({ ...f, conn: 1 }));
    const conns = [{ conn: 0, assets }];
    const f1 = captureText('rec', 'sess', conns, [...before, outage], frames[0]!.recv_ms);
    const f2 = captureText('rec', 'sess', [{ conn: 1, assets }], [{ recv_ms: toMs, event: 'subscribe', conn: 1, assets }, ...after], toMs);
    const d1 = path.join(tmp.dir, 'a');
    const d2 = path.join(tmp.dir, 'b');
    writeFile(d1, 'market-1-rec-00000000.capture.jsonl', f1);
    writeFile(d2, 'market-2-rec-00000000.capture.jsonl', f2);
    const jsonl = writeFile(path.join(tmp.dir, 'j'), 'tape.jsonl', frames.map((f) => f.frame).join('\n') + '\n');

    const one = path.join(tmp.dir, 'one');
    const two = path.join(tmp.dir, 'two');
    const plain = path.join(tmp.dir, 'plain');
    expect((await runIngest([d1, d2], { lakeDir: one })).issues).toEqual([]);
    await runIngest([d1], { lakeDir: two });
    await runIngest([d2], { lakeDir: two });
    await runIngest([jsonl], { lakeDir: plain });

    const expectedIncidents = [
      { asset_id: token, condition_id: market, from_ms: fromMs, to_ms: toMs, seq: `${toMs}000000`, detail: '{"recorder":"rec","reason":"socket closed"}' },
      { asset_id: other, condition_id: null, from_ms: fromMs, to_ms: toMs, seq: `${toMs}000000`, detail: '{"recorder":"rec","reason":"socket closed"}' },
    ].sort((a, b) => (a.asset_id < b.asset_id ? -1 : 1));
    const norm = (rows: Record<string, unknown>[]) => rows.map((r) => ({ ...r, from_ms: Number(r.from_ms), to_ms: Number(r.to_ms) }));
    expect(norm(await disconnects(one))).toEqual(expectedIncidents);
    expect(norm(await disconnects(two))).toEqual(expectedIncidents);

    // Coverage: the stretch (b1, b2] moves from verified to unverified; nothing else changes.
    const stretch = (b2 - b1) / 1000;
    const base = await coverage(plain);
    const expected = base.map((c) =>
      c.asset_id === token
        ? { ...c, status: 'unverified', seconds_verified: c.seconds_verified - stretch, seconds_unverified: c.seconds_unverified + stretch }
        : c,
    );
    const tokenRow = base.find((c) => c.asset_id === token)!;
    expect(tokenRow.status).toBe('verified');
    expect(tokenRow.seconds_verified).toBeGreaterThanOrEqual(stretch);
    const close = (rows: Cov[]) =>
      rows.map((c) => ({ ...c, seconds_verified: c.seconds_verified.toFixed(3), seconds_unverified: c.seconds_unverified.toFixed(3) }));
    expect(close(await coverage(one))).toEqual(close(expected));
    expect(close(await coverage(two))).toEqual(close(expected));

    // The stored books and tops inside the stretch are not verified either (at its books they are: the venue's own).
    for (const dir of ['top_of_book', 'book_snapshots'] as const) {
      const base = await flags(plain, dir);
      const inside = (r: Flag): boolean => r.asset_id === token && r.ms > b1 && r.ms < b2;
      expect(base.filter((r) => inside(r) && r.verified).length, dir).toBeGreaterThan(0);
      const want = base.map((r) => (inside(r) ? { ...r, verified: false } : r));
      expect(await flags(one, dir), dir).toEqual(want);
      expect(await flags(two, dir), dir).toEqual(want);
    }
  });
});
