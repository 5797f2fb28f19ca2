import type { LakeSession } from '../lake/session.js';
import type { Query } from '../lake/duckdb.js';
import { replayFilesQuery, replayIndexQuery, type ReplayFileRead } from '../query/replay-frames.js';

/**
 * The raw files of a replay window read as runs, each a streaming statement in file order, and the runs merged
 * by receive time. Frames travel in small batches: turning a chunk's rows into JS a batch at a time, and handing
 * a batch on with one await instead of one per frame, is where a fast client's time went.
 */

/** `whole`: the connection receives the frame as recorded, known without parsing it (src/query/replay-frames.ts). */
export type RawFrame = { recvUs: bigint; seq: bigint; text: string; whole: boolean };

/**
 * What a reader counts: frames taken from the lake (turned into JS), statements run (one per run of files, or per
 * file of the market index read for several markets), and statements that read the market index.
 */
export type ReadCounters = { framesRead: number; pages: number; indexed?: number };

/** Frames turned into JS at a time from a chunk of up to 2,048 rows: what a stopped consumer holds besides it. */
const BATCH = 256;

/** Where a stretch of days is read from: `raw` itself, or its market index (src/lake/layout.ts raw_by_market). */
export type Segment = { dataset: 'raw' | 'raw_by_market'; runs: string[][] };

/**
 * The window's days as segments of successive days read from the same data set, in date order: from the market
 * index where `byMarket` and the day has one (ingest keeps a day's index whole or absent, ingest/raw-index.ts),
 * else from raw. A segment's runs never overlap in time: the n-th file of each date partition, in date order (a
 * partition holds only its own day's frames; its files, several until compaction, may overlap). A compacted lake
 * has one file per partition: one run per segment, no merge.
 */
export function fileSegments(session: LakeSession, first: string, last: string, byMarket: boolean): Segment[] {
  const indexed = byMarket ? new Set(session.partitionValues('raw_by_market')) : new Set<string>();
  const segments: Segment[] = [];
  for (const date of session.partitionValues('raw')) {
    if (date < first || date > last) continue;
    const dataset = indexed.has(date) ? 'raw_by_market' : 'raw';
    let seg = segments.at(-1);
    if (!seg || seg.dataset !== dataset) segments.push((seg = { dataset, runs: [] }));
    const runs = seg.runs;
    session.version.partitionFiles(dataset, [date]).forEach((file, i) => (runs[i] ??= []).push(file));
  }
  return segments;
}

/** One run's frames in batches, in its order; a row that goes back in time is an error, not a silent misorder. */
export async function* runBatches(session: LakeSession, files: readonly string[], read: ReplayFileRead, counters?: ReadCounters): AsyncGenerator<RawFrame[]> {
  yield* statementBatches(session, replayFilesQuery(files, read), files, counters);
}

/**
 * One run of the market index in batches: one statement for the run when the read is of one market (its rows are
 * stored in receive order), else one statement per file, each sorted (a day of the subscribed markets' frames).
 */
export async function* indexRunBatches(
  session: LakeSession,
  files: readonly string[],
  read: ReplayFileRead & { conditionIds: readonly string[] },
  counters?: ReadCounters,
): AsyncGenerator<RawFrame[]> {
  const count = (): void => {
    if (counters) counters.indexed = (counters.indexed ?? 0) + 1;
  };
  if (read.conditionIds.length === 1) {
    count();
    yield* statementBatches(session, replayIndexQuery(files, read, false), files, counters);
    return;
  }
  for (const file of files) {
    count();
    yield* statementBatches(session, replayIndexQuery([file], read, true), [file], counters);
  }
}

async function* statementBatches(session: LakeSession, q: Query, files: readonly string[], counters?: ReadCounters): AsyncGenerator<RawFrame[]> {
  if (counters) counters.pages++;
  let prevUs = -1n;
  let prevSeq = -1n;
  for await (const chunk of session.chunks(q)) {
    const us = chunk.getColumnVector(0);
    const seq = chunk.getColumnVector(1);
    const text = chunk.getColumnVector(2);
    const whole = chunk.getColumnVector(3);
    for (let at = 0; at < chunk.rowCount; at += BATCH) {
      const end = Math.min(chunk.rowCount, at + BATCH);
      const batch = new Array<RawFrame>(end - at);
      for (let i = at; i < end; i++) {
        const f: RawFrame = {
          recvUs: us.getItem(i) as bigint,
          seq: seq.getItem(i) as bigint,
          text: text.getItem(i) as string,
          whole: whole.getItem(i) === true,
        };
        if (f.recvUs < prevUs || (f.recvUs === prevUs && f.seq < prevSeq)) throw new Error(`raw files ${files.join(', ')} are not in (recv_ts, seq) order`);
        prevUs = f.recvUs;
        prevSeq = f.seq;
        batch[i - at] = f;
      }
      if (counters) counters.framesRead += batch.length;
      yield batch;
    }
  }
}

type Head = { batch: RawFrame[]; i: number; it: AsyncIterator<RawFrame[]> };

/**
 * Runs merged by (recv_ts, seq), in batches. Every run keeps a head loaded before the next frame is chosen, so
 * an exhausted batch is refilled first; the runs are few (files per partition), so the smallest head is found
 * by a scan. Ties go to the earlier run. Ending early closes every run (and so its statement).
 */
export async function* mergeRuns(runs: readonly AsyncIterable<RawFrame[]>[]): AsyncGenerator<RawFrame[]> {
  const iters = runs.map((r) => r[Symbol.asyncIterator]());
  const heads: Head[] = [];
  try {
    for (const it of iters) await refill({ batch: [], i: 0, it }, heads);
    while (heads.length > 0) {
      const out: RawFrame[] = [];
      while (out.length < BATCH && heads.length > 0) {
        let m = 0;
        for (let h = 1; h < heads.length; h++) if (earlier(heads[h]!, heads[m]!)) m = h;
        const head = heads[m]!;
        out.push(head.batch[head.i++]!);
        if (head.i === head.batch.length) {
          heads.splice(m, 1);
          await refill(head, heads, m);
        }
      }
      yield out;
    }
  } finally {
    await Promise.all(iters.map((it) => it.return?.(undefined)));
  }
}

function earlier(a: Head, b: Head): boolean {
  const x = a.batch[a.i]!;
  const y = b.batch[b.i]!;
  return x.recvUs !== y.recvUs ? x.recvUs < y.recvUs : x.seq < y.seq;
}

/** The run's next non-empty batch put back at its place among the heads (its order decides ties), or the run ends. */
async function refill(head: Head, heads: Head[], at = heads.length): Promise<void> {
  for (;;) {
    const r = await head.it.next();
    if (r.done) return;
    if (r.value.length === 0) continue;
    head.batch = r.value;
    head.i = 0;
    heads.splice(at, 0, head);
    return;
  }
}
