import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import zlib from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generate } from '../../sim/generate/index.js';
import type { DryRunReport } from '../../ingest/dry-run.js';
import { surveyTapeJson } from '../../ingest/ws/survey.js';
import { openLakeDb } from '../../src/lake/duckdb.js';
import type { IngestReport } from '../../ingest/run.js';
import { listing, runCli } from './lakeutil.js';
import { tempDir } from './oracle.js';

/**
 * `pmlake ingest --dry-run` over the fixtures and generated tape (JSON lines, gzip, a capture file, a copy, a file of
 * no known format), checked against plain TypeScript reading the same files and against the real ingest run after it.
 */

const FIX = path.resolve('test/fixtures/venue');
const tmp = tempDir('pmlake-dry-run-');
afterAll(() => tmp.cleanup());
const HOUR = 3_600_000;

/** Level updates per generated day, as the generator counted them while writing. */
const levelsOfDay = new Map<string, number>();
const inputs = {
  plain: '',
  gz: '',
  fills: '',
  capture: '',
  copy: '',
  unknown: '',
  frames: path.join(FIX, 'ws/2026-08-14_frames_price_change_v2.jsonl'),
  csv: path.join(FIX, 'ws/2025-01-25_price_change_v1_db_export.csv'),
};
const lake = path.join(tmp.dir, 'lake');
let gen = '';
const sysTmp = path.join(tmp.dir, 'systmp');

beforeAll(async () => {
  gen = path.join(tmp.dir, 'gen');
  await generate({ markets: 30, days: 3, seed: 5, start: '2025-10-01', out: gen, workers: 0 }, (r) => levelsOfDay.set(r.date, r.counts.level_updates));
  const dir = (name: string): string => {
    const d = path.join(tmp.dir, 'in', name);
    fs.mkdirSync(d, { recursive: true });
    return d;
  };
  inputs.plain = path.join(dir('ws'), '2025-10-01.jsonl');
  fs.copyFileSync(path.join(gen, 'ws/2025-10-01.jsonl'), inputs.plain);
  inputs.fills = path.join(dir('fills'), '2025-10-01.jsonl');
  fs.copyFileSync(path.join(gen, 'fills/2025-10-01.jsonl'), inputs.fills);
  inputs.copy = path.join(dir('ws-copy'), 'same-bytes.jsonl');
  fs.copyFileSync(inputs.plain, inputs.copy);
  inputs.gz = path.join(dir('gz'), '2025-10-02.jsonl.gz');
  fs.writeFileSync(inputs.gz, zlib.gzipSync(fs.readFileSync(path.join(gen, 'ws/2025-10-02.jsonl'))));
  // Day 3 as a recorder would have captured it: each venue line one frame, received 7 ms after its newest timestamp.
  const frames = fs.readFileSync(path.join(gen, 'ws/2025-10-03.jsonl'), 'utf8').split('\n').filter(Boolean);
  let recv = Number((JSON.parse(frames[0]!) as { timestamp: string }).timestamp);
  const lines = [{ recv_ms: recv - 5, event: 'start', format: 1, recorder: 'r1', session: 's1', url: 'ws://127.0.0.1:1/ws/market' }];
  for (const f of frames) {
    recv = Math.max(recv, Number((JSON.parse(f) as { timestamp: string }).timestamp) + 7);
    lines.push({ recv_ms: recv, conn: 0, frame: f } as never);
  }
  inputs.capture = path.join(dir('capture'), 'market-20251003T000000Z-r1-abcdef01.capture.jsonl');
  fs.writeFileSync(inputs.capture, lines.map((l) => JSON.stringify(l)).join('\n') + '\n');
  inputs.unknown = path.join(dir('other'), 'notes.bin');
  fs.writeFileSync(inputs.unknown, Buffer.from([0, 1, 2, 3, 250, 251]));
  fs.mkdirSync(sysTmp);
});

const args = (): string[] => [path.join(tmp.dir, 'in'), path.join(FIX, 'ws'), path.join(FIX, 'rest')];

/** Every file under the inputs, walked here (sorted, dot files skipped). */
function inputFiles(): string[] {
  const out: string[] = [];
  const walk = (p: string): void => {
    if (fs.statSync(p).isDirectory()) for (const n of fs.readdirSync(p).sort()) walk(path.join(p, n));
    else out.push(p);
  };
  for (const a of args()) walk(a);
  return out;
}

/** The span of a file of venue messages, one per line: the smallest and largest `timestamp`. */
function lineSpan(text: string): [number, number] {
  const ts = text
    .split('\n')
    .filter(Boolean)
    .map((l) => Number((JSON.parse(l) as { timestamp: string }).timestamp));
  return [Math.min(...ts), Math.max(...ts)];
}

function csvSpan(text: string): [number, number] {
  // `2025-01-25 18:15:47.925 +0100` → ISO 8601 with the offset, parsed by Date.
  const ts = [...text.matchAll(/,(\d{4}-\d\d-\d\d) (\d\d:\d\d:\d\d(?:\.\d+)?) ([+-]\d\d)(\d\d),/g)].map((m) => Date.parse(`${m[1]}T${m[2]}${m[3]}:${m[4]}`));
  return [Math.min(...ts), Math.max(...ts)];
}

async function dryRun(): Promise<DryRunReport> {
  const run = await runCli(['ingest', '--dry-run', ...args()], { PMLAKE_LAKE: lake, TMPDIR: sysTmp });
  expect(run.code, run.stderr).toBe(0);
  expect(run.stderr).toContain('pmlake ingest --dry-run: nothing was written');
  const report = JSON.parse(run.stdout) as DryRunReport;
  // The table on stderr: a row per input.
  for (const i of report.inputs)
    expect(run.stderr).toContain(path.relative(process.cwd(), i.path).startsWith('..') ? i.path : path.relative(process.cwd(), i.path));
  return report;
}

describe('pmlake ingest --dry-run', () => {
  it('lists every input with the format, span and rows the real ingest then lands, and writes nothing', { timeout: 90_000 }, async () => {
    const dry = await dryRun();
    // Nothing created: no lake directory, nothing of the run left in the temp directory.
    expect(fs.existsSync(lake)).toBe(false);
    expect(fs.readdirSync(sysTmp).filter((n) => n.startsWith('pmlake-') && n !== 'pmlake-duckdb-ext')).toEqual([]);

    const files = inputFiles();
    expect(dry.inputs.map((i) => i.path)).toEqual(files);
    const byPath = new Map(dry.inputs.map((i) => [i.path, i]));
    for (const f of files) {
      const i = byPath.get(f)!;
      expect(i.bytes).toBe(fs.statSync(f).size);
      expect(i.sha256).toBe(createHash('sha256').update(fs.readFileSync(f)).digest('hex'));
    }
    expect(byPath.get(inputs.unknown)).toMatchObject({ format: null, would: 'not_recognised' });
    expect(byPath.get(inputs.copy)!.would).toBe('duplicate');
    expect(byPath.get(inputs.plain)!.would).toBe('land');

    // Spans against the files read whole here.
    const spans: [string, [number, number]][] = [
      [inputs.plain, lineSpan(fs.readFileSync(inputs.plain, 'utf8'))],
      [inputs.gz, lineSpan(zlib.gunzipSync(fs.readFileSync(inputs.gz)).toString('utf8'))],
      [inputs.frames, lineSpan(fs.readFileSync(inputs.frames, 'utf8'))],
      [inputs.csv, csvSpan(fs.readFileSync(inputs.csv, 'utf8'))],
    ];
    const capLines = fs.readFileSync(inputs.capture, 'utf8').trimEnd().split('\n');
    const recvOf = (l: string): number => (JSON.parse(l) as { recv_ms: number }).recv_ms;
    spans.push([inputs.capture, [recvOf(capLines[0]!), recvOf(capLines.at(-1)!)]]);
    const blocks = fs
      .readFileSync(inputs.fills, 'utf8')
      .trimEnd()
      .split('\n')
      .map((l) => (JSON.parse(l) as { block_timestamp: number }).block_timestamp * 1000);
    spans.push([inputs.fills, [Math.min(...blocks), Math.max(...blocks)]]);
    for (const [f, [from, to]] of spans) {
      const i = byPath.get(f)!;
      expect([i.from, i.to], f).toEqual([new Date(from).toISOString(), new Date(to).toISOString()]);
      expect(i.hours, f).toBe(Math.floor(to / HOUR) - Math.floor(from / HOUR) + 1);
    }
    // The generated days are sampled (larger than the sample): their rows are estimates of the generator's counts, within 5 %.
    for (const [f, day] of [
      [inputs.plain, '2025-10-01'],
      [inputs.gz, '2025-10-02'],
      [inputs.capture, '2025-10-03'],
    ] as const) {
      const i = byPath.get(f)!;
      expect(i.estimated).toBe(true);
      expect(Math.abs(i.rows! / levelsOfDay.get(day)! - 1), f).toBeLessThan(0.05);
    }
    // Totals: what would land, over distinct hours.
    const landing = dry.inputs.filter((i) => i.would === 'land');
    expect(dry.totals.inputs).toBe(landing.length);
    expect(dry.totals.bytes).toBe(landing.reduce((a, i) => a + i.bytes, 0));
    expect(dry.totals.by_format['ws-capture']!.hours).toBe(24);
    expect(dry.would).toEqual({ land: files.length - 2, in_ledger: 0, duplicate: 1, not_recognised: 1 });

    // The real ingest: each file lands with the handler the dry run named (the ledger records it).
    const real = await runCli(['ingest', ...args()], { PMLAKE_LAKE: lake, TMPDIR: sysTmp });
    expect(real.code, real.stderr).toBe(0);
    const report = JSON.parse(real.stdout) as IngestReport;
    expect(report.skipped).toBe(1);
    expect(report.issues).toContainEqual({ file: inputs.unknown, message: 'format not recognised; file skipped' });
    const ledger = fs
      .readFileSync(path.join(lake, '_ingest/ledger.jsonl'), 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { file: string; handler: string });
    expect(new Map(ledger.map((e) => [e.file, e.handler]))).toEqual(new Map(landing.map((i) => [i.path, i.format])));
    // Tape rows: the fixtures are read whole, so their count is the ingest's; the generated days are within 5 %.
    const generated = [...levelsOfDay.values()].reduce((a, b) => a + b, 0);
    const real_levels = report.counts.level_updates!;
    const tape = landing.filter((i) => i.format?.startsWith('ws-') && ![inputs.plain, inputs.gz, inputs.capture].includes(i.path));
    expect(tape.reduce((a, i) => a + i.rows!, 0)).toBe(real_levels - generated);
    // The fills file: its estimated trades against the trades the ingest added (the only fills input).
    const fillsRows = byPath.get(inputs.fills)!.rows!;
    expect(Math.abs(fillsRows / report.rows_added.trades! - 1)).toBeLessThan(0.05);
    expect(Math.abs((dry.totals.rows! - fillsRows) / real_levels - 1)).toBeLessThan(0.05);

    // Again over the landed lake: every input is in the ledger, and the lake is left exactly as it was.
    const before = listing(lake);
    const again = await dryRun();
    expect(listing(lake)).toEqual(before);
    expect(again.would).toEqual({ land: 0, in_ledger: files.length - 1, duplicate: 0, not_recognised: 1 });
    expect(again.totals.inputs).toBe(0);
  });
});

describe('the tape survey of a gzip file', () => {
  it('samples the same windows as of its plain bytes (offsets from the gzip trailer)', async () => {
    const instance = await openLakeDb({ allowedDirectories: [tmp.dir] });
    const conn = await instance.connect();
    try {
      const plain = path.join(gen, 'ws/2025-10-03.jsonl');
      const gz = path.join(tmp.dir, 'day3.jsonl.gz');
      fs.writeFileSync(gz, zlib.gzipSync(fs.readFileSync(plain)));
      const a = await surveyTapeJson(conn, plain);
      expect(a.rows).toBeGreaterThan(0);
      expect(await surveyTapeJson(conn, gz)).toEqual(a);
    } finally {
      conn.closeSync();
      instance.closeSync();
    }
  });
});
