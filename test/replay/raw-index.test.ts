import fs from 'node:fs';
import path from 'node:path';
import type { DuckDBInstance } from '@duckdb/node-api';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { compactLake } from '../../ingest/compact.js';
import { archiveHour } from '../../sim/generate/archive-hour.js';
import { indexMissingDays } from '../../ingest/raw-index.js';
import { runIngest } from '../../ingest/run.js';
import { VersionDraft } from '../../ingest/versions.js';
import { openLakeDb, sqlString } from '../../src/lake/duckdb.js';
import { LakeSession } from '../../src/lake/session.js';
import { recordedFrames, type RawFrame } from '../../src/replay/frames.js';
import { tempDir } from '../helpers/server.js';

/**
 * The market index (`raw_by_market`): raw's frames again, one row per frame and market, which the market replay
 * reads for a day whenever the day has it. Checked against plain TypeScript over the lake's raw rows: the index
 * holds exactly each frame once per distinct market it names; a replay narrowed to markets reads it and gives the
 * frames of raw holding any of them, once each, in receive order; a lake whose days have no index (one built
 * before it) replays the same from raw, keeps them without one when a batch adds to them, and gets it from
 * `pmlake compact`'s step; an archive batch defers the index of its new days.
 */
const tmp = tempDir('pmlake-raw-index-');
let db: DuckDBInstance;
const lake = path.join(tmp.dir, 'lake');
const M = [1, 2, 3].map((i) => `0x${String(i).repeat(64)}`);
const A = [1, 2, 3].map((i) => String(i).repeat(77));
const DAYS = [Date.parse('2025-06-01T00:00:00Z'), Date.parse('2025-06-02T00:00:00Z')];

const tick = (i: number, ms: number, tag: string): string =>
  `{"asset_id":"${A[i]}","event_type":"tick_size_change","market":"${M[i]}","new_tick_size":"0.01","old_tick_size":"0.01","timestamp":"${ms}","tag":"${tag}"}`;

/** Frames of one market, of two (an array frame), and of none (a message without a market), on both days. */
function lines(half: 0 | 1): string[] {
  const out: string[] = [];
  for (const day of DAYS) {
    for (let i = 0; i < 600; i++) {
      const ms = day + 3_600_000 + 10 * i + half * 5;
      const tag = `${half}-${day}-${i}`;
      if (i % 5 === 0) out.push(`[${tick(0, ms, `${tag}a`)},${tick(1, ms, `${tag}b`)}]`);
      else if (i % 17 === 0) out.push(`{"event_type":"pong_like","timestamp":"${ms}","tag":"${tag}"}`);
      else out.push(tick(i % 3, ms, tag));
    }
  }
  return out;
}

type RawRow = { recvUs: bigint; seq: bigint; frame: string; cids: (string | null)[] };

async function rawRows(): Promise<RawRow[]> {
  const files = new VersionDraft(lake).files('raw');
  const conn = await db.connect();
  try {
    const r = await conn.runAndReadAll(`SELECT epoch_us(recv_ts) AS us, seq, frame, condition_ids FROM read_parquet([${files.map(sqlString).join(', ')}])`);
    return r.getRowObjectsJS().map((x) => ({
      recvUs: BigInt(x.us as bigint),
      seq: BigInt(x.seq as bigint),
      frame: String(x.frame),
      cids: (x.condition_ids as (string | null)[] | null) ?? [],
    }));
  } finally {
    conn.closeSync();
  }
}

async function indexRows(): Promise<string[]> {
  const files = new VersionDraft(lake).files('raw_by_market');
  if (files.length === 0) return [];
  const conn = await db.connect();
  try {
    const r = await conn.runAndReadAll(`SELECT condition_id, epoch_us(recv_ts) AS us, frame FROM read_parquet([${files.map(sqlString).join(', ')}])`);
    return r
      .getRowObjectsJS()
      .map((x) => `${String(x.condition_id)} ${String(x.us)} ${String(x.frame)}`)
      .sort();
  } finally {
    conn.closeSync();
  }
}

/** The index raw's rows call for: one row per frame and distinct non-NULL market. */
function expectedIndex(rows: RawRow[]): string[] {
  return rows.flatMap((r) => [...new Set(r.cids.filter((c): c is string => c !== null))].map((c) => `${c} ${r.recvUs} ${r.frame}`)).sort();
}

/** The frames of raw naming any of `markets`, in (recv_ts, seq) order. */
function expectedFrames(rows: RawRow[], markets: string[]): string[] {
  return rows
    .filter((r) => r.cids.some((c) => c !== null && markets.includes(c)))
    .sort((a, b) => (a.recvUs !== b.recvUs ? (a.recvUs < b.recvUs ? -1 : 1) : a.seq < b.seq ? -1 : a.seq > b.seq ? 1 : 0))
    .map((r) => r.frame);
}

async function replay(markets: string[], counters = { framesRead: 0, pages: 0, indexed: 0 }): Promise<string[]> {
  const session = new LakeSession(db, lake);
  const out: RawFrame[] = [];
  const from = BigInt(DAYS[0]!) * 1000n;
  for await (const b of recordedFrames(session, { from, to: from + 5n * 86_400_000_000n, conditionIds: () => markets, announcements: () => false, counters }))
    out.push(...b);
  return out.map((f) => f.text);
}

/** A version without the index: the lake as pmlake wrote it before the index existed. */
function dropIndex(): void {
  const draft = new VersionDraft(lake);
  draft.retire('raw_by_market', draft.files('raw_by_market'));
  draft.publish('compact', {}, []);
  expect(new VersionDraft(lake).files('raw_by_market')).toEqual([]);
}

async function ingest(half: 0 | 1): Promise<Record<string, number>> {
  const file = path.join(tmp.dir, `half${half}.jsonl`);
  fs.writeFileSync(file, `${lines(half).join('\n')}\n`);
  const report = await runIngest([file], { lakeDir: lake, threads: 2 });
  expect(report.failed).toBe(0);
  return report.counts;
}

const SUBSCRIPTIONS = [[M[0]!], [M[0]!, M[1]!], [M[1]!, M[2]!], M];

beforeAll(async () => {
  db = await openLakeDb({ allowedDirectories: [tmp.dir], threads: 2, memoryLimit: '512MB' });
}, 120_000);

afterAll(() => {
  db?.closeSync();
  tmp.cleanup();
});

describe('raw_by_market', () => {
  it('holds each frame once per market it names, and a market replay reads it: raw’s frames of those markets, once each, in order', async () => {
    await ingest(0);
    const raw = await rawRows();
    expect(raw.some((r) => new Set(r.cids).size === 2)).toBe(true);
    expect(raw.some((r) => r.cids.every((c) => c === null))).toBe(true);
    expect(await indexRows()).toEqual(expectedIndex(raw));
    for (const markets of SUBSCRIPTIONS) {
      const counters = { framesRead: 0, pages: 0, indexed: 0 };
      const got = await replay(markets, counters);
      expect(got).toEqual(expectedFrames(raw, markets));
      expect(got.length).toBeGreaterThan(0);
      expect(counters.indexed).toBeGreaterThan(0);
    }
  });

  it('a lake without it replays the same from raw, and a batch leaves its days without one (never a part of a day)', async () => {
    dropIndex();
    const before = await rawRows();
    for (const markets of SUBSCRIPTIONS) {
      const counters = { framesRead: 0, pages: 0, indexed: 0 };
      expect(await replay(markets, counters)).toEqual(expectedFrames(before, markets));
      expect(counters.indexed).toBe(0);
    }
    const counts = await ingest(1);
    expect(counts.raw_index_days_left).toBe(2);
    const raw = await rawRows();
    expect(raw.length).toBeGreaterThan(before.length);
    expect(await indexRows()).toEqual([]);
    for (const markets of SUBSCRIPTIONS) expect(await replay(markets)).toEqual(expectedFrames(raw, markets));
  });

  it('indexMissingDays (pmlake compact) indexes every day that has none, and nothing when all have one', async () => {
    dropIndex();
    const raw = await rawRows();
    const conn = await db.connect();
    try {
      const draft = new VersionDraft(lake);
      expect(await indexMissingDays(conn, draft)).toEqual({ days: 2, rows: expectedIndex(raw).length });
      draft.publish('compact', {}, []);
      expect(await indexMissingDays(conn, new VersionDraft(lake))).toEqual({ days: 0, rows: 0 });
    } finally {
      conn.closeSync();
    }
    expect(await indexRows()).toEqual(expectedIndex(raw));
    for (const markets of SUBSCRIPTIONS) expect(await replay(markets)).toEqual(expectedFrames(raw, markets));
  });

  it('an archive hour defers the index of its new day, which the compaction of that day writes; a capture of a new day is indexed', async () => {
    const hour = path.join(tmp.dir, 'polymarket_orderbook_2025-06-03T05.parquet');
    await archiveHour({ rows: 3000, seed: 7, hour: '2025-06-03T05' }, hour);
    const report = await runIngest([hour], { lakeDir: lake, threads: 2 });
    expect(report.failed).toBe(0);
    expect(report.counts.raw_index_days_left).toBe(1);
    const draft = new VersionDraft(lake);
    expect(draft.partitionValues('raw')).toContain('2025-06-03');
    expect(draft.partitionValues('raw_by_market')).not.toContain('2025-06-03');
    const later = path.join(tmp.dir, 'day4.jsonl');
    fs.writeFileSync(later, `${tick(0, Date.parse('2025-06-04T01:00:00Z'), 'd4')}\n`);
    const next = await runIngest([later], { lakeDir: lake, threads: 2 });
    expect(next.counts.raw_index_days_left ?? 0).toBe(0);
    expect(new VersionDraft(lake).partitionValues('raw_by_market')).toContain('2025-06-04');
    // The day's next hour, then the compaction an ingest runs: the day's raw is compacted, and indexed with it.
    const hour2 = path.join(tmp.dir, 'polymarket_orderbook_2025-06-03T06.parquet');
    await archiveHour({ rows: 3000, seed: 8, hour: '2025-06-03T06' }, hour2);
    expect((await runIngest([hour2], { lakeDir: lake, threads: 2 })).counts.raw_index_days_left).toBe(1);
    expect(new VersionDraft(lake).partitionFiles('raw', ['2025-06-03'])).toHaveLength(2);
    const conn = await db.connect();
    try {
      expect((await compactLake(conn, lake)).raw_index_days).toBe(1);
    } finally {
      conn.closeSync();
    }
    const raw = await rawRows();
    expect(await indexRows()).toEqual(expectedIndex(raw));
    expect(new VersionDraft(lake).partitionValues('raw_by_market')).toEqual(new VersionDraft(lake).partitionValues('raw'));
    for (const markets of SUBSCRIPTIONS) expect(await replay(markets)).toEqual(expectedFrames(raw, markets));
  });
});
