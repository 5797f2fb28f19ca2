import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openLakeDb } from '../../src/lake/duckdb.js';
import { publishMissingIndex } from '../../ingest/raw-index.js';
import { VersionDraft } from '../../ingest/versions.js';
import {
  canonicalLines,
  FIXTURE,
  fetchGoldenAnswers,
  GOLDEN_DIR,
  goldenIndex,
  goldenServer,
  type GoldenAnswers,
  type GoldenLake,
} from '../helpers/golden-archive.js';
import { lakeRows, tempDir } from './oracle.js';

/**
 * What today's service serves for an archive-sourced span, pinned: the fixture hour (test/fixtures/archive/) is
 * ingested into a fresh lake, the real server answers on a loopback port, and every raw download, raw estimate,
 * raw listing, market estimate of the raw tape and market-channel replay must equal the golden files
 * (test/fixtures/golden/archive-span/, written by scripts/golden-archive.ts) — byte for byte, except the order of
 * frames that share a receive time and seq, which no ingest fixes (canonicalLines). Then again after
 * `pmlake compact` has indexed the day in raw_by_market, which the replay without the custom feature reads.
 * A change to how archive frames are stored must leave all of it as it is.
 */
const tmp = tempDir('pmlake-archive-golden-');
let g: GoldenLake;
let answers: GoldenAnswers;
const golden = (file: string): Buffer => fs.readFileSync(path.join(GOLDEN_DIR, file));

beforeAll(async () => {
  g = await goldenServer(tmp.dir);
  answers = await fetchGoldenAnswers(g);
}, 300_000);

afterAll(async () => {
  await g?.close();
  tmp.cleanup();
});

function expectSameAsGolden(a: GoldenAnswers, files: readonly string[]): void {
  for (const file of files) {
    const got = a.bodies.get(file);
    expect(got, file).toBeDefined();
    const want = golden(file);
    expect({ file, bytes: got!.length }).toEqual({ file, bytes: want.length });
    const [x, y] = [canonicalLines(got!.toString('utf8')), canonicalLines(want.toString('utf8'))];
    const at = x.findIndex((l, i) => l !== y[i]);
    expect({ file, lines: x.length, at, line: x[at] }).toEqual({ file, lines: y.length, at: -1, line: undefined });
  }
}

describe('an archive span is served as the golden files say', () => {
  it('the golden files: an answer each, non-empty, rebuilt frames marked, the fixture row for row', async () => {
    // An archive row is one rebuilt frame; two equal rows of one message (the generator removes a level twice) are
    // one frame, as raw's key (recv_ts, frame) has it.
    const rows = Number((await lakeRows(`SELECT count(*) AS n FROM (SELECT DISTINCT * FROM read_parquet('${FIXTURE}'))`))[0]!.n);
    expect(rows).toBeGreaterThan(1000);
    expect(fs.statSync(FIXTURE).size).toBeLessThan(1 << 20);
    const index = golden('index.jsonl').toString('utf8').trim().split('\n');
    expect(index.length).toBeGreaterThan(30);
    for (const line of index) {
      const e = JSON.parse(line) as { file: string; status: number; bytes: number };
      expect(golden(e.file).length, e.file).toBe(e.bytes);
      if (e.status === 200 || e.status === 1000) expect(e.bytes, e.file).toBeGreaterThan(100);
    }
    // In the whole tape's download and in the replay of every asset.
    const frames = JSON.parse(golden('download-polymarket_raw-raw.json').toString('utf8')) as { recv_ts: number; frame: string }[];
    expect(frames).toHaveLength(rows);
    for (const f of frames) expect(f.frame).toMatch(/"hash":"pmlake-rebuilt:\d+"/);
    for (const file of ['replay-all.jsonl', 'replay-all-custom.jsonl']) {
      const texts = golden(file)
        .toString('utf8')
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l) as string);
      expect(texts).toHaveLength(rows);
      expect(texts.filter((t) => /"hash":"pmlake-rebuilt:\d+"/.test(t))).toHaveLength(rows);
    }
    // The handwritten market's frames keep the archive's own text where l2 holds only the decimal.
    const edge = golden('download-polymarket_raw-market-edge.json').toString('utf8');
    for (const text of ['\\"price\\":\\"0.550\\",\\"size\\":\\"10.000000\\"', '\\"size\\":\\"1e2\\"', '\\"bids\\":[],\\"asks\\":[]', 'tick_size_change']) {
      expect(edge).toContain(text);
    }
  });

  it('today’s answers equal them: downloads, estimates, listing, market estimates, replays', () => {
    expect(goldenIndex(answers)).toBe(golden('index.jsonl').toString('utf8'));
    expectSameAsGolden(
      answers,
      answers.entries.map((e) => e.file),
    );
  });

  it('after pmlake compact has indexed the day (raw_by_market): the same answers', async () => {
    const lake = g.srv.ctx.config.lakeDir;
    expect(new VersionDraft(lake).partitionValues('raw_by_market')).not.toContain('2026-04-20');
    const db = await openLakeDb({ allowedDirectories: [tmp.dir], threads: 2, memoryLimit: '512MB' });
    const conn = await db.connect();
    try {
      // `pmlake compact`'s first step: every raw day without a market index gets one.
      expect((await publishMissingIndex(conn, lake)).days).toBe(1);
    } finally {
      conn.closeSync();
      db.closeSync();
    }
    expect(new VersionDraft(lake).partitionValues('raw_by_market')).toContain('2026-04-20');
    const again = await fetchGoldenAnswers(g);
    expect(goldenIndex(again)).toBe(golden('index.jsonl').toString('utf8'));
    expectSameAsGolden(
      again,
      again.entries.map((e) => e.file),
    );
  });
});
