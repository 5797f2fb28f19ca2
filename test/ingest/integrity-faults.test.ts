import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generate, type GenerateReport } from '../../sim/generate/index.js';
import { parseGenerateArgs } from '../../sim/generate/cli.js';
import type { Truth } from '../../sim/generate/faults.js';
import { runIngest } from '../../ingest/run.js';
import { lakeRows, tempDir } from './oracle.js';
import { entriesOf, replayIntegrity, tapeMessages, type TapeMessage } from './integrity-oracle.js';
import { files } from '../helpers/lake-files.js';

/**
 * Fault injection (issue 15): the generator writes a small two-day tape (old price_change shape on day one,
 * new shape on day two) once clean and once with injected faults — dropped price_changes, a capture silence,
 * duplicated frames, crossed updates — plus its truth (faults.json, computed by the generator from the clean
 * and the captured tape). Both tapes go through the real ingest; what the lake's checkpoints, incidents and
 * coverage say is compared with the truth, and the seqs with an independent reading of the written files
 * (integrity-oracle.ts: receive time and seq rules of lake/README.md).
 */
const tmp = tempDir('pmlake-integrity-faults-');
afterAll(() => tmp.cleanup());

const base = { markets: 4, days: 2, seed: 21, start: '2025-09-14', busy: 1, rate: 1.2, workers: 0 };
const SILENCE_FROM = Date.parse('2025-09-14T12:00:00Z');
// An hour: this small tape's capture pauses about a minute between messages, so the disconnect bar (40 × the
// typical spacing before it) is some 45 minutes here; the silence must clear it plainly.
const faultOpts = { dropRate: 0.003, silences: [{ fromMs: SILENCE_FROM, seconds: 3600 }], duplicates: 2, crossed: 2 };

type Tape = { dir: string; lake: string; report: GenerateReport; truth: Truth; msgs: Map<string, TapeMessage[]> };
let clean: Tape;
let faulty: Tape;

async function build(name: string, faults: typeof faultOpts): Promise<Tape> {
  const dir = path.join(tmp.dir, name);
  const report = await generate({ ...base, out: dir, faults });
  const truth = JSON.parse(fs.readFileSync(path.join(dir, 'faults.json'), 'utf8')) as Truth;
  const ws = report.files.ws.map((f) => path.join(dir, f));
  const lake = path.join(dir, 'lake');
  const ing = await runIngest(ws, { lakeDir: lake, derived: false });
  expect(ing.failed).toBe(0);
  const msgs = new Map(report.files.ws.map((f) => [path.basename(f, '.jsonl'), tapeMessages(path.join(dir, f))]));
  return { dir, lake, report, truth, msgs };
}

/** seq of a line (1-based) of a day's written tape: one message per line. */
function seqOf(t: Tape, date: string, line: number): string {
  return String(t.msgs.get(date)![line - 1]!.seq);
}

async function rows(t: Tape, dir: string, select: (from: string) => string): Promise<Record<string, unknown>[]> {
  const list = files(t.lake, dir);
  if (list === '[]') return [];
  return lakeRows(select(`read_parquet(${list}, union_by_name = true)`));
}

const bookCheckpoints = (t: Tape): Promise<Record<string, unknown>[]> =>
  rows(t, 'checkpoints', (f) => `SELECT asset_id, seq::VARCHAR AS seq, ok FROM ${f} WHERE kind = 'book' ORDER BY asset_id, seq`);
const incidents = (t: Tape): Promise<Record<string, unknown>[]> =>
  rows(
    t,
    'incidents',
    (f) =>
      `SELECT asset_id, kind, seq::VARCHAR AS seq, epoch_ms(from_ts)::DOUBLE AS from_ms, epoch_ms(to_ts)::DOUBLE AS to_ms FROM ${f} ORDER BY asset_id, seq, kind`,
  );
const key = (r: Record<string, unknown>): string => `${String(r.asset_id)}@${String(r.seq)}`;

/**
 * From the independent replay: failing book checkpoints, and per token in arrival order the runs of failing top
 * checks (a run ends at a passing top check or a book) — the first of each run, and the token's next
 * level-carrying message after it.
 */
function topRuns(t: Tape): { failedBooks: Set<string>; firstOfRun: Set<string>; afterTop: Set<string> } {
  const books = new Map();
  const failedBooks = new Set<string>();
  const firstOfRun = new Set<string>();
  const afterTop = new Set<string>();
  const topOk = new Map<string, boolean>();
  const all: TapeMessage[] = [];
  for (const f of t.report.files.ws) {
    const msgs = t.msgs.get(path.basename(f, '.jsonl'))!;
    all.push(...msgs);
    for (const c of replayIntegrity(msgs, books, { trades: true }).checkpoints) {
      if (c.kind === 'book' && !c.ok) failedBooks.add(`${c.asset_id}@${c.seq}`);
      if (c.kind === 'top') topOk.set(`${c.asset_id}@${c.seq}`, c.ok);
    }
  }
  const state = new Map<string, { bad: boolean; mark: boolean }>();
  for (const { msg, seq } of all) {
    if (msg.event_type !== 'book' && msg.event_type !== 'price_change') continue;
    const tokens = msg.event_type === 'book' ? [String(msg.asset_id)] : [...new Set(entriesOf(msg).map((e) => e.asset_id))];
    for (const tok of tokens) {
      const s = state.get(tok) ?? { bad: false, mark: false };
      state.set(tok, s);
      if (s.mark) afterTop.add(`${tok}@${seq}`);
      s.mark = false;
      if (msg.event_type === 'book') s.bad = false;
      const ok = topOk.get(`${tok}@${seq}`);
      if (ok === false) {
        if (!s.bad) {
          firstOfRun.add(`${tok}@${seq}`);
          s.mark = true;
        }
        s.bad = true;
      } else if (ok === true) s.bad = false;
    }
  }
  return { failedBooks, firstOfRun, afterTop };
}

beforeAll(async () => {
  clean = await build('clean', { dropRate: 0, silences: [], duplicates: 0, crossed: 0 });
  faulty = await build('faulty', faultOpts);
}, 120_000);

describe('generator faults and their truth', () => {
  it('injects nothing by default, and the same clean tape under the faults', () => {
    expect(clean.truth.faults).toEqual([]);
    expect(clean.report.faults).toMatchObject({ drops: 0, silences: 0, duplicates: 0, crossed: 0 });
    const n = (k: string): number => faulty.truth.faults.filter((f) => f.kind === k).length;
    expect(n('drop')).toBeGreaterThan(5);
    // Every failing checkpoint of the faulty tape has an injected fault in its stretch.
    for (const c of faulty.truth.failed_checkpoints) expect(c.causes.length, `${c.asset_id} line ${c.line}`).toBeGreaterThan(0);
    expect(n('silence')).toBe(1);
    expect(n('duplicate')).toBe(4);
    expect(n('crossed')).toBe(4);
    // Every line of the faulty tape is a clean line, except the inserted crossed updates.
    for (const f of clean.report.files.ws) {
      const cleanLines = new Set(fs.readFileSync(path.join(clean.dir, f), 'utf8').split('\n'));
      const extra = fs
        .readFileSync(path.join(faulty.dir, f), 'utf8')
        .split('\n')
        .filter((l) => !cleanLines.has(l));
      expect(extra.length).toBe(faulty.truth.faults.filter((x) => x.kind === 'crossed' && `ws/${x.date}.jsonl` === f).length);
    }
  });

  it('takes the faults as zod-validated CLI flags', () => {
    const a = parseGenerateArgs([
      ...['--markets', '2', '--days', '1', '--seed', '1', '--out', '/tmp/x'],
      ...['--drop-rate', '0.05', '--silence', '2025-09-14T12:00:00Z+600,2025-09-14T13:00:00Z+60', '--duplicates', '3', '--crossed', '1'],
    ]);
    expect(a['drop-rate']).toBe(0.05);
    expect(a.silence).toEqual([
      { fromMs: SILENCE_FROM, seconds: 600 },
      { fromMs: SILENCE_FROM + 3_600_000, seconds: 60 },
    ]);
    expect(a.duplicates).toBe(3);
    expect(a.crossed).toBe(1);
    const bad = (flags: string[]): void => {
      expect(() => parseGenerateArgs(['--markets', '2', '--days', '1', '--seed', '1', '--out', '/tmp/x', ...flags])).toThrow();
    };
    bad(['--drop-rate', '0.9']);
    bad(['--drop-rate', 'x']);
    bad(['--silence', '2025-09-14 12:00+600']);
    bad(['--silence', '2025-02-31T12:00:00Z+600']);
    bad(['--duplicates', '-1']);
    bad(['--crossed', '1.5']);
  });

  it('truth agrees with an independent replay of the written tapes (trades applied as the venue sends them)', () => {
    for (const t of [clean, faulty]) {
      const books = new Map();
      let failed = 0;
      let passed = 0;
      for (const f of t.report.files.ws) {
        const r = replayIntegrity(t.msgs.get(path.basename(f, '.jsonl'))!, books, { trades: true });
        failed += r.book.failed;
        passed += r.book.passed;
      }
      expect({ passed, failed }).toEqual(t.truth.checkpoints);
    }
  });
});

describe('the ingest finds the injected faults', () => {
  it('a clean tape: every checkpoint passes and there is no incident at all', async () => {
    // Midnight is checked too: books of the second day compared with the first day's replay all pass.
    const across = await rows(
      clean,
      'checkpoints',
      (f) =>
        `SELECT count(*)::INTEGER AS n, count(*) FILTER (WHERE ok)::INTEGER AS ok FROM ${f} WHERE kind = 'book' AND CAST(since_ts AS DATE) < CAST(ts AS DATE)`,
    );
    expect(across[0]!.n).toBeGreaterThan(0);
    expect(across[0]!.ok).toBe(across[0]!.n);
    expect(clean.truth.checkpoints.failed).toBe(0);
    const cps = await bookCheckpoints(clean);
    expect(cps.length).toBe(clean.truth.checkpoints.passed);
    expect(cps.filter((c) => !c.ok)).toEqual([]);
    expect(await incidents(clean)).toEqual([]);
  });

  it('every failing checkpoint is one the truth expects, and every detectable drop is caught in its stretch', async () => {
    const cps = await bookCheckpoints(faulty);
    const want = faulty.truth.failed_checkpoints.map((c) => `${c.asset_id}@${seqOf(faulty, c.date, c.line)}`).sort();
    expect(cps.filter((c) => !c.ok).map(key)).toEqual(want);
    expect(cps.filter((c) => c.ok).length).toBe(faulty.truth.checkpoints.passed);
    const failing = new Set(want);
    const passing = new Set(cps.filter((c) => c.ok).map(key));
    const at = (by: { asset_id: string; line: number; recv_ms: number }): string =>
      `${by.asset_id}@${seqOf(faulty, new Date(by.recv_ms).toISOString().slice(0, 10), by.line)}`;
    const drops = faulty.truth.faults.flatMap((f) => (f.kind === 'drop' ? [f] : []));
    let found = 0;
    let healed = 0;
    let unclosed = 0;
    for (const d of drops) {
      // Per token of the lost message: the checkpoint closing its stretch fails (found), or passes because a
      // later update of the same level overwrote the loss (the book is right again), or none follows.
      for (const by of d.detected_by) expect(failing.has(at(by)), `drop ${d.id} ${at(by)}`).toBe(true);
      for (const by of d.healed_by) expect(passing.has(at(by)), `drop ${d.id} ${at(by)}`).toBe(true);
      if (d.detected_by.length) found++;
      else if (d.healed_by.length) healed++;
      else unclosed++;
    }
    expect(found + healed + unclosed).toBe(drops.length);
    expect(found).toBeGreaterThan(2);
  });

  it('the same tape ingested one day per batch gives the same checkpoints and incidents (state carried across batches)', async () => {
    const lake = path.join(faulty.dir, 'lake-by-day');
    for (const f of faulty.report.files.ws) {
      const r = await runIngest([path.join(faulty.dir, f)], { lakeDir: lake, derived: false });
      expect(r.failed).toBe(0);
    }
    const split = await bookCheckpoints({ ...faulty, lake });
    expect(split).toEqual(await bookCheckpoints(faulty));
    const detailed = (t: Tape): Promise<Record<string, unknown>[]> =>
      rows(t, 'incidents', (f) => `SELECT asset_id, kind, from_ts, to_ts, seq::VARCHAR AS seq, detail FROM ${f} ORDER BY ALL`);
    expect(await detailed({ ...faulty, lake })).toEqual(await detailed(faulty));
  });

  it('duplicates, the silence and the crossed updates are found at their true times', async () => {
    const inc = await incidents(faulty);
    for (const f of faulty.truth.faults) {
      if (f.kind === 'duplicate') {
        for (const t of f.tokens) {
          expect(inc, `duplicate ${t} line ${f.line}`).toContainEqual(
            expect.objectContaining({ asset_id: t, kind: 'duplicate', seq: seqOf(faulty, f.date, f.line) }),
          );
        }
      } else if (f.kind === 'crossed') {
        expect(inc).toContainEqual(expect.objectContaining({ asset_id: f.asset_id, kind: 'crossed', seq: seqOf(faulty, f.date, f.line) }));
      } else if (f.kind === 'silence') {
        // The capture's receive times around the window: the last message before it and the first after it.
        const all = faulty.msgs.get(f.date)!;
        const before = Math.max(...all.filter((m) => m.recvMs < f.from_ms).map((m) => m.recvMs));
        const after = Math.min(...all.filter((m) => m.recvMs >= f.to_ms).map((m) => m.recvMs));
        const disc = inc.filter((i) => i.kind === 'disconnect');
        expect(disc.length).toBeGreaterThan(0);
        for (const d of disc) expect({ from: d.from_ms, to: d.to_ms }).toEqual({ from: before, to: after });
      }
    }
  });

  it('book snapshots and top-of-book rows are verified exactly inside verified stretches', async () => {
    for (const t of [clean, faulty]) {
      // Stretches (previous book, book] from the independent replay; a stretch is good when its book passed and
      // the truth has no top mismatch or crossed book inside it.
      const books = new Map();
      const stretches = new Map<string, { a: bigint; b: bigint; aMs: number; bMs: number; good: boolean }[]>();
      const breaks = new Map<string, bigint[]>();
      for (const x of [...t.truth.top_mismatches, ...t.truth.crossed_books])
        breaks.set(x.asset_id, [...(breaks.get(x.asset_id) ?? []), BigInt(seqOf(t, x.date, x.line))]);
      for (const f of t.report.files.ws) {
        for (const c of replayIntegrity(t.msgs.get(path.basename(f, '.jsonl'))!, books, { trades: true }).checkpoints) {
          if (c.kind !== 'book') continue;
          const good = c.ok && !(breaks.get(c.asset_id) ?? []).some((s) => s > c.sinceSeq! && s <= c.seq);
          stretches.set(c.asset_id, [...(stretches.get(c.asset_id) ?? []), { a: c.sinceSeq!, b: c.seq, aMs: c.sinceMs!, bMs: c.recvMs, good }]);
        }
      }
      const snaps = await rows(t, 'book_snapshots', (f) => `SELECT asset_id, epoch_ms(ts)::DOUBLE AS ts, reason, verified FROM ${f}`);
      const tops = await rows(t, 'top_of_book', (f) => `SELECT asset_id, seq::VARCHAR AS seq, verified FROM ${f}`);
      expect(snaps.length).toBeGreaterThan(100);
      // A snapshot at a `book` message is the venue's own book; an interval one belongs to the stretch holding its instant.
      const snapWrong = snaps.filter(
        (r) =>
          r.verified !==
          (r.reason === 'book' || (stretches.get(String(r.asset_id)) ?? []).some((s) => s.good && s.aMs < Number(r.ts) && Number(r.ts) <= s.bMs)),
      );
      expect(snapWrong).toEqual([]);
      // A top-of-book row at a book message is the venue's; any other belongs to the stretch holding its seq.
      const bookSeqs = new Set([...stretches.values()].flat().map((s) => `${s.b}`));
      for (const list of stretches.values()) for (const s of list) bookSeqs.add(`${s.a}`);
      const topWrong = tops.filter((r) => {
        const seq = BigInt(String(r.seq));
        const want = bookSeqs.has(String(r.seq)) || (stretches.get(String(r.asset_id)) ?? []).some((s) => s.good && s.a < seq && seq <= s.b);
        return r.verified !== want;
      });
      expect(topWrong).toEqual([]);
      if (t === faulty) expect(snaps.some((r) => r.verified === false && r.reason !== 'book')).toBe(true);
    }
  });

  it('l2.after_gap marks the failing books and the message after each first top mismatch', async () => {
    for (const t of [clean, faulty]) {
      const { failedBooks, afterTop } = topRuns(t);
      const want = new Set([...failedBooks, ...afterTop]);
      const got = await rows(t, 'l2', (f) => `SELECT DISTINCT asset_id, seq::VARCHAR AS seq FROM ${f} WHERE after_gap ORDER BY asset_id, seq`);
      expect(got.map(key)).toEqual([...want].sort());
      if (t === faulty) expect(want.size).toBeGreaterThan(5);
    }
  });

  it('top mismatches (one per run), crossed books and duplicates are exactly the incidents and top checkpoints', async () => {
    const { firstOfRun } = topRuns(faulty);
    expect(firstOfRun.size).toBeGreaterThan(0);
    const inc = await incidents(faulty);
    const of = (kind: string): string[] => inc.filter((i) => i.kind === kind).map(key);
    expect(of('top_mismatch')).toEqual([...firstOfRun].sort());
    const tops = await rows(faulty, 'checkpoints', (f) => `SELECT asset_id, seq::VARCHAR AS seq, ok FROM ${f} WHERE kind = 'top' ORDER BY asset_id, seq`);
    expect(tops.filter((c) => !c.ok).map(key)).toEqual([...firstOfRun].sort());
    expect(of('crossed')).toEqual(faulty.truth.crossed_books.map((c) => `${c.asset_id}@${seqOf(faulty, c.date, c.line)}`).sort());
    const dups = faulty.truth.faults.flatMap((f) => (f.kind === 'duplicate' ? f.tokens.map((t) => `${t}@${seqOf(faulty, f.date, f.line)}`) : []));
    expect(of('duplicate')).toEqual(dups.sort());
  });

  it('coverage per token and day equals the truth', async () => {
    for (const t of [clean, faulty]) {
      const cov = await rows(
        t,
        'coverage',
        (f) =>
          `SELECT strftime(date, '%Y-%m-%d') AS date, asset_id, status, seconds_verified, seconds_degraded, seconds_unverified,
                  checkpoints_passed::INTEGER AS checkpoints_passed, checkpoints_failed::INTEGER AS checkpoints_failed,
                  messages::INTEGER AS messages, epoch_ms(first_recv_ts)::DOUBLE AS first_recv_ms, epoch_ms(last_recv_ts)::DOUBLE AS last_recv_ms
           FROM ${f} ORDER BY asset_id, date`,
      );
      // The lake agrees with itself: a token-day's messages are its distinct messages in l2.
      const l2 = await rows(
        t,
        'l2',
        (f) => `SELECT strftime(recv_ts, '%Y-%m-%d') AS date, asset_id, count(DISTINCT seq)::INTEGER AS n FROM ${f} GROUP BY ALL ORDER BY asset_id, date`,
      );
      expect(cov.filter((c) => c.status !== 'missing').map((c) => ({ date: c.date, asset_id: c.asset_id, n: c.messages }))).toEqual(l2);
      const want = [...t.truth.coverage].sort((a, b) => (a.asset_id + a.date < b.asset_id + b.date ? -1 : 1));
      expect(cov).toEqual(want);
    }
    // The statuses the tapes exercise.
    expect(new Set(clean.truth.coverage.map((c) => c.status))).toEqual(new Set(['verified', 'unverified']));
    expect(new Set(faulty.truth.coverage.map((c) => c.status))).toContain('degraded');
  });
});

describe('trades between books (hand-built tape)', () => {
  it('a price_change after a trade sets the level’s new total: the trade is not taken off it again', async () => {
    const asset = '4242424242424242424242424242424242424242424242424242424242424242424242424242';
    const m = '0x' + 'ab'.repeat(32);
    const t0 = Date.parse('2025-03-03T10:00:00Z');
    const lines = [
      {
        event_type: 'book',
        asset_id: asset,
        market: m,
        timestamp: String(t0),
        hash: 'h1',
        bids: [{ price: '0.5', size: '100' }],
        asks: [{ price: '0.52', size: '40' }],
      },
      // A taker sells 10 into the 0.50 bid (the venue would send the book after it) ...
      { event_type: 'last_trade_price', asset_id: asset, market: m, timestamp: String(t0 + 1000), price: '0.5', size: '10', side: 'SELL', fee_rate_bps: '0' },
      // ... then a new order of 5 at 0.50: the level's new total is 95 (100 − 10 + 5).
      {
        event_type: 'price_change',
        asset_id: asset,
        market: m,
        timestamp: String(t0 + 2000),
        hash: 'h2',
        changes: [{ price: '0.5', side: 'BUY', size: '95' }],
      },
      {
        event_type: 'book',
        asset_id: asset,
        market: m,
        timestamp: String(t0 + 3000),
        hash: 'h3',
        bids: [{ price: '0.5', size: '95' }],
        asks: [{ price: '0.52', size: '40' }],
      },
      // A plain trade followed by its book: 95 − 20 = 75.
      { event_type: 'last_trade_price', asset_id: asset, market: m, timestamp: String(t0 + 4000), price: '0.5', size: '20', side: 'SELL', fee_rate_bps: '0' },
      {
        event_type: 'book',
        asset_id: asset,
        market: m,
        timestamp: String(t0 + 4000),
        hash: 'h4',
        bids: [{ price: '0.5', size: '75' }],
        asks: [{ price: '0.52', size: '40' }],
      },
    ];
    const dir = path.join(tmp.dir, 'hand');
    fs.mkdirSync(dir, { recursive: true });
    const file = path.join(dir, 'trades.jsonl');
    fs.writeFileSync(file, lines.map((l) => JSON.stringify(l)).join('\n') + '\n');
    const oracle = replayIntegrity(tapeMessages(file), new Map(), { trades: true });
    expect(oracle.book).toEqual({ passed: 2, failed: 0 });
    const lake = path.join(dir, 'lake');
    expect((await runIngest([file], { lakeDir: lake, derived: false })).failed).toBe(0);
    const cps = await lakeRows(`SELECT seq::VARCHAR AS seq, ok FROM read_parquet(${files(lake, 'checkpoints')}) WHERE kind = 'book' ORDER BY seq`);
    expect(cps).toEqual(oracle.checkpoints.map((c) => ({ seq: String(c.seq), ok: c.ok })));
    // No incident at all (the lake has no incidents file).
    expect(files(lake, 'incidents')).toBe('[]');
  });
});
