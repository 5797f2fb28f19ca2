import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runIngest } from '../../ingest/run.js';
import { currentVersion } from '../../src/lake/versions.js';
import { tempDir } from './oracle.js';
import { captureText, generatedFrames, rawRows, rowsOf, tokensOf, venueMs, writeFile, type Line } from './capture-util.js';

const tmp = tempDir('pmlake-capture-');
afterAll(() => tmp.cleanup());

const FIXTURE = path.resolve('test/fixtures/venue/ws/2026-08-14_frames_price_change_v2.jsonl');

/** Frames with receive times as the JSON-lines ingest computes them: the running maximum of the venue times. */
function timed(frames: string[]): { recv_ms: number; frame: string }[] {
  let run = 0;
  return frames.map((frame) => ({ recv_ms: (run = Math.max(run, venueMs(frame))), frame }));
}

describe('capture files land like the same frames as JSON lines', () => {
  let gen: string[];
  const real = fs
    .readFileSync(FIXTURE, 'utf8')
    .split('\n')
    .filter((l) => l.length > 0);
  beforeAll(async () => {
    gen = await generatedFrames(path.join(tmp.dir, 'gen'), { markets: 2, rate: 0.3, seed: 11 });
  });

  it('raw is every frame byte for byte, in order, with its receive time; l2 and last_trades equal the JSON-lines ingest', async () => {
    const sets = [timed(gen), timed(real)];
    const caps = path.join(tmp.dir, 'caps');
    const jsonl = path.join(tmp.dir, 'jsonl');
    sets.forEach((set, i) => {
      const assets = [...new Set(set.flatMap((f) => tokensOf(f.frame)))];
      const body: Line[] = set.map((f) => ({ recv_ms: f.recv_ms, conn: 0, frame: f.frame }));
      writeFile(caps, `market-${i}-rec-abcdef01.capture.jsonl`, captureText('rec', `s${i}`, [{ conn: 0, assets }], body, set[0]!.recv_ms));
      writeFile(jsonl, `tape-${i}.jsonl`, set.map((f) => f.frame).join('\n') + '\n');
    });
    const a = path.join(tmp.dir, 'lake-cap');
    const b = path.join(tmp.dir, 'lake-json');
    const ra = await runIngest([caps], { lakeDir: a });
    const rb = await runIngest([jsonl], { lakeDir: b });
    expect(ra.issues).toEqual([]);
    expect(rb.issues).toEqual([]);
    expect(ra.failed).toBe(0);

    const expected = sets
      .flat()
      .map((f) => [f.recv_ms, f.frame] as [number, string])
      .sort((x, y) => x[0] - y[0]);
    expect(await rawRows(a)).toEqual(expected);
    for (const [dir, order] of [
      ['l2', 'asset_id, seq, level_idx'],
      ['last_trades', 'asset_id, ts, seq'],
      ['book_snapshots', 'asset_id, ts, seq, reason'],
      ['checkpoints', 'asset_id, seq, kind'],
      ['coverage', 'asset_id, date'],
    ] as const) {
      expect(await rowsOf(a, dir, order), dir).toEqual(await rowsOf(b, dir, order));
    }
    expect((await rowsOf(a, 'l2', 'asset_id, seq')).length).toBeGreaterThan(100);

    // Staged in chunks of 64 kB (cut at line ends; the receive time, k and the subscriptions carry over): the same lake.
    const c = path.join(tmp.dir, 'lake-chunks');
    process.env.PMLAKE_TAPE_CHUNK_BYTES = '65536';
    try {
      const rc = await runIngest([caps], { lakeDir: c });
      expect(rc.issues).toEqual([]);
      expect(rc.counts.tape_chunks).toBeGreaterThan(3);
    } finally {
      delete process.env.PMLAKE_TAPE_CHUNK_BYTES;
    }
    expect(await rawRows(c)).toEqual(expected);
    for (const [dir, order] of [
      ['l2', 'asset_id, seq, level_idx'],
      ['checkpoints', 'asset_id, seq, kind'],
    ] as const) {
      expect(await rowsOf(c, dir, order), `chunks ${dir}`).toEqual(await rowsOf(a, dir, order));
    }

    // Re-ingest: the ledger knows the files; nothing changes.
    const v = currentVersion(a).version;
    const again = await runIngest([caps], { lakeDir: a });
    expect(again.skipped).toBe(2);
    expect(currentVersion(a).version).toBe(v);
  });

  it('bad input: issues with file and line, everything else landed, re-staging lands nothing twice', async () => {
    const set = timed(gen.slice(0, 40));
    const t = set[0]!.recv_ms;
    const assets = [...new Set(set.flatMap((f) => tokensOf(f.frame)))];
    const stranger = '1234567890';
    const extra = [
      { recv_ms: t + 1, conn: 0, frame: 'INVALID OPERATION' },
      { recv_ms: t + 2, conn: 0, frame: JSON.stringify({ event_type: 'mystery', asset_id: assets[0], timestamp: String(t) }) },
      {
        recv_ms: t + 3,
        conn: 0,
        frame: JSON.stringify({ event_type: 'new_market', question: 'Will “Zoë” win? — ✓', assets_ids: ['9', '8'], timestamp: String(t) }),
      },
      // Looks like a capture wrapper of another layout; still stored as received, once.
      { recv_ms: t + 4, conn: 0, frame: JSON.stringify({ timestamp: String(t), asset_id: assets[0], message: { event_type: 'tick_size_change' } }) },
      {
        recv_ms: t + 4,
        conn: 0,
        frame: JSON.stringify({
          event_type: 'last_trade_price',
          asset_id: stranger,
          market: `0x${'ab'.repeat(32)}`,
          price: '0.5',
          size: '1',
          side: 'BUY',
          timestamp: String(t),
        }),
      },
    ];
    const body: Line[] = [...extra, ...set.slice(1).map((f) => ({ recv_ms: Math.max(f.recv_ms, t + 4), conn: 0, frame: f.frame }))];
    body.unshift({ recv_ms: t, conn: 0, frame: set[0]!.frame });
    const text = captureText('rec', 'sbad', [{ conn: 0, assets }], body, t).split('\n');
    // line 1 start, 2 assets, 3.. frames; a damaged line inside, a torn last line at the end.
    text.splice(10, 0, '{"recv_ms":12,"conn":0,"frame":"{\\"x\\"');
    text.splice(20, 0, ''); // a blank line: reported at its own number, and every later line keeps its number
    const torn = '{"recv_ms":99999999999999,"conn":0,"frame":"[{\\"event_type\\":\\"bo';
    const dir = path.join(tmp.dir, 'bad');
    const file = writeFile(dir, 'market-bad-rec-00000000.capture.jsonl', text.join('\n') + torn);
    const lake = path.join(tmp.dir, 'lake-bad');
    const r = await runIngest([dir], { lakeDir: lake });
    expect(r.failed).toBe(0);
    const issues = r.issues.map((i) => ({ file: i.file, line: i.line, what: i.message.replace(/^\d+ /, '').replace(/; first at line \d+$/, '') }));
    const lines = text.length; // the torn line takes the place of the empty string after the last newline
    expect(issues).toEqual(
      expect.arrayContaining([
        { file, line: 11, what: 'malformed capture line skipped' },
        { file, line: 21, what: 'malformed capture line skipped' },
        { file, line: lines, what: 'file cut short: its last line is incomplete; skipped' },
        { file, line: 4, what: 'frame(s) that are not JSON, kept in raw' },
        { file, line: 5, what: 'message(s) of an unknown event type, kept in raw' },
        { file, line: 8, what: 'frame(s) with a message for an asset not subscribed on its connection, landed' },
      ]),
    );
    expect(issues).toHaveLength(6);
    // Every frame line that is a line (not the damaged one, not the torn one) is in raw, byte for byte.
    const expected = body.map((l) => [l.recv_ms, (l as { frame: string }).frame] as [number, string]);
    expect(await rawRows(lake)).toEqual(expected);
    expect(r.counts.msg_new_market).toBe(1);

    // Without the ledger the file is staged again: every frame is in the lake already, so nothing is added.
    const before = await Promise.all(['raw', 'l2', 'last_trades', 'incidents'].map((d) => rowsOf(lake, d, '1')));
    fs.rmSync(path.join(lake, '_ingest', 'ledger.jsonl'));
    const again = await runIngest([dir], { lakeDir: lake });
    expect(again.skipped).toBe(0);
    expect(again.counts.capture_copies_dropped).toBe(body.length);
    const after = await Promise.all(['raw', 'l2', 'last_trades', 'incidents'].map((d) => rowsOf(lake, d, '1')));
    expect(after.map((x) => [...x].sort())).toEqual(before.map((x) => [...x].sort()));
  });
});
