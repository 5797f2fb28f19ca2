import type { Principal } from '../accounts/principal.js';
import { CONTENT_TYPES, startCopy, type CopyFormat, type CopyStream } from '../lake/stream.js';
import { planDownload } from '../downloads/plan.js';
import { loadSpec } from '../downloads/spec.js';
import { claimExport, failExport, getExport, recordProgress, succeedExport } from '../state/exports.js';
import type { ExportDeps } from './deps.js';
import { AccountGone, failureMessage, failureReason, StorageError } from './failure.js';
import { FeedStopped, MultipartUpload, settleWithin } from './multipart.js';
import type { ObjectStore } from './store.js';

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
  /** Discards a previous attempt's upload recorded on the job; false when the store could not do it now. */
  discardOrphan(job: { id: string; object_key: string | null; upload_id: string | null }): Promise<boolean>;
  deleteObject(key: string): Promise<void>;
};

const PART_SIZE = 8 * 1024 * 1024;
/**
 * Progress goes to the state store 1 s into a job (a client polling early sees it move), then every 5 s. Each
 * write is a synchronous SQLite commit with an fsync on the event loop — while it waits, nobody drains the
 * FIFO and DuckDB stalls (recordProgress was ~0.4 s of main-thread time across a bench run's exports).
 */
const PROGRESS_FIRST_MS = 1000;
const PROGRESS_MS = 5000;

/** Counts bytes, and rows for the line-per-row formats (CSV minus its header, JSON array one record a line). */
class Progress {
  bytes = 0;
  lines = 0;
  private readonly countLines: boolean;
  constructor(private readonly format: CopyFormat) {
    // Parquet has no lines: scanning its bytes for 0x0A would count nothing useful.
    this.countLines = format !== 'parquet';
  }

  add(chunk: Buffer): void {
    this.bytes += chunk.length;
    if (this.countLines) for (let i = chunk.indexOf(10); i !== -1; i = chunk.indexOf(10, i + 1)) this.lines += 1;
  }

  /** Rows so far: lines minus the CSV header / the JSON array's opening line; Parquet has no lines to count. */
  rows(): number {
    return this.format === 'parquet' ? 0 : Math.max(0, this.lines - 1);
  }
}

function principalOf(d: ExportDeps, userId: string): Principal | null {
  const u = d.state.getUser(userId);
  return u ? { userId: u.id, email: u.email, keyId: null, plan: u.plan, scopes: ['read', 'download'] } : null;
}

export async function runExport(d: RunDeps, id: string): Promise<void> {
  if (d.isClosed()) return;
  const job = getExport(d.state, id);
  if (!job || job.status !== 'queued') return;
  const log = d.log.child({ export_job: id });
  // A previous attempt's parts (a crash, or a failure while the store was down) go first: the claim below
  // gives the job a new key, and with it the last record of where they are.
  if (job.upload_id && !(await d.discardOrphan(job))) {
    failExport(d.state, id, failureMessage(new StorageError(null), false), job.upload_id);
    log.warn({ upload_id: job.upload_id }, "export failed: the previous attempt's upload could not be discarded");
    return;
  }
  // One key per attempt: discarding or deleting what an earlier attempt left can never touch this one.
  const key = `exports/${job.user_id}/${job.id}/${job.attempts + 1}/${job.file_name}`;
  if (!claimExport(d.state, id, key)) return;
  const principal = principalOf(d, job.user_id);
  const slot: Slot = { copy: null, upload: null };
  d.running.set(id, slot);
  let timer: NodeJS.Timeout | null = null;
  let progress: Progress | null = null;
  const started = Date.now();
  try {
    if (!principal) throw new AccountGone();
    // A spec that no longer parses fails the job here, saying so (StoredSpecError → failure.ts).
    const plan = await planDownload(d, principal, loadSpec(job.spec));
    const format = plan.format;
    const store = await d.store().catch((err: unknown) => {
      throw new StorageError(err);
    });
    const copy = await startCopy(d.db, plan.query, format);
    slot.copy = copy;
    const counted = new Progress(format);
    progress = counted;
    const up = new MultipartUpload(store, { key, contentType: CONTENT_TYPES[format] }, PART_SIZE, 2);
    slot.upload = up;
    const tick = (): void => recordProgress(d.state, id, counted.rows(), counted.bytes, up.uploadId);
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
        (uploadId) => recordProgress(d.state, id, 0, 0, uploadId),
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
    recordProgress(d.state, id, rows, bytes, null);
    // The file is complete in object storage: now, and only now, the pull is charged.
    let ticket;
    try {
      ticket = await d.meter.begin(principal, {
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
      failExport(d.state, id, `charge refused: ${failureReason(err, false)}; the file was deleted and nothing was charged`);
      log.warn({ err }, 'export charge refused');
      return;
    }
    ticket.commit({ bytes, rows });
    const expiresAt = new Date(Date.now() + d.config.exportRetentionHours * 3_600_000).toISOString();
    succeedExport(d.state, id, { rows, bytes, cost: 0, expiresAt });
    log.info({ rows, bytes, ms: Date.now() - started, copy_ms: copyMs, upload_ms: uploadMs }, 'export succeeded');
  } catch (err) {
    if (timer) clearInterval(timer);
    slot.copy?.cancel('export failed');
    // The job shows how far it got (a failure often lands before the first progress tick).
    if (progress) recordProgress(d.state, id, progress.rows(), progress.bytes, null);
    // Stops sending and discards the parts (the upload already did when it failed itself: same answer).
    const gone = slot.upload ? await slot.upload.abort() : true;
    await d.deleteObject(key);
    // The job turns 'failed' only once its COPY is gone (DuckDB interrupted, FIFO removed): whoever sees the
    // failure must not find the query still running. Bounded, so a wedged COPY cannot keep the job running.
    if (slot.copy) await settleWithin(slot.copy.done, 10_000);
    const orphan = gone ? null : slot.upload!.uploadId;
    failExport(d.state, id, failureMessage(err, d.isClosed()), orphan);
    // The whole error (addresses, paths) stays here, in the log; the job's `error` names only what failed.
    log.warn({ err, orphan_upload: orphan }, 'export failed');
  } finally {
    d.running.delete(id);
  }
}
