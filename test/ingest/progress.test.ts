import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ProgressMeter, type IngestProgress } from '../../ingest/progress.js';
import type { IngestReport } from '../../ingest/run.js';
import { runCli } from './lakeutil.js';
import { tempDir } from './oracle.js';

/**
 * What an operator sees while `pmlake ingest` runs: on a terminal (a real pseudo-terminal from script(1)) one line
 * redrawn in place; elsewhere pino lines carrying the same figures; the closing report on stdout stays JSON.
 */

const FIX = path.resolve('test/fixtures/venue');
const INPUTS = ['markets', 'ws', 'rest'].map((d) => path.join(FIX, d));
const tmp = tempDir('pmlake-progress-');
afterAll(() => tmp.cleanup());
const ERASE = '\r\x1b[2K';

/** The inputs' files and bytes, counted here (the fixture folders hold no dot files or documentation). */
function inputFiles(): { count: number; bytes: number } {
  const files = INPUTS.flatMap((d) => fs.readdirSync(d).map((n) => path.join(d, n)));
  return { count: files.length, bytes: files.reduce((a, f) => a + fs.statSync(f).size, 0) };
}

/** Runs `cmd` under script(1): its stdin, stdout and stderr are a pseudo-terminal; resolves with what the terminal showed. */
function onTerminal(cmd: string, env: Record<string, string>): Promise<{ code: number | null; screen: string }> {
  const child = spawn('script', ['-qfec', cmd, '/dev/null'], { cwd: path.resolve('.'), env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let screen = '';
  child.stdout.on('data', (d: Buffer) => (screen += d.toString()));
  child.stderr.on('data', (d: Buffer) => (screen += d.toString()));
  return new Promise((resolve, reject) => {
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, screen }));
  });
}

describe('ingest progress', () => {
  it('on a terminal: one line redrawn in place, cut to the width, erased before other output; stdout stays JSON', { timeout: 90_000 }, async () => {
    const lake = path.join(tmp.dir, 'tty-lake');
    const out = path.join(tmp.dir, 'tty-stdout.json');
    // stdout goes to a file, stderr stays on the terminal (as `pmlake ingest … > report.json` at a shell); 60 columns.
    const cmd = `stty cols 60; exec '${process.execPath}' --import tsx src/cli.ts ingest ${INPUTS.map((i) => `'${i}'`).join(' ')} > '${out}'`;
    // Debug level: the metadata handler logs a line per file while the progress line is up.
    const run = await onTerminal(cmd, { PMLAKE_LAKE: lake, LOG_LEVEL: 'debug' });
    expect(run.code, run.screen).toBe(0);
    const { count } = inputFiles();

    const segments = run.screen.split(ERASE);
    const lines = segments.filter((s) => s.startsWith('ingest '));
    expect(lines.length).toBeGreaterThan(2);
    for (const l of lines) {
      // Nothing was ever written after the line without erasing it first, and it fits the 60 columns.
      expect(l, JSON.stringify(l)).not.toMatch(/[\n\r]/);
      expect([...l].length).toBeLessThanOrEqual(59);
    }
    const counts = lines.map((l) => /^ingest (\d+)\/(\d+) inputs/.exec(l)).map((m) => [Number(m![1]), Number(m![2])]);
    expect(new Set(counts.map((c) => c[1]))).toEqual(new Set([count]));
    const done = counts.map((c) => c[0]!);
    expect(done).toEqual([...done].sort((a, b) => a - b));
    expect(done.at(-1)).toBe(count);
    // The pino lines and the closing summary each start on an erased line.
    const others = segments.filter((s) => s !== '' && !s.startsWith('ingest '));
    expect(others.some((s) => s.includes('"msg":"metadata staged"'))).toBe(true);
    expect(others.some((s) => s.startsWith(`pmlake ingest: ${count} files landed`))).toBe(true);
    // The last thing drawn is an erase, so the terminal is left without a progress line.
    expect(run.screen.lastIndexOf(ERASE)).toBeLessThan(run.screen.indexOf('pmlake ingest: '));

    const report = JSON.parse(fs.readFileSync(out, 'utf8')) as IngestReport;
    expect(report.ingested).toBe(count);
  });

  it('elsewhere: pino lines every --progress-seconds with the figures as fields', { timeout: 90_000 }, async () => {
    const run = await runCli(['ingest', '--progress-seconds=0.3', ...INPUTS], { PMLAKE_LAKE: path.join(tmp.dir, 'log-lake'), LOG_LEVEL: 'info' });
    expect(run.code, run.stderr).toBe(0);
    const report = JSON.parse(run.stdout) as IngestReport;
    // No terminal codes off a terminal.
    expect(run.stderr.includes('\r') || run.stderr.includes(ERASE.slice(1))).toBe(false);
    const lines = run.stderr
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l) as Record<string, unknown>)
      .filter((l) => l.msg === 'ingest progress');
    expect(lines.length).toBeGreaterThanOrEqual(2);
    const { count, bytes } = inputFiles();
    for (const l of lines) {
      expect(l).toMatchObject({ inputs: count, bytes });
      for (const k of ['inputs_done', 'bytes_done', 'level_updates', 'level_updates_per_second', 'elapsed_seconds', 'batches'])
        expect(typeof l[k], k).toBe('number');
      expect(typeof l.phase).toBe('string');
    }
    const done = lines.map((l) => Number(l.inputs_done));
    expect(done).toEqual([...done].sort((a, b) => a - b));
    // The last line is the end: everything done, the report's own counts.
    expect(lines.at(-1)).toMatchObject({
      phase: 'done',
      inputs_done: count,
      bytes_done: bytes,
      level_updates: report.counts.level_updates,
      batches: report.batches,
      eta_seconds: 0,
    });
  });
});

describe('the progress meter', () => {
  const at = (p: Partial<IngestProgress>): IngestProgress => ({
    event: 'input',
    phase: 'stage',
    inputs: 10,
    inputs_done: 0,
    bytes: 1000,
    bytes_done: 0,
    bytes_skipped: 0,
    level_updates: 0,
    batches: 0,
    ...p,
  });

  it('takes the ETA from bytes staged, leaves skipped inputs out of the rate, and decays rather than drops in a pause', () => {
    const m = new ProgressMeter(60, 0);
    m.update(at({ event: 'plan' }), 0);
    expect(m.figures(0).eta_seconds).toBeNull();
    // One input of 100 bytes in 10 s: 10 B/s, 900 bytes left.
    m.update(at({ inputs_done: 1, bytes_done: 100, level_updates: 500 }), 10_000);
    const f = m.figures(10_000);
    expect(f.bytes_per_second).toBe(10);
    expect(f.eta_seconds).toBe(90);
    expect(f.level_updates_per_second).toBe(50);
    // A 500-byte input found in the ledger a second later: 400 bytes left at about the same rate (not 600 B/s).
    m.update(at({ inputs_done: 2, bytes_done: 600, bytes_skipped: 500, level_updates: 500 }), 11_000);
    const g = m.figures(11_000);
    expect(g.eta_seconds).toBeGreaterThan(40);
    expect(g.eta_seconds).toBeLessThan(48);
    // A minute with nothing finished (a batch's merges): the rate falls, the ETA grows, and is still told.
    const h = m.figures(71_000);
    expect(h.eta_seconds).not.toBeNull();
    expect(h.eta_seconds!).toBeGreaterThan(g.eta_seconds!);
    expect(h.elapsed_seconds).toBe(71);
    // Every byte staged, the last batch still being written: no ETA is claimed until the end.
    m.update(at({ event: 'phase', phase: 'merge_l2', inputs_done: 10, bytes_done: 1000, bytes_skipped: 500 }), 80_000);
    expect(m.figures(80_000).eta_seconds).toBeNull();
    m.update(at({ event: 'end', phase: 'done', inputs_done: 10, bytes_done: 1000, bytes_skipped: 500 }), 90_000);
    expect(m.figures(90_000).eta_seconds).toBe(0);
  });
});
