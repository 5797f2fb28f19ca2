import fs from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { runIngest } from '../../ingest/run.js';
import { lakeRows, tempDir } from './oracle.js';
import { files } from '../helpers/lake-files.js';

/**
 * Tape integrity at ingest (issue 15; rules in lake/README.md "Tape integrity"), on small hand-built tapes in the
 * venue's new shape (one message per JSONL line). The test keeps the venue's true book itself and writes what the
 * venue would send; expected checkpoints, differing levels and coverage come from this file's own replay of the
 * lines written, never from the ingest's modules.
 */

const tmp = tempDir('pmlake-integrity-core-');
afterAll(() => tmp.cleanup());

const MARKET = '0x' + 'ab'.repeat(32);
const TOKEN = '1' + '2345678901'.repeat(7);
const T0 = Date.UTC(2026, 2, 2, 0, 10, 0);
const OPTS = { threads: 1, memoryLimit: '1GB', compactSmallFiles: 0 } as const;

type Side = Map<number, number>; // price in 1e-6 → size in 1e-6
const txt = (v: number): string => String(v / 1e6);
const u = (s: string): number => Math.round(Number(s) * 1e6);

/** The venue: its true book of one token and the lines it sends (or, for a drop, does not). */
class Venue {
  bids: Side = new Map();
  asks: Side = new Map();
  lines: string[] = [];
  constructor(readonly tick = '0.01') {}
  private levels(side: Side, ascending: boolean): string {
    return [...side.entries()]
      .sort((a, b) => (ascending ? a[0] - b[0] : b[0] - a[0]))
      .map(([p, s]) => `{"price":"${txt(p)}","size":"${txt(s)}"}`)
      .join(',');
  }
  book(ts: number): void {
    // Bids ascending and asks descending, best last, as the venue sends them.
    this.lines.push(
      `{"market":"${MARKET}","asset_id":"${TOKEN}","timestamp":"${ts}","hash":"h${ts}","bids":[${this.levels(this.bids, true)}],` +
        `"asks":[${this.levels(this.asks, false)}],"tick_size":"${this.tick}","event_type":"book"}`,
    );
  }
  change(ts: number, side: 'BUY' | 'SELL', price: string, size: string, send = true): void {
    const book = side === 'BUY' ? this.bids : this.asks;
    if (u(size) === 0) book.delete(u(price));
    else book.set(u(price), u(size));
    const bb = this.bids.size ? Math.max(...this.bids.keys()) : 0;
    const ba = this.asks.size ? Math.min(...this.asks.keys()) : 1e6;
    const line =
      `{"market":"${MARKET}","price_changes":[{"asset_id":"${TOKEN}","price":"${price}","size":"${size}","side":"${side}","hash":"c${ts}",` +
      `"best_bid":"${txt(bb)}","best_ask":"${txt(ba)}"}],"timestamp":"${ts}","event_type":"price_change"}`;
    if (send) this.lines.push(line);
  }
  write(name: string, lines = this.lines): string {
    const f = path.join(tmp.dir, name);
    fs.mkdirSync(path.dirname(f), { recursive: true });
    fs.writeFileSync(f, `${lines.join('\n')}\n`);
    return f;
  }
}

/** A venue with a few levels each side, its first book sent at T0. */
function opened(): Venue {
  const v = new Venue();
  for (const [p, s] of [
    ['0.48', '300'],
    ['0.49', '200'],
    ['0.5', '100'],
  ] as const)
    v.change(T0, 'BUY', p, s, false);
  for (const [p, s] of [
    ['0.53', '400'],
    ['0.52', '150'],
  ] as const)
    v.change(T0, 'SELL', p, s, false);
  v.book(T0);
  return v;
}

/**
 * The test's own replay of the lines: for every `book` after the first, whether it equals the book replayed
 * up to just before it, and the levels that differ (bids best first, then asks).
 */
function oracleCheckpoints(lines: string[]): { ts: number; ok: boolean; levels: { side: string; price: number; expected: number; replayed: number }[] }[] {
  const bids: Side = new Map();
  const asks: Side = new Map();
  const out: { ts: number; ok: boolean; levels: { side: string; price: number; expected: number; replayed: number }[] }[] = [];
  let seen = false;
  for (const l of lines) {
    const m = JSON.parse(l) as Record<string, unknown>;
    if (m.event_type === 'book') {
      const eb: Side = new Map((m.bids as { price: string; size: string }[]).map((x) => [u(x.price), u(x.size)]));
      const ea: Side = new Map((m.asks as { price: string; size: string }[]).map((x) => [u(x.price), u(x.size)]));
      if (seen) {
        const levels: { side: string; price: number; expected: number; replayed: number }[] = [];
        for (const [side, e, r, desc] of [
          ['bid', eb, bids, true],
          ['ask', ea, asks, false],
        ] as const) {
          const prices = [...new Set([...e.keys(), ...r.keys()])].filter((p) => (e.get(p) ?? 0) !== (r.get(p) ?? 0)).sort((a, b) => (desc ? b - a : a - b));
          for (const p of prices) levels.push({ side, price: p, expected: e.get(p) ?? 0, replayed: r.get(p) ?? 0 });
        }
        out.push({ ts: Number(m.timestamp), ok: levels.length === 0, levels });
      }
      bids.clear();
      asks.clear();
      for (const [p, s] of eb) bids.set(p, s);
      for (const [p, s] of ea) asks.set(p, s);
    } else {
      for (const c of m.price_changes as { price: string; size: string; side: string }[]) {
        const book = c.side === 'BUY' ? bids : asks;
        if (u(c.size) === 0) book.delete(u(c.price));
        else book.set(u(c.price), u(c.size));
      }
    }
    seen = true;
  }
  return out;
}

async function ingest(lake: string, inputs: string[]): Promise<void> {
  for (const f of inputs) {
    const r = await runIngest([f], { lakeDir: lake, ...OPTS });
    expect(r.failed, JSON.stringify(r.issues)).toBe(0);
  }
}

async function rows(lake: string, dir: string, cols: string, order: string): Promise<Record<string, unknown>[]> {
  const list = files(lake, dir);
  return list === '[]' ? [] : lakeRows(`SELECT ${cols} FROM read_parquet(${list}) ORDER BY ${order}`);
}
const checkpoints = (lake: string) =>
  rows(lake, 'checkpoints', `asset_id, epoch_ms(ts)::DOUBLE AS ts, seq::VARCHAR AS seq, kind, ok, epoch_ms(since_ts)::DOUBLE AS since`, 'seq, kind');
const incidents = (lake: string) =>
  rows(
    lake,
    'incidents',
    `asset_id, kind, epoch_ms(from_ts)::DOUBLE AS from_ms, epoch_ms(to_ts)::DOUBLE AS to_ms, seq::VARCHAR AS seq, detail`,
    'from_ts, kind, seq',
  );
const coverage = (lake: string) =>
  rows(
    lake,
    'coverage',
    `asset_id, CAST(date AS VARCHAR) AS date, status, seconds_verified, seconds_degraded, seconds_unverified, checkpoints_passed, checkpoints_failed, messages`,
    'asset_id, date',
  );

describe('tape integrity on hand-built tapes', () => {
  it('a clean tape: every checkpoint passes, no incident, every row verified, the day verified', async () => {
    const v = opened();
    let t = T0;
    for (let i = 0; i < 8; i += 1) v.change((t += 1500), i % 2 ? 'SELL' : 'BUY', i % 2 ? '0.53' : '0.48', String(300 + i * 10));
    v.book((t += 2000));
    v.change((t += 1000), 'BUY', '0.51', '40');
    v.change((t += 1000), 'SELL', '0.52', '0');
    v.book((t += 3000));
    const lake = path.join(tmp.dir, 'clean');
    await ingest(lake, [v.write('clean.jsonl')]);

    const oracle = oracleCheckpoints(v.lines);
    expect(oracle.every((c) => c.ok)).toBe(true);
    const cps = await checkpoints(lake);
    expect(cps.map((c) => [c.ts, c.kind, c.ok])).toEqual(oracle.map((c) => [c.ts, 'book', true]));
    // since_ts: the previous book (the first one is the token's first message).
    expect(cps.map((c) => c.since)).toEqual([T0, oracle[0]!.ts]);
    expect(await incidents(lake)).toEqual([]);
    for (const d of ['book_snapshots', 'top_of_book']) {
      const flags = await rows(lake, d, 'verified', 'seq');
      expect(flags.length).toBeGreaterThan(0);
      expect(flags.every((r) => r.verified === true)).toBe(true);
    }
    expect((await rows(lake, 'l2', 'count(*) FILTER (WHERE after_gap) AS n, count(*) AS all_rows', '1'))[0]).toMatchObject({ n: '0' });
    const cov = await coverage(lake);
    expect(cov).toEqual([
      {
        asset_id: TOKEN,
        date: '2026-03-02',
        status: 'verified',
        seconds_verified: (t - T0) / 1000,
        seconds_degraded: 0,
        seconds_unverified: 0,
        checkpoints_passed: 2,
        checkpoints_failed: 0,
        messages: String(v.lines.length),
      },
    ]);
  });

  it('a dropped price_change fails the book that closes its stretch, naming the level that differed', async () => {
    const v = opened();
    let t = T0;
    v.change((t += 1000), 'BUY', '0.49', '250');
    // Lost: a deep bid level changes (the top stays, so no top check notices it).
    v.change((t += 1000), 'BUY', '0.48', '120', false);
    const dropAt = t;
    v.change((t += 1000), 'SELL', '0.53', '410');
    v.book((t += 1000));
    const failedAt = t;
    v.change((t += 1000), 'BUY', '0.5', '90');
    v.book((t += 1000));
    const lake = path.join(tmp.dir, 'drop');
    await ingest(lake, [v.write('drop.jsonl')]);

    const oracle = oracleCheckpoints(v.lines);
    expect(oracle.map((c) => c.ok)).toEqual([false, true]);
    const cps = await checkpoints(lake);
    expect(cps.map((c) => [c.ts, c.kind, c.ok])).toEqual(oracle.map((c) => [c.ts, 'book', c.ok]));
    const inc = await incidents(lake);
    expect(inc.map((i) => [i.kind, i.from_ms, i.to_ms])).toEqual([['gap', T0, failedAt]]);
    expect(dropAt).toBeGreaterThan(T0);
    expect(dropAt).toBeLessThan(failedAt);
    const detail = JSON.parse(inc[0]!.detail as string) as { levels: { side: string; price: string; expected: string; replayed: string }[]; differing: number };
    expect(detail.differing).toBe(oracle[0]!.levels.length);
    expect(detail.levels.map((l) => [l.side, u(l.price), u(l.expected), u(l.replayed)])).toEqual(
      oracle[0]!.levels.map((l) => [l.side, l.price, l.expected, l.replayed]),
    );
    expect(detail.levels).toEqual([{ side: 'bid', price: '0.48', expected: '120', replayed: '300' }]);
    // The failing book's rows are the first after the gap.
    const gapRows = await lakeRows(`SELECT DISTINCT epoch_ms(recv_ts)::DOUBLE AS ms FROM read_parquet(${files(lake, 'l2')}) WHERE after_gap`);
    expect(gapRows).toEqual([{ ms: failedAt }]);
    // Rows strictly inside the failed stretch are unverified; the rows at a book and after it (passed) verified.
    const tops = await rows(lake, 'top_of_book', `epoch_ms(ts)::DOUBLE AS ms, verified`, 'seq');
    for (const r of tops) expect(r.verified, String(r.ms)).toBe(!((r.ms as number) > T0 && (r.ms as number) < failedAt));
    const cov = await coverage(lake);
    expect(cov).toMatchObject([
      {
        status: 'degraded',
        seconds_degraded: (failedAt - T0) / 1000,
        seconds_verified: (t - failedAt) / 1000,
        seconds_unverified: 0,
        checkpoints_passed: 1,
        checkpoints_failed: 1,
      },
    ]);
  });

  it('a crossed book, a duplicate frame, receive time going backwards and a price off the tick each give their incident', async () => {
    const v = opened();
    let t = T0;
    v.change((t += 1000), 'BUY', '0.505', '10');
    const offTickAt = t;
    v.change((t += 1000), 'BUY', '0.505', '0');
    v.change((t += 1000), 'BUY', '0.53', '5');
    const crossedAt = t;
    v.change((t += 1000), 'BUY', '0.53', '0');
    v.lines.push(v.lines[v.lines.length - 1]!);
    const dupAt = t;
    v.change((t += 1000), 'SELL', '0.52', '160');
    // A frame stamped 9 s before the one above it (a venue timestamp: more than the 5 s allowed).
    const back = JSON.parse(v.lines[v.lines.length - 1]!) as Record<string, unknown>;
    back.timestamp = String(t - 9000);
    (back.price_changes as Record<string, unknown>[])[0]!.hash = 'back';
    v.lines.push(JSON.stringify(back));
    const backAt = t;
    v.change((t += 1000), 'SELL', '0.53', '420');
    v.book((t += 1000));
    const lake = path.join(tmp.dir, 'anomalies');
    await ingest(lake, [v.write('anomalies.jsonl')]);

    const inc = await incidents(lake);
    const kinds = inc.map((i) => [i.kind, i.from_ms]);
    expect(kinds).toContainEqual(['off_tick', offTickAt]);
    expect(kinds).toContainEqual(['crossed', crossedAt]);
    expect(kinds).toContainEqual(['duplicate', dupAt]);
    expect(kinds).toContainEqual(['recv_backwards', backAt]);
    expect(inc.length).toBe(4);
    const off = inc.find((i) => i.kind === 'off_tick')!;
    expect(JSON.parse(off.detail as string)).toEqual({ price: '0.505', tick: '0.01' });
    const crossed = inc.find((i) => i.kind === 'crossed')!;
    expect(JSON.parse(crossed.detail as string)).toEqual({ best_bid: '0.53', best_ask: '0.52' });
    // The duplicate is the second copy: the same receive ms, the next rank.
    const dup = inc.find((i) => i.kind === 'duplicate')!;
    expect(BigInt(dup.seq as string) % 1_000_000n).toBe(1n);
    // The book matches the venue's (the duplicate and the late frame re-send totals), but the crossed book
    // inside the stretch makes it degraded.
    const oracle = oracleCheckpoints(v.lines);
    expect((await checkpoints(lake)).map((c) => c.ok)).toEqual(oracle.map((c) => c.ok));
    // Messages: every line but the duplicate's second copy.
    expect((await coverage(lake))[0]).toMatchObject({
      status: 'degraded',
      checkpoints_failed: oracle.filter((c) => !c.ok).length,
      messages: String(v.lines.length - 1),
    });
  });

  it('two batches give the same rows as one, and the second batch’s book closes the first batch’s open stretch', async () => {
    const v = opened();
    let t = T0;
    for (let i = 0; i < 5; i += 1) v.change((t += 1000), 'BUY', '0.49', String(200 + i));
    v.book((t += 1000));
    // The first file ends with changes of the best ask (each a top-of-book row) after its last book.
    for (let i = 0; i < 4; i += 1) v.change((t += 1000), 'SELL', '0.52', String(150 + i));
    const cut = v.lines.length;
    for (let i = 0; i < 3; i += 1) v.change((t += 1000), 'SELL', '0.53', String(400 + i));
    v.book((t += 1000));
    const whole = v.write('split/whole.jsonl');
    const a = v.write('split/a.jsonl', v.lines.slice(0, cut));
    const b = v.write('split/b.jsonl', v.lines.slice(cut));
    const one = path.join(tmp.dir, 'one');
    const two = path.join(tmp.dir, 'two');
    await ingest(one, [whole]);
    await ingest(two, [a]);

    // After the first half: the stretch after its last book is open — unverified rows, an unverified day.
    const openTops = await rows(two, 'top_of_book', `epoch_ms(ts)::DOUBLE AS ms, verified`, 'seq');
    const lastBookA = oracleCheckpoints(v.lines.slice(0, cut)).at(-1)!.ts;
    expect(openTops.filter((r) => (r.ms as number) > lastBookA).length).toBeGreaterThan(0);
    for (const r of openTops) expect(r.verified).toBe((r.ms as number) <= lastBookA);
    expect((await coverage(two))[0]).toMatchObject({ status: 'unverified', seconds_unverified: (t0OfLine(v.lines[cut - 1]!) - lastBookA) / 1000 });

    await ingest(two, [b]);
    const oracle = oracleCheckpoints(v.lines);
    expect(oracle.every((c) => c.ok)).toBe(true);
    for (const [dir, cols, order] of [
      ['checkpoints', '*', 'seq, kind'],
      ['incidents', '*', 'seq'],
      ['coverage', '*', 'asset_id, date'],
      ['book_snapshots', '* EXCLUDE (bids, asks), bids::VARCHAR AS b, asks::VARCHAR AS a', 'seq, reason'],
      ['top_of_book', '*', 'seq'],
      ['l2', '*', 'seq, level_idx'],
    ] as const) {
      expect(await rows(two, dir, cols, order), dir).toEqual(await rows(one, dir, cols, order));
    }
    const tops = await rows(two, 'top_of_book', 'verified', 'seq');
    expect(tops.every((r) => r.verified === true)).toBe(true);
    expect((await coverage(two))[0]).toMatchObject({ status: 'verified', checkpoints_passed: oracle.length, seconds_unverified: 0 });
  });
});

function t0OfLine(line: string): number {
  return Number((JSON.parse(line) as { timestamp: string }).timestamp);
}
