import fs from 'node:fs';
import path from 'node:path';
import type { DuckDBInstance } from '@duckdb/node-api';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runIngest } from '../../ingest/run.js';
import { openLakeDb } from '../../src/lake/duckdb.js';
import { LakeSession } from '../../src/lake/session.js';
import { recordedFrames, type RawFrame } from '../../src/replay/frames.js';
import { runBatches } from '../../src/replay/raw-runs.js';
import { tempDir } from '../helpers/server.js';

/**
 * The replay reader streams raw files without a sort, trusting their (recv_ts, seq) order, and merges the files of
 * a partition: checked on a file of many row groups read by several threads, and on a lake whose days each hold
 * two overlapping files (two ingest batches), against the frames sorted in plain TypeScript.
 */
const tmp = tempDir('pmlake-replay-order-');
let db: DuckDBInstance;
const lake = path.join(tmp.dir, 'lake');
const ASSET = '5'.repeat(77);
const MARKET = `0x${'cd'.repeat(32)}`;
const DAY1 = Date.parse('2025-06-01T00:00:00Z');
const DAY2 = Date.parse('2025-06-02T00:00:00Z');
const PER_DAY = 1500;

/** A tick size change received at `ms` (the venue timestamp is the receive time of a bare JSONL capture). */
const line = (ms: number, tag: string): string =>
  `{"asset_id":"${ASSET}","event_type":"tick_size_change","market":"${MARKET}","new_tick_size":"0.01","old_tick_size":"0.01","timestamp":"${ms}","tag":"${tag}"}`;

/** Batch a on even milliseconds, batch b on odd ones, interleaved over both days: every file overlaps another. */
function batchLines(parity: 0 | 1): string[] {
  const out: string[] = [];
  for (const day of [DAY1, DAY2]) for (let i = 0; i < PER_DAY; i++) out.push(line(day + 3_600_000 + 2 * i + parity, `${parity}-${day}-${i}`));
  return out;
}

beforeAll(async () => {
  for (const parity of [0, 1] as const) {
    const file = path.join(tmp.dir, `batch${parity}.jsonl`);
    fs.writeFileSync(file, `${batchLines(parity).join('\n')}\n`);
    expect((await runIngest([file], { lakeDir: lake, threads: 2 })).failed).toBe(0);
  }
  db = await openLakeDb({ allowedDirectories: [tmp.dir], threads: 2, memoryLimit: '512MB' });
}, 120_000);

afterAll(() => {
  db?.closeSync();
  tmp.cleanup();
});

async function collect(it: AsyncIterable<RawFrame[]>): Promise<RawFrame[]> {
  const out: RawFrame[] = [];
  for await (const b of it) out.push(...b);
  return out;
}

describe('raw read order', () => {
  it('a file of many row groups read by two threads comes in its (recv_ts, seq) order, filtered by market', async () => {
    const ROWS = 60000;
    // Rows written by DuckDB itself in small row groups (DuckDB rounds them up to 2,048 rows), in the order a raw file has; one market in three is asked for.
    const file = path.join(tmp.dir, 'groups.parquet');
    const conn = await db.connect();
    await conn.run(`COPY (
      SELECT make_timestamp(1748736000000000 + (i // 3) * 1000) AS recv_ts, i AS seq,
        ['0x' || (i % 3)::VARCHAR] AS condition_ids, ['book'] AS event_types, 'frame ' || i::VARCHAR AS frame
      FROM range(${ROWS}) t(i) ORDER BY i
    ) TO '${file}' (FORMAT parquet, ROW_GROUP_SIZE 1000)`);
    const groups = await conn.runAndReadAll(`SELECT count(DISTINCT row_group_id) AS n FROM parquet_metadata('${file}')`);
    conn.closeSync();
    expect(Number(groups.getRowObjects()[0]!.n)).toBeGreaterThan(10);
    const session = new LakeSession(db, lake);
    const start = 1748736000000000n + 1000n;
    const got = await collect(runBatches(session, [file], { start, end: start + 15_000_000n, after: null, conditionIds: ['0x1'], announcements: false }));
    const want: string[] = [];
    for (let i = 0; i < ROWS; i++) if (i % 3 === 1 && Math.floor(i / 3) >= 1 && Math.floor(i / 3) < 15001) want.push(`frame ${i}`);
    expect(got.map((f) => f.text)).toEqual(want);
  });

  it('a window over days whose files overlap: every frame once, in receive order, and a restart after a frame goes on from there', async () => {
    const session = new LakeSession(db, lake);
    const files = session.version.partitionFiles('raw', ['2025-06-01']);
    expect(files.length).toBe(2);
    const want = [...batchLines(0), ...batchLines(1)].sort((a, b) => ms(a) - ms(b));
    const from = BigInt(DAY1) * 1000n;
    const to = BigInt(DAY2 + 86_400_000) * 1000n;
    const counters = { framesRead: 0, pages: 0 };
    const o = { from, to, conditionIds: () => [MARKET], announcements: () => false, counters };
    const got = await collect(recordedFrames(session, o));
    expect(got.map((f) => f.text)).toEqual(want);
    // Two runs (the first and the second file of each day), each one statement over both days.
    expect(counters.pages).toBe(2);
    const cut = got[2000]!;
    const rest = await collect(recordedFrames(session, { ...o, after: { recvUs: cut.recvUs, seq: cut.seq } }));
    expect(rest.map((f) => f.text)).toEqual(want.slice(2001));
    const other = await collect(recordedFrames(session, { ...o, conditionIds: () => [`0x${'ee'.repeat(32)}`] }));
    expect(other).toEqual([]);
  });

  it('a consumer that stops after its first batch: the reader ends without error and a new read gets every frame', async () => {
    const session = new LakeSession(db, lake);
    const o = { from: BigInt(DAY1) * 1000n, to: BigInt(DAY2 + 86_400_000) * 1000n, conditionIds: () => null, announcements: () => false };
    for await (const b of recordedFrames(session, o)) {
      expect(b.length).toBeGreaterThan(0);
      break;
    }
    expect((await collect(recordedFrames(session, o))).length).toBe(4 * PER_DAY);
  });
});

function ms(l: string): number {
  return Number(/"timestamp":"(\d+)"/.exec(l)![1]);
}
