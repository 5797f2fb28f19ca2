import { benignRun, lockUser, type Db } from './db.js';
import { raw, sql } from './sql.js';
import { newId, now } from './store.js';

/**
 * Export jobs in the state store (migrations 200, 400): the shared queue every worker takes jobs from. Status:
 * queued → running → succeeded | failed | expired. A worker claims the oldest job that is queued or whose
 * running lease has ended (its worker died) in one statement — `FOR UPDATE SKIP LOCKED` on PostgreSQL, so
 * workers on other machines skip the row one of them is taking; SQLite's write lock does the same on one
 * machine — and renews its lease while it builds. Every later write of the build is guarded by the worker's id
 * and the status, so a worker that lost its lease can change nothing. The (user_id, idempotency_key) unique
 * index makes a replayed submit return the first job, on any replica.
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
  /** The worker holding a running job (src/exports/queue.ts), and until when its lease holds. */
  worker: string | null;
  lease_until: string | null;
};

/** Returns the caller's job for the key, creating it (queued) when there is none. */
export function createOrGetExport(
  store: Db,
  job: { userId: string; idempotencyKey: string; spec: string; format: string; fileName: string },
): Promise<{ row: ExportJobRow; created: boolean }> {
  return store.tx(async (t) => {
    // The same key submitted on two replicas at once: the user's row lock makes the second wait and find the
    // first's job (and a unique-key conflict would re-run the transaction, which finds it too).
    await lockUser(t, job.userId);
    const existing = await t.get<ExportJobRow>(sql`SELECT * FROM export_jobs WHERE user_id = ${job.userId} AND idempotency_key = ${job.idempotencyKey}`);
    if (existing) return { row: existing, created: false };
    const id = newId('exp');
    await t.run(
      sql`INSERT INTO export_jobs (id, user_id, idempotency_key, status, spec, format, file_name, created_at)
          VALUES (${id}, ${job.userId}, ${job.idempotencyKey}, 'queued', ${job.spec}, ${job.format}, ${job.fileName}, ${now()})`,
    );
    return { row: (await getExport(t, id))!, created: true };
  });
}

export function getExport(t: Db, id: string): Promise<ExportJobRow | undefined> {
  return t.get<ExportJobRow>(sql`SELECT * FROM export_jobs WHERE id = ${id}`);
}

/** A job as its owner sees it: another caller's id is indistinguishable from an unknown one. */
export function getOwnExport(t: Db, userId: string, id: string): Promise<ExportJobRow | undefined> {
  return t.get<ExportJobRow>(sql`SELECT * FROM export_jobs WHERE id = ${id} AND user_id = ${userId}`);
}

export function listExports(t: Db, userId: string, limit: number): Promise<ExportJobRow[]> {
  return t.all<ExportJobRow>(sql`SELECT * FROM export_jobs WHERE user_id = ${userId} ORDER BY created_at DESC, id DESC LIMIT ${limit}`);
}

export function jobsWithStatus(t: Db, status: ExportStatus): Promise<ExportJobRow[]> {
  return t.all<ExportJobRow>(sql`SELECT * FROM export_jobs WHERE status = ${status} ORDER BY created_at`);
}

/**
 * Takes the oldest job that is queued, or running under a lease that ended before `at` (its worker died), for
 * `worker` until `leaseUntil`: status running, one more attempt, progress reset. The row as it was before
 * (its previous attempt's object key and upload id tell the worker what to discard), or undefined when there
 * is nothing to take.
 */
export async function claimNextExport(store: Db, worker: string, at: Date, leaseUntil: Date): Promise<ExportJobRow | undefined> {
  const iso = at.toISOString();
  // Only PostgreSQL has row locks to skip; SQLite's transaction holds the file's write lock already.
  const skipLocked = raw(store.dialect === 'postgres' ? 'FOR UPDATE SKIP LOCKED' : '');
  const claimable = sql`status = 'queued' OR (status = 'running' AND (lease_until IS NULL OR lease_until < ${iso}))`;
  // Every worker asks every second: a plain read first, so an empty queue takes no write lock.
  if (!(await store.get(sql`SELECT id FROM export_jobs WHERE ${claimable} LIMIT 1`))) return undefined;
  // Benign: a claim changes no principal (the key caches stay) and a claim lost to a power cut is claimed again.
  return store.tx(
    async (t) => {
      const job = await t.get<ExportJobRow>(sql`SELECT * FROM export_jobs WHERE ${claimable} ORDER BY created_at, id LIMIT 1 ${skipLocked}`);
      if (!job) return undefined;
      await t.run(
        sql`UPDATE export_jobs SET status = 'running', worker = ${worker}, lease_until = ${leaseUntil.toISOString()}, started_at = ${iso},
            attempts = attempts + 1, rows_written = 0, bytes_written = 0, error = NULL
          WHERE id = ${job.id}`,
      );
      return job;
    },
    { benign: true },
  );
}

/** Extends the lease; false when the job is no longer this worker's (taken over, or failed): it must stop. */
export async function renewLease(t: Db, id: string, worker: string, leaseUntil: Date): Promise<boolean> {
  return (
    (await benignRun(
      t,
      sql`UPDATE export_jobs SET lease_until = ${leaseUntil.toISOString()} WHERE id = ${id} AND worker = ${worker} AND status = 'running'`,
    )) === 1
  );
}

/** Names this attempt's object key (after the previous attempt's leftovers are gone); false when no longer ours. */
export async function startAttempt(t: Db, id: string, worker: string, objectKey: string): Promise<boolean> {
  return (await benignRun(t, sql`UPDATE export_jobs SET object_key = ${objectKey} WHERE id = ${id} AND worker = ${worker} AND status = 'running'`)) === 1;
}

export async function setTotalRows(t: Db, id: string, total: number): Promise<void> {
  await benignRun(t, sql`UPDATE export_jobs SET total_rows = ${total} WHERE id = ${id}`);
}

/** Records progress (and the upload id, when given); false when the job is no longer this worker's. */
export async function recordProgress(t: Db, id: string, worker: string, rows: number, bytes: number, uploadId: string | null): Promise<boolean> {
  // Not benign when it records an upload id: that must be on disk before the first part is sent (crash-safe).
  const q = sql`UPDATE export_jobs SET rows_written = ${rows}, bytes_written = ${bytes}, upload_id = coalesce(${uploadId}, upload_id)
                WHERE id = ${id} AND worker = ${worker} AND status = 'running'`;
  return (await (uploadId === null ? benignRun(t, q) : t.run(q))) === 1;
}

/** Whether the job is still running under this worker (not taken over, failed, or deleted with its account). */
export async function holdsExport(t: Db, id: string, worker: string): Promise<boolean> {
  return (await t.get(sql`SELECT id FROM export_jobs WHERE id = ${id} AND worker = ${worker} AND status = 'running'`)) !== undefined;
}

/** running → succeeded, in the caller's transaction (the charge commits with it); false when no longer ours. */
export async function succeedExport(t: Db, id: string, worker: string, r: { rows: number; bytes: number; cost: number; expiresAt: string }): Promise<boolean> {
  return (
    (await t.run(
      sql`UPDATE export_jobs SET status = 'succeeded', record_count = ${r.rows}, size_bytes = ${r.bytes}, rows_written = ${r.rows},
            bytes_written = ${r.bytes}, cost = ${r.cost}, completed_at = ${now()}, expires_at = ${r.expiresAt}, upload_id = NULL, error = NULL,
            lease_until = NULL
          WHERE id = ${id} AND worker = ${worker} AND status = 'running'`,
    )) === 1
  );
}

/**
 * running/queued → failed, with the reason the caller will read; the orphaned upload id is kept if any. With
 * `worker`, only while that worker holds the job.
 */
export async function failExport(t: Db, id: string, error: string, orphanUploadId: string | null = null, worker: string | null = null): Promise<void> {
  await t.run(
    sql`UPDATE export_jobs SET status = 'failed', error = ${error.slice(0, 1000)}, completed_at = ${now()}, upload_id = ${orphanUploadId},
          lease_until = NULL
        WHERE id = ${id} AND status IN ('queued', 'running') AND (CAST(${worker} AS TEXT) IS NULL OR worker = ${worker})`,
  );
}

/**
 * running → failed without a new attempt: the claim that found the job interrupted too often counted one, and
 * the job shows the `attempts` that ran instead.
 */
export async function giveUpExport(t: Db, id: string, worker: string, attempts: number, error: string): Promise<void> {
  await t.run(
    sql`UPDATE export_jobs SET status = 'failed', error = ${error.slice(0, 1000)}, completed_at = ${now()}, upload_id = NULL, lease_until = NULL,
          attempts = ${attempts}
        WHERE id = ${id} AND worker = ${worker} AND status = 'running'`,
  );
}

/** A job its worker gave up on while stopping goes back to the queue (its partial upload was never completed). */
export async function requeueExport(t: Db, id: string, worker: string, note: string): Promise<void> {
  await t.run(
    sql`UPDATE export_jobs SET status = 'queued', error = ${note}, started_at = NULL, lease_until = NULL
        WHERE id = ${id} AND worker = ${worker} AND status = 'running'`,
  );
}

export async function expireExport(t: Db, id: string): Promise<void> {
  await t.run(sql`UPDATE export_jobs SET status = 'expired' WHERE id = ${id} AND status = 'succeeded'`);
}

/** Forgets an upload once its parts are gone; guarded by the id, so a newer attempt's upload is never forgotten. */
export async function clearUploadId(t: Db, id: string, uploadId: string): Promise<void> {
  await t.run(sql`UPDATE export_jobs SET upload_id = NULL WHERE id = ${id} AND upload_id = ${uploadId}`);
}

/** Deleted accounts whose export files are still to be removed from the store (migration 500), oldest first. */
export async function pendingPurges(t: Db): Promise<string[]> {
  return (await t.all<{ user_id: string }>(sql`SELECT user_id FROM export_purges ORDER BY requested_at, user_id`)).map((r) => r.user_id);
}

/** The account's export files are gone. Benign: lost to a power cut, the purge runs again and finds nothing. */
export async function finishPurge(t: Db, userId: string): Promise<void> {
  await benignRun(t, sql`DELETE FROM export_purges WHERE user_id = ${userId}`);
}
