import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generate, type GenerateReport } from '../../ingest/generate/index.js';
import { parseGenerateArgs } from '../../ingest/generate/cli.js';
import type { Truth } from '../../ingest/generate/faults.js';
import { runIngest } from '../../ingest/run.js';
import { lakeRows, tempDir } from './oracle.js';
import { replayIntegrity, tapeMessages, type TapeMessage } from './integrity-oracle.js';
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

const base = { markets: 5, days: 2, seed: 21, start: '2025-09-14', busy: 1, rate: 2, workers: 0 };
const SILENCE_FROM = Date.parse('2025-09-14T12:00:00Z');
const faultOpts = { dropRate: 0.003, silences: [{ fromMs: SILENCE_FROM, seconds: 1800 }], duplicates: 2, crossed: 2 };

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
    // The truth bridged the generator's own discontinuities (day starts, refills inside a trade's book).
    expect(clean.truth.bridged.day_start).toBeGreaterThan(0);
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
    expect(found / drops.length).toBeGreaterThan(0.6);
  });

  it('the same tape ingested one day per batch gives the same checkpoints (state carried across batches)', async () => {
    const lake = path.join(faulty.dir, 'lake-by-day');
    for (const f of faulty.report.files.ws) {
      const r = await runIngest([path.join(faulty.dir, f)], { lakeDir: lake, derived: false });
      expect(r.failed).toBe(0);
    }
    const split = await bookCheckpoints({ ...faulty, lake });
    expect(split).toEqual(await bookCheckpoints(faulty));
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

  it('coverage per token and day equals the truth', async () => {
    for (const t of [clean, faulty]) {
      const cov = await rows(
        t,
        'coverage',
        (f) =>
          `SELECT strftime(date, '%Y-%m-%d') AS date, asset_id, status, checkpoints_passed::INTEGER AS checkpoints_passed,
                  checkpoints_failed::INTEGER AS checkpoints_failed FROM ${f} ORDER BY asset_id, date`,
      );
      const want = t.truth.coverage
        .map((c) => ({
          date: c.date,
          asset_id: c.asset_id,
          status: c.status,
          checkpoints_passed: c.checkpoints_passed,
          checkpoints_failed: c.checkpoints_failed,
        }))
        .sort((a, b) => (a.asset_id + a.date < b.asset_id + b.date ? -1 : 1));
      expect(cov).toEqual(want);
    }
  });
});
