import crypto from 'node:crypto';
import path from 'node:path';
import { AbortMultipartUploadCommand, DeleteObjectCommand, type S3Client } from '@aws-sdk/client-s3';
import PQueue from 'p-queue';
import type { Principal } from '../http/auth.js';
import type { AppContext } from '../http/context.js';
import { HttpError } from '../http/errors.js';
import { CONTENT_TYPES, startCopy, type CopyFormat, type CopyStream } from '../lake/stream.js';
import { planDownload, type DownloadKind } from '../downloads/plan.js';
import { MultipartUpload } from './multipart.js';
import { ensureBucket, makeS3Client, presignGet } from '../s3/client.js';
import { startLocalS3, type LocalS3 } from '../s3/local.js';
import {
  claimExport,
  clearUploadId,
  createOrGetExport,
  expireExport,
  failExport,
  getExport,
  jobsWithStatus,
  recordProgress,
  requeueExport,
  succeedExport,
  type ExportJobRow,
} from '../state/exports.js';
import { parseTimeframe } from '../timeframe.js';

/**
 * Asynchronous exports: a job is a DuckDB COPY whose bytes go through a FIFO straight into an S3 multipart
 * upload (./multipart.ts) — no temporary copy on local disk; the only buffers are the upload's reused parts
 * (partSize × (queueSize + 1)). Jobs run in a p-queue (PMLAKE_EXPORT_CONCURRENCY at a time); their state lives in
 * the state store, so a restart re-queues interrupted jobs (up to MAX_ATTEMPTS) or fails them with a reason.
 *
 * Money: nothing is charged at submit. When the file is complete in object storage the job asks the meter
 * for the charge (kind 'export', the real bytes); a refusal (402/429) deletes the object and fails the job
 * with the reason in `error`. A failed build or upload is aborted and charges nothing.
 */
export type ExportSpec = {
  kind: 'trades' | 'raw' | 'ohlcv' | 'orderbook';
  market_id?: string | undefined;
  series_id?: string | undefined;
  timeframe?: string | undefined;
  shape?: 'raw' | 'normalized' | undefined;
  start?: string | undefined;
  end?: string | undefined;
  format: CopyFormat;
};

const MAX_ATTEMPTS = 3;
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
  constructor(private readonly countLines: boolean) {}

  add(chunk: Buffer): void {
    this.bytes += chunk.length;
    // Parquet has no lines: scanning its bytes for 0x0A would count nothing useful.
    if (this.countLines) for (let i = chunk.indexOf(10); i !== -1; i = chunk.indexOf(10, i + 1)) this.lines += 1;
  }

  /** Rows so far: lines minus the CSV header / the JSON array's opening line; Parquet has no lines to count. */
  rows(format: CopyFormat): number {
    return format === 'parquet' ? 0 : Math.max(0, this.lines - 1);
  }
}

/** The object store failed during the upload (unreachable, refused a part, …). */
class StorageError extends Error {
  constructor(cause: unknown) {
    super(`object storage upload failed: ${message(cause)}`, { cause });
    this.name = 'StorageError';
  }
}

function message(err: unknown): string {
  if (err instanceof HttpError) return typeof err.detail === 'string' ? err.detail : JSON.stringify(err.detail);
  if (err instanceof Error) return err.message || err.name;
  return String(err);
}

function tfOf(label: string | undefined) {
  if (!label) return undefined;
  const r = parseTimeframe(label);
  return r.ok ? r.value : undefined;
}

function micros(iso: string | undefined): bigint | undefined {
  return iso === undefined ? undefined : BigInt(Date.parse(iso)) * 1000n;
}

export class ExportService {
  private readonly queue: PQueue;
  private s3: Promise<{ client: S3Client; bucket: string }> | null = null;
  private local: LocalS3 | null = null;
  private readonly running = new Map<string, { copy: CopyStream | null; upload: MultipartUpload | null }>();
  private janitor: NodeJS.Timeout | null = null;
  private closed = false;

  constructor(private readonly ctx: AppContext) {
    this.queue = new PQueue({ concurrency: ctx.config.exportConcurrency });
  }

  /** The object store: PMLAKE_S3_ENDPOINT, or the embedded s3rver under PMLAKE_STATE/s3 (started on first use). */
  storage(): Promise<{ client: S3Client; bucket: string }> {
    if (!this.s3) {
      this.s3 = (async () => {
        const cfg = this.ctx.config.s3;
        let endpoint = cfg.endpoint;
        if (!endpoint) {
          this.local = await startLocalS3({ directory: path.join(this.ctx.config.stateDir, 's3'), buckets: [cfg.bucket] });
          endpoint = this.local.endpoint;
          this.ctx.log.info({ endpoint }, 'embedded S3-compatible store started (PMLAKE_S3_ENDPOINT unset)');
        }
        const client = makeS3Client({ ...cfg, endpoint });
        await ensureBucket(client, cfg.bucket);
        return { client, bucket: cfg.bucket };
      })();
      this.s3.catch(() => {
        this.s3 = null;
      });
    }
    return this.s3;
  }

  /** Start-up: interrupted jobs are re-queued (or failed after MAX_ATTEMPTS), queued ones resume, orphans are aborted. */
  start(): void {
    for (const job of jobsWithStatus(this.ctx.state, 'running')) {
      if (job.upload_id) void this.abortOrphan(job);
      if (job.attempts >= MAX_ATTEMPTS) {
        failExport(this.ctx.state, job.id, `interrupted by a service restart ${job.attempts} times; nothing was charged`);
      } else {
        requeueExport(this.ctx.state, job.id, 'interrupted by a service restart; re-queued');
      }
    }
    for (const job of jobsWithStatus(this.ctx.state, 'failed')) if (job.upload_id) void this.abortOrphan(job);
    for (const job of jobsWithStatus(this.ctx.state, 'queued')) this.enqueue(job.id);
    this.janitor = setInterval(() => this.expireDue(), 60_000);
    this.janitor.unref();
  }

  submit(principal: Principal, spec: ExportSpec, idempotencyKey: string | undefined): ExportJobRow {
    const key = idempotencyKey ?? crypto.randomUUID().replaceAll('-', '');
    const id = spec.market_id ?? spec.series_id ?? 'all';
    const fileName = `${spec.kind}_${id.replace(/[^A-Za-z0-9._-]+/g, '_').slice(0, 100)}.${spec.format}`;
    const { row, created } = createOrGetExport(this.ctx.state, { userId: principal.userId, idempotencyKey: key, spec, format: spec.format, fileName });
    if (created) this.enqueue(row.id);
    return row;
  }

  /** A job as shown now: a finished file past its retention is expired (and its object deleted). */
  refresh(job: ExportJobRow): ExportJobRow {
    if (job.status === 'succeeded' && job.expires_at && Date.parse(job.expires_at) <= Date.now()) {
      expireExport(this.ctx.state, job.id);
      void this.deleteObject(job.object_key);
      return getExport(this.ctx.state, job.id) ?? job;
    }
    return job;
  }

  async presign(job: ExportJobRow, ttl: number): Promise<string> {
    const { client, bucket } = await this.storage();
    return presignGet(client, bucket, job.object_key!, ttl, job.file_name);
  }

  /** Waits for queued and running jobs (tests, shutdown). */
  async idle(): Promise<void> {
    await this.queue.onIdle();
  }

  async close(): Promise<void> {
    this.closed = true;
    if (this.janitor) clearInterval(this.janitor);
    this.queue.clear();
    for (const r of this.running.values()) {
      r.copy?.cancel('service shutting down');
      void r.upload?.abort();
    }
    await this.queue.onIdle().catch(() => {});
    await this.local?.close();
  }

  private enqueue(id: string): void {
    void this.queue.add(() => this.run(id)).catch((err: unknown) => this.ctx.log.error({ err, job: id }, 'export job crashed'));
  }

  private expireDue(): void {
    for (const job of jobsWithStatus(this.ctx.state, 'succeeded')) this.refresh(job);
  }

  private principalOf(userId: string): Principal | null {
    const u = this.ctx.state.getUser(userId);
    return u ? { userId: u.id, email: u.email, keyId: null, plan: u.plan, scopes: ['read', 'download'] } : null;
  }

  private async run(id: string): Promise<void> {
    if (this.closed) return;
    const job = getExport(this.ctx.state, id);
    if (!job || job.status !== 'queued') return;
    const key = `exports/${job.user_id}/${job.id}/${job.file_name}`;
    if (!claimExport(this.ctx.state, id, key)) return;
    const log = this.ctx.log.child({ export_job: id });
    const spec = JSON.parse(job.spec) as ExportSpec;
    const principal = this.principalOf(job.user_id);
    const slot: { copy: CopyStream | null; upload: MultipartUpload | null } = { copy: null, upload: null };
    this.running.set(id, slot);
    let upload: MultipartUpload | null = null;
    let timer: NodeJS.Timeout | null = null;
    let progress: Progress | null = null;
    const started = Date.now();
    try {
      if (!principal) throw new Error('the account no longer exists');
      const plan = await planDownload(this.ctx, principal, {
        kind: spec.kind as DownloadKind,
        market_id: spec.market_id,
        series_id: spec.series_id,
        data_type: spec.kind === 'raw' ? spec.series_id : undefined,
        timeframe: tfOf(spec.timeframe),
        shape: spec.shape,
        start: micros(spec.start),
        end: micros(spec.end),
        format: spec.format,
        limit: null,
      });
      const { client, bucket } = await this.storage();
      const copy = await startCopy(this.ctx.db, plan.query, spec.format);
      slot.copy = copy;
      const counted = new Progress(spec.format !== 'parquet');
      progress = counted;
      upload = new MultipartUpload(client, { Bucket: bucket, Key: key, ContentType: CONTENT_TYPES[spec.format] }, PART_SIZE, 2);
      slot.upload = upload;
      const up = upload;
      const tick = (): void => recordProgress(this.ctx.state, id, counted.rows(spec.format), counted.bytes, up.uploadId);
      timer = setTimeout(() => {
        tick();
        timer = setInterval(tick, PROGRESS_MS);
      }, PROGRESS_FIRST_MS);
      // A storage failure is named as such in the job's `error` (the SDK's own message is only e.g.
      // "connect ECONNREFUSED …"). The upload rejecting first also cancels the COPY, so Promise.all below
      // reports the storage error, not the resulting "copy cancelled".
      const uploadDone = up.run(copy, (b) => counted.add(b)).catch((err: unknown) => {
        throw new StorageError(err);
      });
      uploadDone.catch(() => copy.cancel('upload failed'));
      copy.done.catch(() => void up.abort());
      // Phase times for the log: when DuckDB's COPY finished, and when the store had the whole object.
      let copyMs = 0;
      void copy.done.then(() => (copyMs = Date.now() - started), () => {});
      const [, result] = await Promise.all([uploadDone, copy.done]);
      const uploadMs = Date.now() - started;
      clearInterval(timer);
      timer = null;
      const rows = result.rows;
      const bytes = counted.bytes;
      recordProgress(this.ctx.state, id, rows, bytes, null);
      // The file is complete in object storage: now, and only now, the pull is charged.
      let ticket;
      try {
        ticket = await this.ctx.meter.begin(principal, {
          kind: 'export',
          dataset: plan.dataset,
          description: `export ${job.id}: ${plan.description}`,
          estimatedBytes: bytes,
          format: spec.format,
          marketId: plan.marketId,
          fileName: job.file_name,
          timeframe: plan.timeframe,
          start: plan.start,
          end: plan.end,
        });
      } catch (err) {
        await this.deleteObject(key);
        failExport(this.ctx.state, id, `charge refused: ${message(err)}; the file was deleted and nothing was charged`);
        log.warn({ err }, 'export charge refused');
        return;
      }
      ticket.commit({ bytes, rows });
      const expiresAt = new Date(Date.now() + this.ctx.config.exportRetentionHours * 3_600_000).toISOString();
      succeedExport(this.ctx.state, id, { rows, bytes, cost: 0, expiresAt });
      log.info({ rows, bytes, ms: Date.now() - started, copy_ms: copyMs, upload_ms: uploadMs }, 'export succeeded');
    } catch (err) {
      if (timer) clearInterval(timer);
      slot.copy?.cancel('export failed');
      void slot.upload?.abort();
      // The job shows how far it got (a failure often lands before the first progress tick).
      if (progress) recordProgress(this.ctx.state, id, progress.rows(spec.format), progress.bytes, null);
      const orphan = upload ? await this.abortUpload(upload, key) : null;
      await this.deleteObject(key);
      // The job turns 'failed' only once its COPY is gone (DuckDB interrupted, FIFO removed): whoever sees the
      // failure must not find the query still running. Bounded, so a wedged COPY cannot keep the job running.
      if (slot.copy) await settleWithin(slot.copy.done, 10_000);
      const why = this.closed ? 'the service shut down during the build' : message(err);
      failExport(this.ctx.state, id, `export failed: ${why}; nothing was charged`, orphan);
      log.warn({ err, orphan_upload: orphan }, 'export failed');
    } finally {
      this.running.delete(id);
    }
  }

  /**
   * Makes sure a failed multipart upload leaves no parts behind. MultipartUpload already sent
   * AbortMultipartUpload once; send it again in case that one was lost. When the store
   * refuses (s3rver answers 405) or cannot be reached, the upload id is kept on the job so start-up can retry.
   */
  private async abortUpload(upload: MultipartUpload, key: string): Promise<string | null> {
    const uploadId = upload.uploadId;
    if (!uploadId) return null;
    try {
      const { client, bucket } = await this.storage();
      await client.send(new AbortMultipartUploadCommand({ Bucket: bucket, Key: key, UploadId: uploadId }));
      return null;
    } catch (err) {
      const status = (err as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode;
      // NoSuchUpload: the first abort worked.
      if ((err as { name?: string }).name === 'NoSuchUpload' || status === 404) return null;
      this.ctx.log.warn({ err, upload_id: uploadId, status }, 'AbortMultipartUpload refused; upload id kept for a retry');
      return uploadId;
    }
  }

  private async abortOrphan(job: ExportJobRow): Promise<void> {
    if (!job.upload_id || !job.object_key) return;
    try {
      const { client, bucket } = await this.storage();
      await client.send(new AbortMultipartUploadCommand({ Bucket: bucket, Key: job.object_key, UploadId: job.upload_id }));
      clearUploadId(this.ctx.state, job.id);
    } catch (err) {
      this.ctx.log.warn({ err, job: job.id, upload_id: job.upload_id }, 'orphaned multipart upload could not be aborted');
    }
  }

  private async deleteObject(key: string | null): Promise<void> {
    if (!key) return;
    try {
      const { client, bucket } = await this.storage();
      await client.send(new DeleteObjectCommand({ Bucket: bucket, Key: key }));
    } catch {
      // Unreachable store: nothing was completed there either (a multipart upload is invisible until completed).
    }
  }
}

/** Waits for `p` to settle (either way), at most `ms`. */
function settleWithin(p: Promise<unknown>, ms: number): Promise<void> {
  return new Promise<void>((resolve) => {
    const t = setTimeout(resolve, ms);
    const done = (): void => {
      clearTimeout(t);
      resolve();
    };
    p.then(done, done);
  });
}

