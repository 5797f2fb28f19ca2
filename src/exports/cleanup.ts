import type { Logger } from '../log.js';
import type { Db } from '../state/db.js';
import { clearUploadId, finishPurge, jobsWithStatus, pendingPurges } from '../state/exports.js';
import type { Slot } from './run.js';
import { jobPrefix, userPrefix, type ObjectStore } from './store.js';

/**
 * Uploads nobody will finish must not keep their parts: an interrupted export's parts are as large as the export
 * itself. A failing job discards its own upload at once; what is left is handled here:
 *  - uploads recorded on failed jobs (the store was unreachable when the job failed, or a restart failed a
 *    job after MAX_ATTEMPTS) are discarded again, and the record cleared once that worked;
 *  - any upload under `exports/` untouched for longer than the bound (PMLAKE_EXPORT_STALE_UPLOAD_HOURS) and
 *    not in progress is discarded: the local store's part directories by age; an S3 store's
 *    ListMultipartUploads → discard (AbortMultipartUpload, or its fallback in ../s3/store.ts) of uploads
 *    initiated before the bound. s3rver cannot list uploads (501): there only the recorded ones are found.
 *  - the files of deleted accounts (objects and uploads under the account's prefix) are removed.
 * Runs at start-up and every 15 minutes; re-queued jobs discard their previous attempt's upload themselves, and
 * a job at its end every upload an earlier attempt left under its prefix.
 */
type Job = { id: string; object_key: string | null; upload_id: string | null };
/** What the cleanup uses: the job records and the log (nothing of the HTTP layer). */
type Deps = { state: Db; log: Logger };

export async function discardRecordedUpload(deps: Deps, store: () => Promise<ObjectStore>, job: Job): Promise<boolean> {
  if (!job.upload_id) return true;
  try {
    // Without a key (never the case for a claimed job) there is nothing to address; the age sweep remains.
    if (job.object_key) await (await store()).discardUpload(job.object_key, job.upload_id);
    await clearUploadId(deps.state, job.id, job.upload_id);
    return true;
  } catch (err) {
    deps.log.warn({ err, job: job.id, upload_id: job.upload_id }, 'upload of an export not discarded yet; the sweep retries');
    return false;
  }
}

/**
 * Discards what earlier attempts left under one job's prefix when the job ends (./run.ts): uploads no record
 * names (an attempt killed between creating its upload and recording it), whichever attempt began them. Only
 * those last touched before `before`, the ending attempt's beginning: its own upload is completed or discarded
 * by then (or kept recorded for the sweep), and one begun later is a newer holder's, which must not be touched.
 * A store that cannot list uploads (s3rver) finds none; a failure is logged and left to the age sweep.
 */
export async function discardJobUploads(deps: Deps, store: () => Promise<ObjectStore>, job: { id: string; user_id: string }, before: Date): Promise<void> {
  try {
    const n = await (await store()).sweepUploads(jobPrefix(job), before, new Set());
    if (n) deps.log.info({ job: job.id, uploads: n }, 'uploads left by earlier attempts discarded');
  } catch (err) {
    deps.log.warn({ err, job: job.id }, 'uploads of a finished export not discarded; the age sweep retries');
  }
}

export async function sweepExports(deps: Deps, store: () => Promise<ObjectStore>, running: Map<string, Slot>, olderThanHours: number): Promise<void> {
  let recorded = 0;
  for (const job of await jobsWithStatus(deps.state, 'failed')) {
    if (job.upload_id && (await discardRecordedUpload(deps, store, job))) recorded += 1;
  }
  // In progress here, or (another process on this state) recorded on a running job: never swept.
  const keep = new Set<string>();
  for (const slot of running.values()) if (slot.upload?.uploadId) keep.add(slot.upload.uploadId);
  for (const job of await jobsWithStatus(deps.state, 'running')) if (job.upload_id) keep.add(job.upload_id);
  let stale: number | null = null;
  try {
    stale = await (await store()).sweepUploads('exports/', new Date(Date.now() - olderThanHours * 3_600_000), keep);
  } catch (err) {
    deps.log.warn({ err }, 'export upload sweep failed; retried at the next sweep');
  }
  if (recorded > 0 || (stale ?? 0) > 0) deps.log.info({ recorded, stale }, 'export uploads discarded');
  if (stale === null) deps.log.debug('the export store cannot list its uploads; only recorded ones were discarded');
}

/**
 * Removes the export files of deleted accounts (src/state/lifecycle.ts confirmDeletion records each one): every
 * object and unfinished upload under the account's prefix, then the record. Run right after a deletion and by
 * every sweep, so a store that was down, or a process that died in between, only delays it. An export still
 * building for the account stops at its next lease renewal (its job is gone) and discards what it made itself.
 */
export async function purgeDeletedAccounts(deps: Deps, store: () => Promise<ObjectStore>): Promise<number> {
  let purged = 0;
  for (const userId of await pendingPurges(deps.state)) {
    try {
      await (await store()).deleteUnder(userPrefix(userId));
      await finishPurge(deps.state, userId);
      purged += 1;
    } catch (err) {
      deps.log.warn({ err, user: userId }, "a deleted account's export files are not removed yet; the sweep retries");
    }
  }
  if (purged > 0) deps.log.info({ accounts: purged }, 'export files of deleted accounts removed');
  return purged;
}
