import type { StateStore } from './store.js';
import { newId, now } from './store.js';

/**
 * Export jobs in the state store (migration 200). Status: queued → running → succeeded | failed | expired.
 * Each transition is one UPDATE guarded by the current status, so a job never moves backwards and two
 * workers cannot both claim it. The (user_id, idempotency_key) unique index makes a replayed submit return
 * the first job, also across processes.
 */
export type ExportStatus = 'queued' | 'running' | 'succeeded' | 'failed' | 'expired';

export type ExportJobRow = {
  id: string;
  user_id: string;
  idempotency_key: string;
  status: ExportStatus;
  /** The job's pull, as src/downloads/spec.ts storeSpec wrote it (or the legacy shape of older rows). */
  spec: string;
  format: string;
  file_name: string;
  object_key: string | null;
  upload_id: string | null;
  record_count: number | null;
  size_bytes: number | null;
  rows_written: number;
  bytes_written: number;
  total_rows: number | null;
  cost: number | null;
  error: string | null;
  attempts: number;
  created_at: string;
  started_at: string | null;
  completed_at: string | null;
  expires_at: string | null;
};

/** Returns the caller's job for the key, creating it (queued) when there is none. */
export function createOrGetExport(
  store: StateStore,
  job: { userId: string; idempotencyKey: string; spec: string; format: string; fileName: string },
): { row: ExportJobRow; created: boolean } {
  return store.db.transaction(() => {
    const existing = store.db
      .prepare('SELECT * FROM export_jobs WHERE user_id = ? AND idempotency_key = ?')
      .get(job.userId, job.idempotencyKey) as ExportJobRow | undefined;
    if (existing) return { row: existing, created: false };
    const id = newId('exp');
    store.db
      .prepare(
        `INSERT INTO export_jobs (id, user_id, idempotency_key, status, spec, format, file_name, created_at)
         VALUES (?, ?, ?, 'queued', ?, ?, ?, ?)`,
      )
      .run(id, job.userId, job.idempotencyKey, job.spec, job.format, job.fileName, now());
    return { row: getExport(store, id)!, created: true };
  })();
}

export function getExport(store: StateStore, id: string): ExportJobRow | undefined {
  return store.db.prepare('SELECT * FROM export_jobs WHERE id = ?').get(id) as ExportJobRow | undefined;
}

/** A job as its owner sees it: another caller's id is indistinguishable from an unknown one. */
export function getOwnExport(store: StateStore, userId: string, id: string): ExportJobRow | undefined {
  return store.db.prepare('SELECT * FROM export_jobs WHERE id = ? AND user_id = ?').get(id, userId) as ExportJobRow | undefined;
}

export function listExports(store: StateStore, userId: string, limit: number): ExportJobRow[] {
  return store.db
    .prepare('SELECT * FROM export_jobs WHERE user_id = ? ORDER BY created_at DESC, id DESC LIMIT ?')
    .all(userId, limit) as ExportJobRow[];
}

export function jobsWithStatus(store: StateStore, status: ExportStatus): ExportJobRow[] {
  return store.db.prepare('SELECT * FROM export_jobs WHERE status = ? ORDER BY created_at').all(status) as ExportJobRow[];
}

/** queued → running; false when another worker got there first or the job is no longer queued. */
export function claimExport(store: StateStore, id: string, objectKey: string): boolean {
  const r = store.db
    .prepare(
      `UPDATE export_jobs SET status = 'running', started_at = ?, attempts = attempts + 1, object_key = ?,
         rows_written = 0, bytes_written = 0, error = NULL WHERE id = ? AND status = 'queued'`,
    )
    .run(now(), objectKey, id);
  return r.changes === 1;
}

export function setTotalRows(store: StateStore, id: string, total: number): void {
  store.db.prepare(`UPDATE export_jobs SET total_rows = ? WHERE id = ?`).run(total, id);
}

export function recordProgress(store: StateStore, id: string, rows: number, bytes: number, uploadId: string | null): void {
  store.db
    .prepare(`UPDATE export_jobs SET rows_written = ?, bytes_written = ?, upload_id = coalesce(?, upload_id) WHERE id = ? AND status = 'running'`)
    .run(rows, bytes, uploadId, id);
}

export function succeedExport(store: StateStore, id: string, r: { rows: number; bytes: number; cost: number; expiresAt: string }): void {
  store.db
    .prepare(
      `UPDATE export_jobs SET status = 'succeeded', record_count = ?, size_bytes = ?, rows_written = ?, bytes_written = ?,
         cost = ?, completed_at = ?, expires_at = ?, upload_id = NULL, error = NULL WHERE id = ? AND status = 'running'`,
    )
    .run(r.rows, r.bytes, r.rows, r.bytes, r.cost, now(), r.expiresAt, id);
}

/** running/queued → failed, with the reason the caller will read; the orphaned upload id is kept if any. */
export function failExport(store: StateStore, id: string, error: string, orphanUploadId: string | null = null): void {
  store.db
    .prepare(
      `UPDATE export_jobs SET status = 'failed', error = ?, completed_at = ?, upload_id = ?
       WHERE id = ? AND status IN ('queued', 'running')`,
    )
    .run(error.slice(0, 1000), now(), orphanUploadId, id);
}

/** A job interrupted by a restart goes back to the queue (its partial upload was never completed). */
export function requeueExport(store: StateStore, id: string, note: string): void {
  store.db.prepare(`UPDATE export_jobs SET status = 'queued', error = ?, started_at = NULL WHERE id = ? AND status = 'running'`).run(note, id);
}

export function expireExport(store: StateStore, id: string): void {
  store.db.prepare(`UPDATE export_jobs SET status = 'expired' WHERE id = ? AND status = 'succeeded'`).run(id);
}

/** Forgets an upload once its parts are gone; guarded by the id, so a newer attempt's upload is never forgotten. */
export function clearUploadId(store: StateStore, id: string, uploadId: string): void {
  store.db.prepare('UPDATE export_jobs SET upload_id = NULL WHERE id = ? AND upload_id = ?').run(id, uploadId);
}
