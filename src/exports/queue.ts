import crypto from 'node:crypto';
import os from 'node:os';
import type { Logger } from '../log.js';
import type { Db } from '../state/db.js';
import { claimNextExport, renewLease, type ExportJobRow } from '../state/exports.js';
import { sql } from '../state/sql.js';

/**
 * The export worker: takes jobs from the shared queue in the state database (src/state/exports.ts) and builds
 * them, at most `concurrency` at a time. Every process that builds exports runs one — `pmlake worker`, or
 * `pmlake serve` with its embedded worker — and they need nothing but the database to share the work: a claim
 * is one transaction (`FOR UPDATE SKIP LOCKED` on PostgreSQL), so exactly one worker gets a job.
 *
 * Leases: a claimed job is this worker's until `lease_until`, renewed every third of the lease while it builds.
 * A worker killed mid-build (kill -9, a machine lost) stops renewing; once the lease has run out any worker
 * takes the job over as its next attempt (which first discards what the dead one left: ./run.ts). A worker
 * that cannot renew (its database away) for a whole lease stops its own build, since another worker may have
 * it by then. On one machine a dead holder is recognised at once (its pid is gone), without waiting.
 */
export type WorkerDeps = {
  state: Db;
  log: Logger;
  concurrency: number;
  leaseMs: number;
  /** Builds one claimed job (./run.ts runExport). */
  build(job: ExportJobRow, worker: string, leaseLost: AbortSignal): Promise<void>;
};

/** New jobs are found within this (a submit on this process wakes the worker at once). */
const POLL_MS = 1000;

export class ExportWorker {
  /** host:pid:random — the host and pid tell a worker on the same machine whether the holder still lives. */
  readonly id = `${os.hostname()}:${process.pid}:${crypto.randomBytes(4).toString('hex')}`;
  private readonly active = new Map<string, { done: Promise<void>; abort: AbortController; renewed: number }>();
  private pumping: Promise<void> | null = null;
  private again = false;
  /** When dead local holders were last looked for: once per poll interval, not on every kick. */
  private lookedForDead = 0;
  private paused = false;
  private closed = false;
  private readonly timers: NodeJS.Timeout[] = [];

  constructor(private readonly deps: WorkerDeps) {}

  start(): void {
    this.timers.push(
      setInterval(() => this.kick(), POLL_MS),
      setInterval(() => void this.renew(), Math.max(500, Math.floor(this.deps.leaseMs / 3))),
    );
    for (const t of this.timers) t.unref();
    this.kick();
  }

  /** Looks for work now (a job was just submitted here, or a slot freed up). */
  kick(): void {
    void this.pump().catch((err: unknown) => this.deps.log.warn({ err }, 'export queue not reachable; retrying'));
  }

  /** Stops taking new jobs (running ones go on). Tests and draining operators. */
  pause(): void {
    this.paused = true;
  }

  resume(): void {
    this.paused = false;
    this.kick();
  }

  /** Resolves once this worker has nothing running and finds nothing to take. */
  async idle(): Promise<void> {
    for (;;) {
      await this.pump();
      if (this.active.size === 0) return;
      await Promise.race([...this.active.values()].map((a) => a.done));
    }
  }

  /** Takes no more jobs and waits for the running ones, which the caller has told to stop. */
  async close(): Promise<void> {
    this.closed = true;
    for (const t of this.timers) clearInterval(t);
    await this.pumping?.catch(() => {});
    await Promise.allSettled([...this.active.values()].map((a) => a.done));
  }

  /** One pass at a time; a kick during a pass makes it look again. */
  private pump(): Promise<void> {
    if (this.pumping) {
      this.again = true;
      return this.pumping;
    }
    this.pumping = (async () => {
      do {
        this.again = false;
        if (Date.now() - this.lookedForDead >= POLL_MS) {
          this.lookedForDead = Date.now();
          await this.freeDeadLocalHolders();
        }
        while (!this.paused && !this.closed && this.active.size < this.deps.concurrency) {
          const at = new Date();
          const job = await claimNextExport(this.deps.state, this.id, at, new Date(at.getTime() + this.deps.leaseMs));
          if (!job) break;
          this.run(job);
        }
      } while (this.again && !this.closed);
    })().finally(() => {
      this.pumping = null;
    });
    return this.pumping;
  }

  private run(job: ExportJobRow): void {
    const abort = new AbortController();
    const done = this.deps
      .build(job, this.id, abort.signal)
      .catch((err: unknown) => this.deps.log.error({ err, job: job.id }, 'export job crashed'))
      .finally(() => {
        this.active.delete(job.id);
        if (!this.closed) this.kick();
      });
    this.active.set(job.id, { done, abort, renewed: Date.now() });
  }

  private async renew(): Promise<void> {
    const now = Date.now();
    for (const [id, a] of this.active) {
      try {
        if (await renewLease(this.deps.state, id, this.id, new Date(now + this.deps.leaseMs))) a.renewed = now;
        else a.abort.abort(new Error('the job is no longer this worker’s'));
      } catch (err) {
        // Could not reach the database: keep building while the lease may still hold, stop once it cannot.
        if (now - a.renewed >= this.deps.leaseMs) a.abort.abort(new Error('lease not renewed in time'));
        this.deps.log.warn({ err, job: id }, 'export lease not renewed');
      }
    }
  }

  /**
   * Running jobs held by a worker on this machine whose process is gone are free now rather than at the end
   * of their lease (a restarted `pmlake serve` resumes its own jobs at once). A reused pid only delays that
   * to the lease's end.
   */
  private async freeDeadLocalHolders(): Promise<void> {
    const host = os.hostname();
    const held = await this.deps.state.all<{ id: string; worker: string }>(
      sql`SELECT id, worker FROM export_jobs WHERE status = 'running' AND worker LIKE ${`${host}:%`}`,
    );
    for (const { id, worker } of held) {
      const parts = worker.split(':');
      const pid = Number(parts[parts.length - 2]);
      if (!Number.isInteger(pid) || pid <= 0 || alive(pid)) continue;
      await this.deps.state.run(sql`UPDATE export_jobs SET lease_until = NULL WHERE id = ${id} AND worker = ${worker} AND status = 'running'`);
    }
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    // EPERM: it exists, owned by someone else.
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}
