import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runIngest } from '../../ingest/run.js';
import { lakeRows, tempDir } from './oracle.js';
import { files } from '../helpers/lake-files.js';
import { captureText, generatedFrames, rawRows, tokensOf, writeFile, type Line } from './capture-util.js';

const tmp = tempDir('pmlake-capture-red-');
afterAll(() => tmp.cleanup());

/** The l2 / last_trades rows without receive time and seq (which copy landed decides those), sorted. */
async function content(lake: string, dir: 'l2' | 'last_trades' | 'checkpoints'): Promise<string[]> {
  const cols = {
    l2: 'asset_id, ts, hash, is_snapshot, side, price, size, level_idx',
    last_trades: 'asset_id, ts, side, price, size, transaction_hash',
    // The replay met every book once: a copy left in staging would be one more checkpoint.
    checkpoints: 'asset_id, kind, ok',
  }[dir];
  const rows = await lakeRows(`SELECT ${cols} FROM read_parquet(${files(lake, dir)}) ORDER BY ALL`);
  return rows.map((r) => JSON.stringify(r));
}

/** l2 and last_trades rows whose receive time is no landed frame's. */
async function strays(lake: string): Promise<number> {
  const raw = `(SELECT recv_ts FROM read_parquet(${files(lake, 'raw')}))`;
  const rows = await lakeRows(
    `SELECT (SELECT count(*) FROM read_parquet(${files(lake, 'l2')}) WHERE recv_ts NOT IN ${raw})
          + (SELECT count(*) FROM read_parquet(${files(lake, 'last_trades')}) WHERE recv_ts NOT IN ${raw}) AS n`,
  );
  return Number(rows[0]!.n);
}

async function disconnects(lake: string): Promise<number> {
  if (files(lake, 'incidents') === '[]') return 0;
  const rows = await lakeRows(`SELECT count(*) AS n FROM read_parquet(${files(lake, 'incidents')}) WHERE kind = 'capture_disconnect'`);
  return Number(rows[0]!.n);
}

describe('two recorders of the same assets land every frame once', () => {
  let frames: string[];
  let assets: string[];
  beforeAll(async () => {
    frames = await generatedFrames(path.join(tmp.dir, 'gen'), { markets: 2, rate: 0.2, seed: 9 });
    assets = [...new Set(frames.flatMap(tokensOf))];
  });

  it('one batch keeps the earliest copy and fills one recorder\u2019s outage from the other (no incident); two batches keep one copy', async () => {
    const t0 = Date.UTC(2025, 8, 20, 0, 0, 0);
    // Frame i arrives at recorder A at base+0 (even i) or base+6 (odd i), at recorder B at base+3: each recorder's
    // times rise, and the earliest copy alternates between them.
    const base = (i: number): number => t0 + 10 * i;
    const aMs = (i: number): number => base(i) + (i % 2 === 0 ? 0 : 6);
    const bMs = (i: number): number => base(i) + 3;
    const gapFrom = Math.floor(frames.length / 3);
    const gapTo = gapFrom + 8; // A lost frames gapFrom … gapTo − 1
    const aBody: Line[] = [];
    frames.forEach((frame, i) => {
      if (i === gapTo) {
        aBody.push({ recv_ms: aMs(i) - 1, event: 'disconnect', conn: 0, code: 1006, reason: 'gone' });
        aBody.push({ recv_ms: aMs(i) - 1, event: 'subscribe', conn: 1, assets });
        aBody.push({ recv_ms: aMs(i) - 1, event: 'outage', from_ms: aMs(gapFrom - 1), to_ms: aMs(i) - 1, assets, reason: 'socket closed' });
      }
      if (i < gapFrom || i >= gapTo) aBody.push({ recv_ms: aMs(i), conn: i < gapFrom ? 0 : 1, frame });
    });
    const bBody: Line[] = frames.map((frame, i) => ({ recv_ms: bMs(i), conn: 4, frame }));
    const dA = path.join(tmp.dir, 'recA');
    const dB = path.join(tmp.dir, 'recB');
    writeFile(dA, 'market-20250920T000000Z-A-11111111.capture.jsonl', captureText('A', 'a-session', [{ conn: 0, assets }], aBody, t0));
    writeFile(dB, 'market-20250920T000000Z-B-22222222.capture.jsonl', captureText('B', 'b-session', [{ conn: 4, assets }], bBody, t0));
    const plain = path.join(tmp.dir, 'plain');
    await runIngest([writeFile(path.join(tmp.dir, 'j'), 'tape.jsonl', frames.join('\n') + '\n')], { lakeDir: plain });

    const inA = (i: number): boolean => i < gapFrom || i >= gapTo;
    const earliest = frames.map((frame, i) => [inA(i) ? Math.min(aMs(i), bMs(i)) : bMs(i), frame] as [number, string]);
    const one = path.join(tmp.dir, 'one');
    const r = await runIngest([dA, dB], { lakeDir: one });
    expect(r.issues).toEqual([]);
    expect(await rawRows(one)).toEqual(earliest);
    // Some of B's copies replaced A's staged ones (B's file is staged second).
    expect(r.counts.capture_copies_replaced).toBeGreaterThan(0);
    for (const d of ['l2', 'last_trades', 'checkpoints'] as const) expect(await content(one, d), d).toEqual(await content(plain, d));
    // …and every level update and trade is the landed copy's: none left over from a replaced one.
    expect(await strays(one)).toBe(0);
    // B's file covers A's outage whole (subscribed from its first line, never disconnected): no incident.
    expect(await disconnects(one)).toBe(0);
    expect(r.counts.capture_disconnects_covered).toBe(assets.length);

    // One recorder's file per batch, in both orders: the first landed copy stays, the other's fills the outage.
    for (const [first, second, name] of [
      [dA, dB, 'ab'],
      [dB, dA, 'ba'],
    ] as const) {
      const lake = path.join(tmp.dir, name);
      await runIngest([first], { lakeDir: lake });
      const r2 = await runIngest([second], { lakeDir: lake });
      expect(r2.issues).toEqual([]);
      const want = frames.map((frame, i) => [name === 'ab' && inA(i) ? aMs(i) : bMs(i), frame] as [number, string]);
      expect(await rawRows(lake), name).toEqual(want);
      for (const d of ['l2', 'last_trades'] as const) expect(await content(lake, d), `${name} ${d}`).toEqual(await content(plain, d));
      // A's batch alone missed the outage's frames: its next books failed their checkpoints, and a lake's
      // checkpoints are not re-decided when the other recorder's copies arrive later. B first: nothing missed.
      if (name === 'ba') expect(await content(lake, 'checkpoints')).toEqual(await content(plain, 'checkpoints'));
      else expect((await content(lake, 'checkpoints')).some((c) => c.includes('"ok":false'))).toBe(true);
      expect(await strays(lake)).toBe(0);
      // A's batch is A's alone (or B's file landed before): nothing in the batch covers the outage.
      expect(await disconnects(lake)).toBe(assets.length);
    }
  });

  it('an outage is covered only by one file of another recorder subscribed through all of it', async () => {
    const t = Date.UTC(2025, 8, 20, 2, 0, 0);
    const x = assets[0]!;
    const frame = (i: number): string => JSON.stringify({ event_type: 'mystery_tick', asset_id: x, timestamp: String(t + i) });
    const file = (rec: string, lines: Line[], start = t, subscribed = [x]): string =>
      captureText(rec, `${rec}-s`, [{ conn: 0, assets: subscribed }], [...lines, { recv_ms: t + 1000, conn: 0, frame: frame(1000) }], start);
    const aLines: Line[] = [{ recv_ms: t + 200, event: 'outage', from_ms: t + 100, to_ms: t + 200, assets: [x], reason: 'socket closed' }];
    const dir = (name: string, files: [string, string][]): string => {
      const d = path.join(tmp.dir, name);
      for (const [n, text] of files) writeFile(d, n, text);
      return d;
    };
    const notCovering = dir('cover-no', [
      ['a.capture.jsonl', file('A', aLines)],
      // B lost its connection inside the outage; C subscribed only after it began.
      ['b.capture.jsonl', file('B', [{ recv_ms: t + 150, event: 'disconnect', conn: 0, code: 1006, reason: 'x' }])],
      ['c.capture.jsonl', file('C', [{ recv_ms: t + 120, event: 'subscribe', conn: 0, assets: [x] }], t, [])],
    ]);
    const covering = dir('cover-yes', [
      ['a.capture.jsonl', file('A', aLines)],
      ['d.capture.jsonl', file('D', [])],
    ]);
    const l1 = path.join(tmp.dir, 'cover-no-lake');
    const l2 = path.join(tmp.dir, 'cover-yes-lake');
    await runIngest([notCovering], { lakeDir: l1 });
    await runIngest([covering], { lakeDir: l2 });
    expect(await disconnects(l1)).toBe(1);
    expect(await disconnects(l2)).toBe(0);
  });

  it('equal frames on one connection are the venue\u2019s duplicate (both kept, an incident); on another connection, a copy', async () => {
    const t0 = Date.UTC(2025, 8, 20, 1, 0, 0);
    const x = frames.find((f) => JSON.parse(f).event_type === 'book')!;
    const y = frames.find((f) => f !== x && JSON.parse(f).event_type === 'price_change')!;
    const body: Line[] = [
      { recv_ms: t0 + 1, conn: 0, frame: x },
      { recv_ms: t0 + 2, conn: 0, frame: x },
      { recv_ms: t0 + 3, conn: 1, frame: x },
      { recv_ms: t0 + 4, conn: 1, frame: y },
      { recv_ms: t0 + 5, conn: 0, frame: y },
      { recv_ms: t0 + 20_000, conn: 1, frame: y },
    ];
    const dir = path.join(tmp.dir, 'conns');
    writeFile(
      dir,
      'market-x-C-33333333.capture.jsonl',
      captureText(
        'C',
        'c',
        [
          { conn: 0, assets },
          { conn: 1, assets },
        ],
        body,
        t0,
      ),
    );
    const lake = path.join(tmp.dir, 'conns-lake');
    const r = await runIngest([dir], { lakeDir: lake });
    expect(r.issues).toEqual([]);
    // x twice on conn 0 (the venue sent it twice), conn 1's copy dropped; y once within 10 s, again 20 s later.
    expect(await rawRows(lake)).toEqual([
      [t0 + 1, x],
      [t0 + 2, x],
      [t0 + 4, y],
      [t0 + 20_000, y],
    ]);
    const dup = await lakeRows(
      `SELECT count(*) AS n FROM read_parquet(${files(lake, 'incidents')}) WHERE kind = 'duplicate' AND epoch_ms(from_ts) = ${t0 + 2}`,
    );
    expect(Number(dup[0]!.n)).toBe(1);
  });
});
