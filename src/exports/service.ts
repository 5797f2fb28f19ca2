import crypto from 'node:crypto';
import path from 'node:path';
import type { Principal } from '../accounts/principal.js';
import { contentDisposition } from '../downloads/disposition.js';
import { planDownload } from '../downloads/plan.js';
import type { LakeSession } from '../lake/session.js';
import { storeSpec, type PullSpec } from '../downloads/spec.js';
import { Forbidden, Gone, NotFound } from '../errors.js';
import { S3ObjectStore } from '../s3/store.js';
import { createOrGetExport, expireExport, getExport, jobsWithStatus, type ExportJobRow } from '../state/exports.js';
import { discardJobUploads, discardRecordedUpload, purgeDeletedAccounts, sweepExports } from './cleanup.js';
import type { ExportDeps } from './deps.js';
import { checkLink, loadLinkSecret, signLink } from './links.js';
import { LocalObjectStore, type LocalObject } from './local-store.js';
import { ExportWorker } from './queue.js';
import { runExport, type Slot } from './run.js';
import type { ObjectStore } from './store.js';

/**
 * Asynchronous exports: a job is a DuckDB COPY whose bytes go through a FIFO straight into a multipart upload
 * (./run.ts, ./multipart.ts) — no extra copy; the only buffers are the upload's reused parts. Jobs live in the
 * state database, which is the queue: any replica accepts a job (one idempotency key, one job), and the export
 * workers of every process sharing the database take them, PMLAKE_EXPORT_CONCURRENCY at a time each, under a
 * lease (./queue.ts): a job whose worker died is taken over by another (up to MAX_ATTEMPTS attempts).
 *
 * Where the bytes go: PMLAKE_S3_ENDPOINT (links are that store's presigned GETs), or by default the local
 * store under PMLAKE_STATE/exports, whose bytes only pmlake serves, behind its own signed links (./links.ts):
 * nothing else listens, so no link can be forged or widened.
 *
 * Money: nothing is charged at submit (only the plan is checked there). When the file is complete in the store the job asks the meter for the
 * charge (kind 'export', the real bytes); a refusal deletes the object and fails the job with the reason. A
 * failed build discards its upload and charges nothing; parts that could not be discarded then (store down,
 * a crash) are retried by the sweep (./cleanup.ts).
 */
export const MAX_ATTEMPTS = 3;
const EXPIRE_EVERY_MS = 60_000;
const SWEEP_EVERY_MS = 15 * 60_000;

export class ExportService {
  /** This process's worker, when it builds exports (`pmlake worker`, or `pmlake serve` with the embedded one). */
  private worker: ExportWorker | null = null;
  private opened: Promise<ObjectStore> | null = null;
  readonly running = new Map<string, Slot>();
  private readonly timers: NodeJS.Timeout[] = [];
  private closed = false;
  private sweeping: Promise<void> | null = null;
  private readonly secret: Buffer;

  constructor(private readonly deps: ExportDeps) {
    this.secret = loadLinkSecret(deps.config.linkSecret, deps.config.stateDir);
  }

  /** The object store, opened on first use (an S3 store must be reachable to open). */
  store(): Promise<ObjectStore> {
    if (!this.opened) {
      const cfg = this.deps.config.s3;
      this.opened = cfg.endpoint
        ? S3ObjectStore.open({ ...cfg, endpoint: cfg.endpoint }, this.deps.log)
        : Promise.resolve(new LocalObjectStore(path.join(this.deps.config.stateDir, 'exports')));
      this.opened.catch(() => {
        this.opened = null;
      });
    }
    return this.opened;
  }

  /**
   * Start-up: the expiry and sweep timers (any role), and with `worker` this process's export worker, which
   * takes queued jobs and those whose worker died (a job interrupted by this process's own restart included).
   */
  start(opts: { worker: boolean } = { worker: true }): void {
    if (opts.worker) {
      const deps = {
        ...this.deps,
        store: () => this.store(),
        running: this.running,
        isClosed: () => this.closed,
        maxAttempts: MAX_ATTEMPTS,
        discardOrphan: (job: { id: string; object_key: string | null; upload_id: string | null }) => this.discardOrphan(job),
        deleteObject: (key: string) => this.deleteObject(key),
        discardJobUploads: (job: { id: string; user_id: string }, before: Date) => discardJobUploads(this.deps, () => this.store(), job, before),
      };
      this.worker = new ExportWorker({
        state: this.deps.state,
        log: this.deps.log,
        concurrency: this.deps.config.exportConcurrency,
        leaseMs: this.deps.config.exportLeaseSeconds * 1000,
        build: (job, worker, leaseLost) => runExport(deps, job, worker, leaseLost),
      });
      this.worker.start();
    }
    void this.sweep();
    this.timers.push(
      setInterval(() => void this.expireDue().catch(() => {}), EXPIRE_EVERY_MS),
      setInterval(() => void this.sweep(), SWEEP_EVERY_MS),
    );
    for (const t of this.timers) t.unref();
  }

  /**
   * Persists a job for `spec` (stored as text, src/downloads/spec.ts) and queues it; a known key returns its job.
   * The spec is planned first, as a download of it would be: an unknown market is refused now, the plan must
   * cover the data set as an export (402, no job row), and the file is named as the same download's file.
   */
  async submit(lake: LakeSession, principal: Principal, spec: PullSpec, idempotencyKey: string | undefined): Promise<ExportJobRow> {
    const key = idempotencyKey ?? crypto.randomUUID().replaceAll('-', '');
    const plan = await planDownload({ lake, markets: this.deps.markets }, principal, spec);
    await this.deps.meter.authorize(principal, { kind: 'export', dataset: plan.dataset });
    const { row, created } = await createOrGetExport(this.deps.state, {
      userId: principal.userId,
      idempotencyKey: key,
      spec: storeSpec(spec),
      format: spec.format,
      fileName: plan.fileName,
    });
    // Built here when this process has a worker with a free slot, else by whichever worker polls first.
    if (created) this.worker?.kick();
    return row;
  }

  /** A job as shown now: a finished file past its retention is expired (and its object deleted). */
  async refresh(job: ExportJobRow): Promise<ExportJobRow> {
    if (job.status === 'succeeded' && job.expires_at && Date.parse(job.expires_at) <= Date.now()) {
      await expireExport(this.deps.state, job.id);
      if (job.object_key) void this.deleteObject(job.object_key);
      return (await getExport(this.deps.state, job.id)) ?? job;
    }
    return job;
  }

  /**
   * A download link for a finished job, valid `ttl` seconds: the S3 store's presigned GET, or pmlake's own
   * under `base` (src/http/public-url.ts: PMLAKE_PUBLIC_URL, an allowed Host, or the listen address).
   */
  async downloadUrl(job: ExportJobRow, ttl: number, base: string): Promise<string> {
    const store = await this.store();
    if (store instanceof S3ObjectStore) return store.presign(job.object_key!, ttl, contentDisposition(job.file_name));
    const expires = Math.floor(Date.now() / 1000) + ttl;
    const signature = signLink(this.secret, { jobId: job.id, userId: job.user_id, objectKey: job.object_key!, expires });
    return `${base}/v1/exports/${encodeURIComponent(job.id)}/file?expires=${expires}&signature=${signature}`;
  }

  /** The file behind one of pmlake's links, after checking the link: 403 forged/expired, 410 past retention. */
  async openLinked(jobId: string, expires: unknown, signature: unknown): Promise<{ job: ExportJobRow; object: LocalObject }> {
    const found = await getExport(this.deps.state, jobId);
    // Unknown job, bad signature, another job's or user's signature: one answer, nothing to tell them apart.
    const check = found?.object_key
      ? checkLink(this.secret, { jobId: found.id, userId: found.user_id, objectKey: found.object_key }, expires, signature)
      : 'invalid';
    if (check === 'invalid') throw new Forbidden('Invalid download link');
    if (check === 'expired') throw new Forbidden('Download link expired; GET /v1/exports/{job_id}/url gives a new one');
    const job = await this.refresh(found!);
    if (job.status === 'expired') throw new Gone('Export has expired; submit it again');
    const store = await this.store();
    const object = job.status === 'succeeded' && store instanceof LocalObjectStore ? await store.open(job.object_key!) : null;
    if (!object) throw new NotFound('Export file not found');
    return { job, object };
  }

  /**
   * Removes the export files of accounts deleted so far (./cleanup.ts purgeDeletedAccounts): called right after a
   * deletion, and by every sweep. Never throws: what is not removed now stays recorded for the next sweep.
   */
  async purgeDeleted(): Promise<void> {
    await purgeDeletedAccounts(this.deps, () => this.store()).catch((err: unknown) => this.deps.log.warn({ err }, 'export purge failed'));
  }

  /**
   * Discards uploads left behind (failed jobs' recorded ones, and any older than the bound) and deleted
   * accounts' files; see ./cleanup.ts.
   */
  sweep(olderThanHours = this.deps.config.exportStaleUploadHours): Promise<void> {
    // One sweep at a time: a slow store must not pile them up.
    this.sweeping ??= purgeDeletedAccounts(this.deps, () => this.store())
      .then(() => sweepExports(this.deps, () => this.store(), this.running, olderThanHours))
      .catch((err: unknown) => this.deps.log.warn({ err }, 'export sweep failed'))
      .finally(() => {
        this.sweeping = null;
      });
    return this.sweeping;
  }

  /** Waits until this process's worker has nothing running and nothing to take (tests). No worker: at once. */
  async idle(): Promise<void> {
    await this.worker?.idle();
  }

  /** This process's worker stops taking jobs / takes them again (tests, draining a machine). */
  pause(): void {
    this.worker?.pause();
  }

  resume(): void {
    this.worker?.resume();
  }

  /** This process's export worker id (host:pid:random), or null when it builds no exports. */
  get workerId(): string | null {
    return this.worker?.id ?? null;
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const t of this.timers) clearInterval(t);
    this.worker?.pause();
    for (const r of this.running.values()) {
      r.copy?.cancel('service shutting down');
      void r.upload?.abort();
    }
    await this.worker?.close();
    // A sweep still running would otherwise outlive the state store it reads.
    await this.sweeping;
    await (await this.opened?.catch(() => null))?.close();
  }

  private async expireDue(): Promise<void> {
    for (const job of await jobsWithStatus(this.deps.state, 'succeeded')) await this.refresh(job);
  }

  private discardOrphan(job: { id: string; object_key: string | null; upload_id: string | null }): Promise<boolean> {
    return discardRecordedUpload(this.deps, () => this.store(), job);
  }

  private async deleteObject(key: string): Promise<void> {
    try {
      await (await this.store()).deleteObject(key);
    } catch (err) {
      // Unreachable store: nothing was completed there either (a multipart upload is invisible until completed).
      this.deps.log.debug({ err, key }, 'export object not deleted');
    }
  }
}
