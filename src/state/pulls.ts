import type { Db } from './db.js';
import { raw, sql } from './sql.js';

/**
 * Download history: one row per download or export, written by the usage meter. A row is 'pending' while the
 * pull runs (its reserved bytes count against fair use), then 'completed' with the bytes and rows actually
 * delivered, or 'failed' (refunded: counts for nothing).
 */
export type PullRow = {
  id: string;
  user_id: string;
  key_id: string | null;
  kind: 'download' | 'export';
  dataset: string;
  description: string;
  market_id: string | null;
  format: string | null;
  file_name: string | null;
  timeframe: string | null;
  start_date: string | null;
  end_date: string | null;
  status: 'pending' | 'completed' | 'failed';
  reserved_bytes: number;
  bytes: number | null;
  rows: number | null;
  reason: string | null;
  created_at: string;
  finished_at: string | null;
};

/** Bytes counted against fair use in [start, end): delivered bytes of completed pulls plus pending reservations. */
export async function fairUseUsedBytes(t: Db, userId: string, start: Date, end: Date): Promise<number> {
  const r = await t.get<{ used: number }>(
    sql`SELECT COALESCE(SUM(CASE status WHEN 'completed' THEN bytes WHEN 'pending' THEN reserved_bytes ELSE 0 END), 0) AS used
        FROM pulls WHERE user_id = ${userId} AND created_at >= ${start.toISOString()} AND created_at < ${end.toISOString()}`,
  );
  return r!.used;
}

/** Downloads that hold a rate-limit slot since `since` (refunded ones do not), and the oldest of them. */
export async function downloadsSince(t: Db, userId: string, since: Date): Promise<{ count: number; oldest: string | null }> {
  return (await t.get<{ count: number; oldest: string | null }>(
    sql`SELECT COUNT(*) AS count, MIN(created_at) AS oldest FROM pulls
        WHERE user_id = ${userId} AND kind = 'download' AND status != 'failed' AND created_at > ${since.toISOString()}`,
  ))!;
}

export async function insertPull(t: Db, row: PullRow): Promise<void> {
  await t.run(
    sql`INSERT INTO pulls (id, user_id, key_id, kind, dataset, description, market_id, format, file_name, timeframe,
          start_date, end_date, status, reserved_bytes, bytes, rows, reason, created_at, finished_at)
        VALUES (${row.id}, ${row.user_id}, ${row.key_id}, ${row.kind}, ${row.dataset}, ${row.description}, ${row.market_id}, ${row.format},
          ${row.file_name}, ${row.timeframe}, ${row.start_date}, ${row.end_date}, ${row.status}, ${row.reserved_bytes}, ${row.bytes}, ${row.rows},
          ${row.reason}, ${row.created_at}, ${row.finished_at})`,
  );
}

/** Settles a pending pull; false when it was already settled (a ticket settles once). */
export async function completePull(t: Db, id: string, bytes: number, rows: number, at: Date): Promise<boolean> {
  return (
    (await t.run(
      sql`UPDATE pulls SET status = 'completed', bytes = ${bytes}, rows = ${rows}, finished_at = ${at.toISOString()} WHERE id = ${id} AND status = 'pending'`,
    )) === 1
  );
}

export async function failPull(t: Db, id: string, reason: string, at: Date): Promise<boolean> {
  return (
    (await t.run(
      sql`UPDATE pulls SET status = 'failed', reason = ${reason.slice(0, 500)}, finished_at = ${at.toISOString()} WHERE id = ${id} AND status = 'pending'`,
    )) === 1
  );
}

export function getPull(t: Db, id: string): Promise<PullRow | undefined> {
  return t.get<PullRow>(sql`SELECT * FROM pulls WHERE id = ${id}`);
}

export function listPulls(t: Db, userId: string, opts: { limit: number; offset: number; status?: string | undefined }): Promise<PullRow[]> {
  const status = opts.status ?? null;
  return t.all<PullRow>(
    sql`SELECT * FROM pulls WHERE user_id = ${userId} AND (CAST(${status} AS TEXT) IS NULL OR status = ${status})
        ORDER BY created_at DESC, id DESC LIMIT ${opts.limit} OFFSET ${opts.offset}`,
  );
}

/**
 * Downloads a process cut off by its crash: pending, and (with `idPrefix`, see src/accounts/usage.ts
 * downloadIdPrefix) started by this replica — on a shared database the others' pending downloads are still
 * streaming. A download lives and dies with the process that streams it.
 */
function cutOffBy(idPrefix: string | null) {
  return idPrefix === null ? sql`` : sql` AND id LIKE ${`${idPrefix}%`}`;
}

/** Downloads still pending: read at start-up, before failInterruptedDownloads, to give back their shared rate slots. */
export function pendingDownloads(t: Db, idPrefix: string | null = null): Promise<{ id: string; user_id: string }[]> {
  return t.all<{ id: string; user_id: string }>(sql`SELECT id, user_id FROM pulls WHERE kind = 'download' AND status = 'pending'${cutOffBy(idPrefix)}`);
}

/**
 * A download cannot outlive the process that streamed it: at start-up, downloads still pending were cut off
 * by a crash and are refunded. Exports settle through their jobs.
 */
export function failInterruptedDownloads(t: Db, at: Date, idPrefix: string | null = null): Promise<number> {
  return t.run(
    sql`UPDATE pulls SET status = 'failed', reason = 'interrupted by restart', finished_at = ${at.toISOString()}
        WHERE kind = 'download' AND status = 'pending'${cutOffBy(idPrefix)}`,
  );
}

/** Per-day delivered bytes and pull counts in [start, end), for the usage report. */
export function dailyPullTotals(
  t: Db,
  userId: string,
  start: Date,
  end: Date,
): Promise<{ day: string; bytes: number; downloads: number; dataset_bytes: string }[]> {
  // The one aggregate spelled differently: a JSON object of bytes per data set, as text in both.
  const perDataset = raw(t.dialect === 'postgres' ? 'json_object_agg(dataset, bytes)::text' : 'json_group_object(dataset, bytes)');
  return t.all(
    sql`SELECT day, COALESCE(SUM(bytes), 0) AS bytes, SUM(n) AS downloads, ${perDataset} AS dataset_bytes
        FROM (SELECT substr(created_at, 1, 10) AS day, dataset, SUM(bytes) AS bytes, COUNT(*) AS n FROM pulls
              WHERE user_id = ${userId} AND status = 'completed' AND created_at >= ${start.toISOString()} AND created_at < ${end.toISOString()}
              GROUP BY 1, 2) per_dataset
        GROUP BY day ORDER BY day`,
  );
}
