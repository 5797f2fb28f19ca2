import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FIXTURES } from '../helpers/query-lake.js';
import { tempDir } from '../helpers/server.js';
import { spawnCli } from './lakeutil.js';

/**
 * `pmlake ingest` names each issue it met — file, what, how many — in its JSON report (`issue_summary`) and in
 * the summary it prints for a person, over real venue captures: a REST capture whose /prices-history points
 * have no data set, a websocket capture with two lines cut short, and a file of no known format.
 */
describe('pmlake ingest: the summary names every issue', () => {
  const tmp = tempDir('pmlake-issues-');
  const input = path.join(tmp.dir, 'in');
  const prices = path.join(input, '2026-06-12_book_trades_prices_history.json');
  const damaged = path.join(input, 'frames_damaged.jsonl');
  const notes = path.join(input, 'notes.dat');
  let points = 0;
  let run: { code: number | null; stdout: string; stderr: string };

  beforeAll(async () => {
    fs.mkdirSync(input, { recursive: true });
    fs.copyFileSync(path.join(FIXTURES, 'rest', '2026-06-12_book_trades_prices_history.json'), prices);
    const capture = JSON.parse(fs.readFileSync(prices, 'utf8')) as { GET_prices_history: { history: unknown[] } };
    points = capture.GET_prices_history.history.length;
    // The real frames, lines 2 and 4 cut in half (a capture truncated mid-write).
    const lines = fs
      .readFileSync(path.join(FIXTURES, 'ws', '2026-08-14_frames_price_change_v2.jsonl'), 'utf8')
      .split('\n')
      .filter(Boolean);
    expect(lines.length).toBeGreaterThanOrEqual(4);
    for (const i of [1, 3]) lines[i] = lines[i]!.slice(0, Math.floor(lines[i]!.length / 2));
    fs.writeFileSync(damaged, lines.join('\n') + '\n');
    fs.writeFileSync(notes, 'remember to buy milk\n');
    run = await spawnCli(['ingest', input], { PMLAKE_LAKE: path.join(tmp.dir, 'lake'), PMLAKE_STATE: path.join(tmp.dir, 'state') }).done;
  });
  afterAll(() => tmp.cleanup());

  const want = () => [
    { file: prices, what: `${points} /prices-history point(s) have no data set in the lake; counted, not stored`, count: points, lines: [] },
    { file: damaged, what: 'malformed JSON line skipped', count: 2, lines: [2, 4] },
    { file: notes, what: 'format not recognised; file skipped', count: 1, lines: [] },
  ];

  it('the JSON report has one entry per file and kind of issue, with its count and first lines', () => {
    expect(run.code, run.stderr).toBe(0);
    const report = JSON.parse(run.stdout) as { ingested: number; issue_summary: unknown[] };
    expect(report.ingested).toBe(2);
    expect(points).toBeGreaterThan(0);
    const byFile = (a: { file: string }, b: { file: string }) => (a.file < b.file ? -1 : 1);
    expect([...(report.issue_summary as { file: string }[])].sort(byFile)).toEqual(want().sort(byFile));
  });

  it('the printed summary says how many issues and names each: file, what, count', () => {
    expect(run.stderr).toContain('pmlake ingest: 2 files landed, 0 already in the lake, 3 issues');
    for (const w of want()) {
      const line = run.stderr.split('\n').find((l) => l.startsWith(`  ${w.file}: `));
      expect(line, w.file).toBeDefined();
      expect(line).toContain(w.what);
      expect(line).toContain(`count ${w.count}`);
      for (const l of w.lines) expect(line).toMatch(new RegExp(`lines? .*\\b${l}\\b`));
    }
  });
});
