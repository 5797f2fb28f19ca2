import { DuckDBListValue, type DuckDBConnection } from '@duckdb/node-api';
import type { VersionDraft } from '../versions.js';
import type { BatchContext } from '../types.js';

/**
 * Redundant recorders (docs/capture-format.md "In the lake"): a frame whose text equals a frame received on another
 * connection — of this recorder, or of another recorder — within WINDOW_MS is the same frame and lands once, with the
 * earliest receive time. Equal text on the same connection is the venue's own duplicate and lands twice, as in every
 * tape format (the `duplicate` incident of ws_stage.sql). Copies are looked for in three places, cheapest first:
 * - the chunk itself (two connections of one recorder);
 * - the batch: every capture frame staged so far and not yet landed is listed in `stg_capture_seen` (hash, receive
 *   time, a hash of the source: recorder/session/connection). Its name starts with stg_ so a file that fails to
 *   stage takes its rows back out with the rest (ingest/run.ts). When this chunk's copy is the earlier one, the staged copy's rows
 *   are removed from staging once this chunk has staged (`replaceLaterCopies`);
 * - the lake: raw rows received within the window of this chunk's first and last frame (recv_ts and frame only;
 *   raw files are sorted on recv_ts, so only the row groups of that stretch are read). A landed copy stays, even a
 *   later one: the lake's files never change; the lake does not know which connection a raw row came from, so an
 *   equal frame there counts as another connection's.
 */
const WINDOW_MS = 10_000;

/**
 * The batch's lists of capture frames (`stg_capture_seen`, below) and of the stretches each recorder proves it was
 * subscribed (`stg_capture_spans`, capture-outages.ts; recorder and asset as hashes: a file lists every asset it
 * holds, so the list is about files × assets long). Both describe what is staged and not yet landed, so they are
 * emptied when a new batch began: the orchestrator gives every batch a new draft (ingest/run.ts), and what the
 * lists held is in the lake from then on.
 */
const batchOf = new WeakMap<DuckDBConnection, VersionDraft>();

export async function batchTables(ctx: BatchContext): Promise<void> {
  const { conn } = ctx;
  await conn.run(`CREATE TEMP TABLE IF NOT EXISTS stg_capture_seen (h UBIGINT, recv_ms BIGINT, src UBIGINT)`);
  await conn.run(`CREATE TEMP TABLE IF NOT EXISTS stg_capture_spans (recorder UBIGINT, asset UBIGINT, lo BIGINT, hi BIGINT)`);
  if (batchOf.get(conn) === ctx.lake) return;
  batchOf.set(conn, ctx.lake);
  await conn.run('DELETE FROM stg_capture_seen');
  await conn.run('DELETE FROM stg_capture_spans');
}

/** Rows of the staged data sets staged before this chunk: only those can be a later copy to remove. */
export type StagedMarks = Record<'stg_raw' | 'stg_l2' | 'stg_last_trades' | 'stg_tape_flags', number>;

export async function stagedMarks(ctx: BatchContext): Promise<StagedMarks> {
  await ctx.conn.run(
    `CREATE TEMP TABLE IF NOT EXISTS stg_tape_flags (kind VARCHAR, asset_id VARCHAR, condition_id VARCHAR, recv_ms BIGINT, seq BIGINT, detail VARCHAR)`,
  );
  const row = (
    await ctx.conn.runAndReadAll(
      `SELECT (SELECT coalesce(max(rowid), -1) FROM stg_raw), (SELECT coalesce(max(rowid), -1) FROM stg_l2),
              (SELECT coalesce(max(rowid), -1) FROM stg_last_trades), (SELECT coalesce(max(rowid), -1) FROM stg_tape_flags)`,
    )
  ).getRows()[0]!;
  return { stg_raw: Number(row[0]), stg_l2: Number(row[1]), stg_last_trades: Number(row[2]), stg_tape_flags: Number(row[3]) };
}

/**
 * Removes from `_cap_fr` (this chunk's frames) every frame another connection's copy makes redundant, and lists in
 * `_cap_replace` the staged copies this chunk's earlier ones replace. `source` is recorder/session/ (the
 * connection number completes it). Returns how many frames were dropped.
 */
export async function dropCopies(ctx: BatchContext, source: string): Promise<number> {
  const { conn } = ctx;
  await batchTables(ctx);
  const w = { w: WINDOW_MS, src: source };
  await conn.run(
    `CREATE OR REPLACE TEMP TABLE _cap_drop AS
     SELECT a.el FROM _cap_fr a JOIN _cap_fr b
       ON a.h = b.h AND a.conn IS DISTINCT FROM b.conn AND b.recv_ms BETWEEN a.recv_ms - $w AND a.recv_ms
          AND (b.recv_ms < a.recv_ms OR b.el < a.el) AND a.frame = b.frame
     UNION
     SELECT a.el FROM _cap_fr a JOIN stg_capture_seen s
       ON s.h = a.h AND s.src <> hash($src || CAST(coalesce(a.conn, -1) AS VARCHAR)) AND s.recv_ms BETWEEN a.recv_ms - $w AND a.recv_ms`,
    w,
  );
  await dropLakeCopies(ctx);
  await conn.run(
    `CREATE OR REPLACE TEMP TABLE _cap_replace AS
     SELECT DISTINCT s.h, s.recv_ms, s.src, a.frame FROM _cap_fr a JOIN stg_capture_seen s
       ON s.h = a.h AND s.src <> hash($src || CAST(coalesce(a.conn, -1) AS VARCHAR)) AND s.recv_ms > a.recv_ms AND s.recv_ms <= a.recv_ms + $w
     WHERE a.el NOT IN (SELECT el FROM _cap_drop)`,
    w,
  );
  const dropped = Number((await conn.runAndReadAll(`SELECT count(DISTINCT el) FROM _cap_drop`)).getRows()[0]?.[0] ?? 0);
  if (dropped > 0) await conn.run(`DELETE FROM _cap_fr WHERE el IN (SELECT el FROM _cap_drop)`);
  await conn.run('DROP TABLE IF EXISTS _cap_drop');
  return dropped;
}

/** Frames of this chunk the lake already holds (equal text received within the window). */
async function dropLakeCopies(ctx: BatchContext): Promise<void> {
  const { conn } = ctx;
  const span = (await conn.runAndReadAll(`SELECT min(recv_ms), max(recv_ms) FROM _cap_fr`)).getRows()[0];
  if (!span || span[0] === null) return;
  const lo = Number(span[0]) - WINDOW_MS;
  const hi = Number(span[1]) + WINDOW_MS;
  const days: string[] = [];
  for (let d = Math.floor(lo / 86_400_000); d <= Math.floor(hi / 86_400_000); d += 1) days.push(new Date(d * 86_400_000).toISOString().slice(0, 10));
  const files = ctx.lake.partitionFiles('raw', days);
  if (files.length === 0) return;
  await conn.run(
    `INSERT INTO _cap_drop
     SELECT a.el FROM _cap_fr a JOIN (
       SELECT epoch_ms(recv_ts) AS ms, frame FROM read_parquet($f::VARCHAR[], hive_partitioning = false) WHERE recv_ts BETWEEN make_timestamp($lo::BIGINT * 1000) AND make_timestamp($hi::BIGINT * 1000)
     ) r ON hash(r.frame) = a.h AND r.frame = a.frame AND abs(r.ms - a.recv_ms) <= $w`,
    { f: new DuckDBListValue(files), lo, hi, w: WINDOW_MS },
  );
}

/**
 * After this chunk staged: the staged rows of each copy it received earlier are removed — the raw row (its receive
 * time and text), and the l2, last_trades and flag rows of its messages (its receive time and seq range; only rows
 * staged before this chunk, so this chunk's own rows in the same millisecond stay). Then this chunk's frames join
 * the batch's list.
 */
export async function replaceLaterCopies(ctx: BatchContext, source: string, marks: StagedMarks): Promise<number> {
  const { conn } = ctx;
  const span = (await conn.runAndReadAll(`SELECT count(*), min(recv_ms), max(recv_ms) FROM _cap_replace`)).getRows()[0];
  const n = Number(span?.[0] ?? 0);
  if (n > 0) {
    // Every statement also bounds the receive time by constants: staging tables are in staging order, roughly time
    // order, so their row groups' min/max skip all but the stretch of the copies (a batch may stage a day of files).
    const p = { lo: Number(span![1]), hi: Number(span![2]) };
    const within = (col: string): string => `${col} BETWEEN make_timestamp($lo::BIGINT * 1000) AND make_timestamp($hi::BIGINT * 1000)`;
    // A frame's messages hold seq0 … seq0 + n − 1 (ws_stage.sql): an array one per element, any other JSON one.
    await conn.run(
      `CREATE OR REPLACE TEMP TABLE _cap_gone AS
       SELECT r.recv_ts, epoch_ms(r.recv_ts) AS recv_ms, r.seq AS lo,
              r.seq + CASE WHEN NOT json_valid(r.frame) THEN 0 WHEN json_type(r.frame) = 'ARRAY' THEN json_array_length(r.frame) ELSE 1 END AS hi
       FROM stg_raw r JOIN _cap_replace c ON r.recv_ts = make_timestamp(c.recv_ms * 1000) AND r.frame = c.frame
       WHERE r.rowid <= $m AND ${within('r.recv_ts')}`,
      { m: marks.stg_raw, ...p },
    );
    for (const t of ['stg_l2', 'stg_last_trades'] as const) {
      await conn.run(
        `DELETE FROM ${t} WHERE rowid <= $m AND ${within('recv_ts')}
           AND EXISTS (SELECT 1 FROM _cap_gone g WHERE g.recv_ts = ${t}.recv_ts AND ${t}.seq >= g.lo AND ${t}.seq < g.hi)`,
        { m: marks[t], ...p },
      );
    }
    await conn.run(
      `DELETE FROM stg_tape_flags WHERE rowid <= $m AND recv_ms BETWEEN $lo AND $hi
         AND EXISTS (SELECT 1 FROM _cap_gone g WHERE g.recv_ms = stg_tape_flags.recv_ms AND stg_tape_flags.seq >= g.lo AND stg_tape_flags.seq < g.hi)`,
      { m: marks.stg_tape_flags, ...p },
    );
    await conn.run(
      `DELETE FROM stg_raw WHERE rowid <= $m AND ${within('recv_ts')}
         AND EXISTS (SELECT 1 FROM _cap_replace c WHERE stg_raw.recv_ts = make_timestamp(c.recv_ms * 1000) AND stg_raw.frame = c.frame)`,
      { m: marks.stg_raw, ...p },
    );
    await conn.run(
      `DELETE FROM stg_capture_seen WHERE EXISTS (SELECT 1 FROM _cap_replace c WHERE c.h = stg_capture_seen.h AND c.recv_ms = stg_capture_seen.recv_ms AND c.src = stg_capture_seen.src)`,
    );
  }
  await conn.run(`INSERT INTO stg_capture_seen SELECT h, recv_ms, hash($src || CAST(coalesce(conn, -1) AS VARCHAR)) FROM _cap_fr`, { src: source });
  for (const t of ['_cap_replace', '_cap_gone']) await conn.run(`DROP TABLE IF EXISTS ${t}`);
  return n;
}
