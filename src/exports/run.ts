import type { Principal } from '../accounts/principal.js';
import { CONTENT_TYPES, type CopyStream } from '../lake/stream.js';
import { planDownload } from '../downloads/plan.js';
import { loadSpec } from '../downloads/spec.js';
import { failExport, giveUpExport, holdsExport, recordProgress, requeueExport, startAttempt, succeedExport, type ExportJobRow } from '../state/exports.js';
import { completePull, getPull } from '../state/pulls.js';
import type { ExportDeps } from './deps.js';
import { AccountGone, failureMessage, failureReason, StorageError } from './failure.js';
import { FeedStopped, MultipartUpload, settleWithin } from './multipart.js';
import { Progress } from './progress.js';
import { jobPrefix, type ObjectStore } from './store.js';

/**
 * One export job's build: its stored spec (src/downloads/spec.ts) → plan → DuckDB COPY into a FIFO →
 * multipart upload → charge → succeeded; or a failure that discards the upload and charges nothing. See
 * ./service.ts for the queue and the job's life.
 */
export type Slot = { copy: CopyStream | null; upload: MultipartUpload | null };

/** The service's core dependencies, and its hooks into the queue and the store it owns. */
export type RunDeps = ExportDeps & {
  store(): Promise<ObjectStore>;
  running: Map<string, Slot>;
  isClosed(): boolean;
  /** Attempts before a job that keeps dying with its worker is failed. */
  maxAttempts: number;
  /** Discards a previous attempt's upload recorded on the job; false when the store could not do it now. */
  discardOrphan(job: { id: string; object_key: string | null; upload_id: string | null }): Promise<boolean>;
  deleteObject(key: string): Promise<void>;
  /**
   * At the job's end, before it shows its end: discards the uploads under its key prefix last touched before
   * `before` (this attempt's beginning) — whichever earlier attempt began them, recorded on the job or not (one
   * killed between creating its upload and recording it). Never throws.
   */
  discardJobUploads(job: { id: string; user_id: string }, before: Date): Promise<void>;
};

const PART_SIZE = 8 * 1024 * 1024;
/**
 * Progress goes to the state store 1 s into a job (a client polling early sees it move), then every 5 s. On
 * SQLite each write is a commit with an fsync on the event loop — while it waits, nobody drains the FIFO and
 * DuckDB stalls, so progress is written seldom.
 */
const PROGRESS_FIRST_MS = 1000;
const PROGRESS_MS = 5000;

async function principalOf(d: ExportDeps, userId: string): Promise<Principal | null> {
  const u = await d.state.getUser(userId);
  return u ? { userId: u.id, email: u.email, keyId: null, plan: u.plan, scopes: ['read', 'download'] } : null;
}

/** The charge of a job is named after it: whichever worker builds it, it is charged at most once. */
export const chargeIdOf = (jobId: string): string => `chg_${jobId}`;

/**
 * Builds a job this worker has just claimed (`job` is the row as it was before the claim: a previous attempt's
 * object key and upload id are still on it). Every write is guarded by `worker`: a worker that lost the job
 * (its lease ran out) changes nothing, and `leaseLost` stops its build.
 */
export async function runExport(d: RunDeps, job: ExportJobRow, worker: string, leaseLost: AbortSignal): Promise<void> {
  const id = job.id;
  const log = d.log.child({ export_job: id, worker });
  const attempt = job.attempts + 1;
  // Uploads under the job's prefix last touched before this moment are earlier attempts' (./cleanup.ts).
  const begun = new Date();
  // What an earlier attempt left (it died, or failed while the store was down) goes first: its upload's parts,
  // and an object it may have completed before dying unmarked. This attempt gets a key of its own.
  if (job.upload_id && !(await d.discardOrphan(job))) {
    await failExport(d.state, id, failureMessage(new StorageError(null), false), job.upload_id, worker);
    log.warn({ upload_id: job.upload_id }, "export failed: the previous attempt's upload could not be discarded");
    return;
  }
  if (job.object_key) await d.deleteObject(job.object_key);
  if (job.status === 'running' && job.attempts >= d.maxAttempts) {
    // The claim counted one more attempt; none runs: the job shows the attempts that did.
    await d.discardJobUploads(job, begun);
    await giveUpExport(d.state, id, worker, job.attempts, `interrupted ${job.attempts} times (its worker stopped); nothing was charged`);
    log.warn({ attempts: job.attempts }, 'export failed: interrupted too often');
    return;
  }
  const key = `${jobPrefix(job)}${attempt}/${job.file_name}`;
  if (!(await startAttempt(d.state, id, worker, key))) return;
  const principal = await principalOf(d, job.user_id);
  const slot: Slot = { copy: null, upload: null };
  d.running.set(id, slot);
  const stop = (): void => {
    slot.copy?.cancel('the export worker lost its lease');
  };
  leaseLost.addEventListener('abort', stop);
  let timer: NodeJS.Timeout | null = null;
  let progress: Progress | null = null;
  const started = Date.now();
  try {
    if (!principal) throw new AccountGone();
    // A spec that no longer parses fails the job here, saying so (StoredSpecError → failure.ts).
    const lake = d.lakeSession();
    const plan = await planDownload({ lake, markets: d.markets }, principal, loadSpec(job.spec));
    const format = plan.format;
    const store = await d.store().catch((err: unknown) => {
      throw new StorageError(err);
    });
    const copy = await lake.copy(plan.query, format);
    slot.copy = copy;
    const counted = new Progress(format);
    progress = counted;
    const up = new MultipartUpload(store, { key, contentType: CONTENT_TYPES[format] }, PART_SIZE, 2);
    slot.upload = up;
    const tick = (): void =>
      void recordProgress(d.state, id, worker, counted.rows(), counted.bytes, up.uploadId).catch((err: unknown) =>
        log.warn({ err }, 'export progress not recorded'),
      );
    timer = setTimeout(() => {
      tick();
      timer = setInterval(tick, PROGRESS_MS);
    }, PROGRESS_FIRST_MS);
    // The upload rejecting first also cancels the COPY, so Promise.all below reports the storage error,
    // not the resulting "copy cancelled". The upload id is on the job from its first moment (crash-safe).
    const uploadDone = up
      .run(
        copy,
        (b) => counted.add(b),
        // Awaited by the upload before its first part: the id is on the job before any part exists (crash-safe).
        // Not recorded (the job is no longer this worker's): the upload is discarded now, not left to nobody.
        async (uploadId) => {
          if (!(await recordProgress(d.state, id, worker, 0, 0, uploadId))) throw new FeedStopped('the job is no longer this worker’s');
        },
      )
      .catch((err: unknown) => {
        // Stopped by its input (the COPY failed first): not the store's fault.
        throw err instanceof FeedStopped ? err : new StorageError(err);
      });
    uploadDone.catch(() => copy.cancel('upload failed'));
    copy.done.catch(() => void up.abort());
    // Phase times for the log: when DuckDB's COPY finished, and when the store had the whole object.
    let copyMs = 0;
    void copy.done.then(
      () => (copyMs = Date.now() - started),
      () => {},
    );
    const [, result] = await Promise.all([uploadDone, copy.done]);
    const uploadMs = Date.now() - started;
    clearInterval(timer);
    timer = null;
    const rows = result.rows;
    const bytes = counted.bytes;
    await recordProgress(d.state, id, worker, rows, bytes, null);
    if (leaseLost.aborted) throw leaseLost.reason;
    if (!(await holdsExport(d.state, id, worker))) {
      // Taken over, or deleted with its account, since the last renewal: nobody will serve this file.
      await d.deleteObject(key);
      log.warn('export finished after the job stopped being this worker’s; its file was deleted');
      return;
    }
    // The file is complete in object storage: now, and only now, the pull is charged — once per job: a charge
    // an earlier attempt made before its worker died is found by its id and kept (settled if left pending).
    const found = await getPull(d.state, chargeIdOf(id));
    // A refunded charge (never for a finished file: kept only for the record) leaves the name taken.
    const charged = found?.status === 'failed' ? undefined : found;
    const chargeId = found?.status === 'failed' ? `${chargeIdOf(id)}_${attempt}` : chargeIdOf(id);
    let ticket;
    try {
      if (charged) ticket = null;
      else
        ticket = await d.meter.begin(principal, {
          chargeId,
          kind: 'export',
          dataset: plan.dataset,
          description: `export ${job.id}: ${plan.description}`,
          estimatedBytes: bytes,
          format,
          marketId: plan.marketId,
          fileName: job.file_name,
          timeframe: plan.timeframe,
          start: plan.start,
          end: plan.end,
        });
    } catch (err) {
      await d.deleteObject(key);
      await d.discardJobUploads(job, begun);
      await failExport(d.state, id, `charge refused: ${failureReason(err, false)}; the file was deleted and nothing was charged`, null, worker);
      log.warn({ err }, 'export charge refused');
      return;
    }
    if (ticket) await ticket.commit({ bytes, rows });
    else if (charged?.status === 'pending') await completePull(d.state, chargeId, bytes, rows, new Date());
    const expiresAt = new Date(Date.now() + d.config.exportRetentionHours * 3_600_000).toISOString();
    await d.discardJobUploads(job, begun);
    if (await succeedExport(d.state, id, worker, { rows, bytes, cost: 0, expiresAt })) {
      log.info({ rows, bytes, ms: Date.now() - started, copy_ms: copyMs, upload_ms: uploadMs }, 'export succeeded');
    } else {
      // Taken over meanwhile: the new holder keeps the charge. It deleted this attempt's object when it started
      // (the key was on the job), but perhaps before the object was complete: deleted here too.
      await d.deleteObject(key);
      log.warn('export finished after its lease was lost; the worker that took it over completes it');
    }
  } catch (err) {
    if (timer) clearInterval(timer);
    slot.copy?.cancel('export failed');
    // The job shows how far it got (a failure often lands before the first progress tick).
    if (progress) await recordProgress(d.state, id, worker, progress.rows(), progress.bytes, null).catch(() => {});
    // Stops sending and discards the parts (the upload already did when it failed itself: same answer).
    const gone = slot.upload ? await slot.upload.abort() : true;
    await d.deleteObject(key);
    // The job turns 'failed' only once its COPY is gone (DuckDB interrupted, FIFO removed): whoever sees the
    // failure must not find the query still running. Bounded, so a wedged COPY cannot keep the job running.
    if (slot.copy) await settleWithin(slot.copy.done, 10_000);
    const orphan = gone ? null : slot.upload!.uploadId;
    if (leaseLost.aborted) {
      // Not a failure of the job: another worker has it (or will, once the lease ends). Leave it alone.
      log.warn({ err, orphan_upload: orphan }, 'export build stopped: lease lost');
    } else if (d.isClosed()) {
      // Shutting down: the job goes back to the queue for any worker (this attempt's upload was discarded).
      await requeueExport(d.state, id, worker, 'interrupted by a service restart; re-queued').catch(() => {});
      log.info('export interrupted by shutdown; re-queued');
    } else {
      await d.discardJobUploads(job, begun);
      await failExport(d.state, id, failureMessage(err, false), orphan, worker).catch((e: unknown) => log.error({ err: e }, 'export failure not recorded'));
      // The whole error (addresses, paths) stays here, in the log; the job's `error` names only what failed.
      log.warn({ err, orphan_upload: orphan }, 'export failed');
    }
  } finally {
    leaseLost.removeEventListener('abort', stop);
    d.running.delete(id);
  }
}
