import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DuckDBInstance } from '@duckdb/node-api';
import { generate } from '../../sim/generate/index.js';
import { Follower, type FollowCycleReport } from '../../ingest/follow.js';
import { runIngest } from '../../ingest/run.js';
import { readLedger } from '../../ingest/ledger.js';
import { createLogger } from '../../src/log.js';
import { currentVersion, versionsDir } from '../../src/lake/versions.js';
import { tempDir } from '../helpers/server.js';
import { lakeContent } from '../helpers/lake-content.js';
import { captureText, splitByTime, tokensOf, venueMs } from './capture-util.js';

/**
 * What a follow cycle does, cycle by cycle: files put in place one per cycle (each when the previous cycle has
 * reported), so every cycle's report says what that one file cost — which steps ran (phase_seconds) and whether
 * it published. The lake at the end is compared with one ingest of the same files.
 */

const tmp = tempDir('pmlake-follow-cycle-');
const log = createLogger(process.env.FOLLOW_TEST_LOG ?? 'silent');
const FOUR_HOURS = 4 * 3_600_000;
/** The steps of a batch that derive, merge and publish (ingest/run.ts), and the compaction after it. */
const BATCH_STEPS = /^(books|candles|catalog|compact|merge_.*)$/;

let db: DuckDBInstance;
/** In the order they appear: the markets, the fills, then each capture file followed by a header-only one. */
let files: { name: string; text: string; kind: 'data' | 'quiet' }[] = [];

beforeAll(async () => {
  db = await DuckDBInstance.create(':memory:', { threads: '1' });
  const gen = path.join(tmp.dir, 'gen');
  const g = await generate({ markets: 3, days: 1, seed: 31, start: '2025-10-13', out: gen, workers: 0, rate: 0.3 });
  const tape = splitByTime(path.join(gen, g.files.ws[0]!), FOUR_HOURS, (o) => Number(o.timestamp ?? 0), 'ws');
  const assets = [...new Set(tape.flatMap((c) => c.lines.flatMap(tokensOf)))];
  const stamp = (ms: number): string => new Date(ms).toISOString().replace(/[-:]/g, '').slice(0, 15);
  files = [
    { name: '00-markets.json', text: fs.readFileSync(path.join(gen, g.files.markets), 'utf8'), kind: 'data' },
    { name: '01-fills.jsonl', text: fs.readFileSync(path.join(gen, g.files.fills[0]!), 'utf8'), kind: 'data' },
  ];
  let recv = 0;
  for (const c of tape) {
    const body = c.lines.map((frame) => ({ recv_ms: (recv = Math.max(recv, venueMs(frame))), conn: 0, frame }));
    files.push({
      name: `market-${stamp(c.at)}Z-rec-0000abcd.capture.jsonl`,
      text: captureText('rec', `s-${stamp(c.at)}`, [{ conn: 0, assets }], body, c.at),
      kind: 'data',
    });
    // A recorder's file of a silent period: its start and assets lines, nothing else.
    const quietAt = c.at + FOUR_HOURS - 60_000;
    files.push({
      name: `market-${stamp(quietAt)}Z-rec-0000bbbb.capture.jsonl`,
      text: captureText('rec', `q-${stamp(c.at)}`, [{ conn: 0, assets }], [], quietAt),
      kind: 'quiet',
    });
  }
});

afterAll(() => {
  db?.closeSync();
  tmp.cleanup();
});

/** Follows `dir`, putting each of `steps` in place when the cycle before it has reported; returns every cycle's report. */
async function followSteps(dir: string, lake: string, steps: ((dir: string) => void)[]): Promise<FollowCycleReport[]> {
  const cycles: FollowCycleReport[] = [];
  let next = 0;
  let resolve!: () => void;
  const finished = new Promise<void>((r) => (resolve = r));
  const follower = await Follower.start({
    dirs: [dir],
    lakeDir: lake,
    cycleSeconds: 0.3,
    log,
    threads: 1,
    memoryLimit: '1GB',
    onCycle: (r) => {
      cycles.push(r);
      if (next < steps.length) steps[next++]!(dir);
      else resolve();
    },
  });
  try {
    await finished;
  } finally {
    await follower.stop();
  }
  return cycles;
}

const put =
  (f: { name: string; text: string }) =>
  (dir: string): void => {
    fs.writeFileSync(path.join(dir, `.open-${f.name}`), f.text);
    fs.renameSync(path.join(dir, `.open-${f.name}`), path.join(dir, f.name));
  };

describe('a follow cycle', () => {
  it('one file per cycle ends with the lake one ingest of the files gives; a cycle with nothing new publishes nothing and runs no batch step', async () => {
    const dir = path.join(tmp.dir, 'in');
    const lake = path.join(tmp.dir, 'lake');
    fs.mkdirSync(dir);
    const copied = files.find((f) => f.kind === 'data' && f.name.endsWith('.capture.jsonl'))!;
    const cycles = await followSteps(dir, lake, [
      ...files.map(put),
      // The same bytes as a landed capture file, under another name: the ledger holds them.
      put({ name: `market-20251014T000000Z-rec-0000cccc.capture.jsonl`, text: copied.text }),
      // Nothing: the cycle after it finds nothing new.
      () => {},
    ]);
    // The first cycle (nothing in the directory), one per file, the copy's, and one after it (nothing new).
    expect(cycles.length).toBe(files.length + 3);
    expect(cycles.every((c) => c.error === undefined)).toBe(true);
    const [start, ...rest] = cycles;
    const byFile = rest.slice(0, files.length);
    const copyCycle = rest[files.length]!;
    const last = rest[files.length + 1]!;

    // Nothing in the directory is new: the orchestrator is not run at all.
    for (const c of [start!, last]) {
      expect(c.files).toBe(0);
      expect(c.version).toBeNull();
      expect(Object.keys(c.phase_seconds)).toEqual(['list']);
    }
    // A new file the ledger holds: hashed and skipped without opening DuckDB, and nothing published.
    expect(copyCycle.files).toBe(1);
    expect(copyCycle.version).toBeNull();
    expect(Object.keys(copyCycle.phase_seconds).sort()).toEqual(['ingest', 'list']);
    // Each data file published its own version; each header-only file entered the ledger and nothing else: staged
    // (that needs DuckDB) but no derive, merge, catalogue or compaction step, and no version.
    byFile.forEach((c, i) => {
      expect(c.files, files[i]!.name).toBe(1);
      if (files[i]!.kind === 'data') {
        expect(c.version, files[i]!.name).not.toBeNull();
        expect(c.phase_seconds.catalog, files[i]!.name).toBeDefined();
      } else {
        expect(c.version, files[i]!.name).toBeNull();
        expect(
          Object.keys(c.phase_seconds).filter((p) => BATCH_STEPS.test(p)),
          files[i]!.name,
        ).toEqual([]);
        expect(Object.keys(c.phase_seconds), files[i]!.name).toContain('stage');
      }
    });
    const versions = new Set(byFile.filter((c) => c.version !== null).map((c) => c.version));
    expect(versions.size).toBe(files.filter((f) => f.kind === 'data').length);
    const history = fs
      .readFileSync(path.join(versionsDir(lake), 'history.jsonl'), 'utf8')
      .trim()
      .split('\n');
    expect(history.filter((l) => (JSON.parse(l) as { kind: string }).kind === 'ingest').length).toBe(versions.size);
    const ledger = [...readLedger(lake).values()].map((e) => path.basename(e.file)).sort();
    expect(ledger).toEqual(files.map((f) => f.name).sort());

    const oneShot = path.join(tmp.dir, 'one-shot');
    const r = await runIngest([dir], { lakeDir: oneShot, threads: 1, memoryLimit: '1GB' });
    expect(r.ingested).toBe(files.length);
    const reference = await lakeContent(db, currentVersion(oneShot));
    expect(Object.values(reference).filter((c) => c !== '0').length).toBeGreaterThanOrEqual(10);
    expect(await lakeContent(db, currentVersion(lake))).toEqual(reference);
  });
});
