import type { StateStore } from './store.js';

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
export function fairUseUsedBytes(store: StateStore, userId: string, start: Date, end: Date): number {
  const r = store.db
    .prepare(
      `SELECT COALESCE(SUM(CASE status WHEN 'completed' THEN bytes WHEN 'pending' THEN reserved_bytes ELSE 0 END), 0) AS used
       FROM pulls WHERE user_id = ? AND created_at >= ? AND created_at < ?`,
    )
    .get(userId, start.toISOString(), end.toISOString()) as { used: number };
  return r.used;
}

/** Downloads that hold a rate-limit slot since `since` (refunded ones do not), and the oldest of them. */
export function downloadsSince(store: StateStore, userId: string, since: Date): { count: number; oldest: string | null } {
  return store.db
    .prepare(
      `SELECT COUNT(*) AS count, MIN(created_at) AS oldest FROM pulls
       WHERE user_id = ? AND kind = 'download' AND status != 'failed' AND created_at > ?`,
    )
    .get(userId, since.toISOString()) as { count: number; oldest: string | null };
}

export function insertPull(store: StateStore, row: PullRow): void {
  store.db
    .prepare(
      `INSERT INTO pulls (id, user_id, key_id, kind, dataset, description, market_id, format, file_name, timeframe,
         start_date, end_date, status, reserved_bytes, bytes, rows, reason, created_at, finished_at)
       VALUES (@id, @user_id, @key_id, @kind, @dataset, @description, @market_id, @format, @file_name, @timeframe,
         @start_date, @end_date, @status, @reserved_bytes, @bytes, @rows, @reason, @created_at, @finished_at)`,
    )
    .run(row);
}

/** Settles a pending pull; false when it was already settled (a ticket settles once). */
export function completePull(store: StateStore, id: string, bytes: number, rows: number, at: Date): boolean {
  return (
    store.db
      .prepare(`UPDATE pulls SET status = 'completed', bytes = ?, rows = ?, finished_at = ? WHERE id = ? AND status = 'pending'`)
      .run(bytes, rows, at.toISOString(), id).changes === 1
  );
}

export function failPull(store: StateStore, id: string, reason: string, at: Date): boolean {
  return (
    store.db
      .prepare(`UPDATE pulls SET status = 'failed', reason = ?, finished_at = ? WHERE id = ? AND status = 'pending'`)
      .run(reason.slice(0, 500), at.toISOString(), id).changes === 1
  );
}

export function getPull(store: StateStore, id: string): PullRow | undefined {
  return store.db.prepare('SELECT * FROM pulls WHERE id = ?').get(id) as PullRow | undefined;
}

export function listPulls(
  store: StateStore,
  userId: string,
  opts: { limit: number; offset: number; status?: string | undefined },
): PullRow[] {
  return store.db
    .prepare(
      `SELECT * FROM pulls WHERE user_id = @user AND (@status IS NULL OR status = @status)
       ORDER BY created_at DESC, id DESC LIMIT @limit OFFSET @offset`,
    )
    .all({ user: userId, status: opts.status ?? null, limit: opts.limit, offset: opts.offset }) as PullRow[];
}

/** Downloads still pending: read at start-up, before failInterruptedDownloads, to give back their shared rate slots. */
export function pendingDownloads(store: StateStore): { id: string; user_id: string }[] {
  return store.db.prepare(`SELECT id, user_id FROM pulls WHERE kind = 'download' AND status = 'pending'`).all() as { id: string; user_id: string }[];
}

/**
 * A download cannot outlive the process that streamed it: at start-up, downloads still pending were cut off
 * by a crash and are refunded. Exports resume with their jobs and settle through the meter by ticket id.
 */
export function failInterruptedDownloads(store: StateStore, at: Date): number {
  return store.db
    .prepare(`UPDATE pulls SET status = 'failed', reason = 'interrupted by restart', finished_at = ? WHERE kind = 'download' AND status = 'pending'`)
    .run(at.toISOString()).changes;
}

/** Per-day delivered bytes and pull counts in [start, end), for the usage report. */
export function dailyPullTotals(
  store: StateStore,
  userId: string,
  start: Date,
  end: Date,
): { day: string; bytes: number; downloads: number; dataset_bytes: string }[] {
  return store.db
    .prepare(
      `SELECT day, COALESCE(SUM(bytes), 0) AS bytes, SUM(n) AS downloads, json_group_object(dataset, bytes) AS dataset_bytes
       FROM (SELECT substr(created_at, 1, 10) AS day, dataset, SUM(bytes) AS bytes, COUNT(*) AS n FROM pulls
             WHERE user_id = ? AND status = 'completed' AND created_at >= ? AND created_at < ?
             GROUP BY 1, 2)
       GROUP BY day ORDER BY day`,
    )
    .all(userId, start.toISOString(), end.toISOString()) as { day: string; bytes: number; downloads: number; dataset_bytes: string }[];
}
