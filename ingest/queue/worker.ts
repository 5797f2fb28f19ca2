import crypto from 'node:crypto';
import os from 'node:os';
import path from 'node:path';
import type { Logger } from '../../src/log.js';
import type { Db } from '../../src/state/db.js';
import { lakeIdentity } from '../ledger.js';
import { runIngest, type IngestOptions, type IngestReport } from '../run.js';
import { AlreadyLanded, GaveBack, PublishGate } from './gate.js';
import { stagesWithoutLake } from './stagers.js';
import { claimNextItem, failItem, finishItem, MAX_ATTEMPTS, pendingItems, releaseItem, renewItem, type QueueItem } from './store.js';

/**
 * `pmlake ingest --worker`: takes items from the lake's queue (./store.ts) one at a time until none is left to
 * land (with `wait`, until stopped). Each item is one runIngest of its file, whose expensive part — reading and
 * staging the file — runs outside the lake lock, in parallel with the other workers, and whose derived part
 * (book replay seeded from the lake, candles, merges, catalogue) and publish run under the lock in queue order
 * (./gate.ts). The item's lease is renewed every third of it while it works; a worker killed mid-item stops
 * renewing and any worker takes the item over once the lease ended. Stopping (SIGTERM): an item not yet
 * publishing is given back; one publishing finishes (its publish is atomic either way).
 */

export type QueueWorkerOptions = {
  db: Db;
  lakeDir: string;
  log: Logger;
  leaseMs: number;
  /** Keep looking for items when none is left (`--wait`). */
  wait: boolean;
  /** Between two looks at an empty queue. */
  pollMs?: number;
  /** Aborted to stop (SIGTERM). */
  stop: AbortSignal;
  /** What runIngest gets besides the lake (threads, memory, database URL for the lock, grace, compaction). */
  ingest: Omit<IngestOptions, 'lakeDir' | 'log' | 'lockWhenPublishing' | 'progress'>;
};

/** One item's costs, as recorded in its queue row (`report`) and in the worker's report. */
export type ItemCost = {
  seq: number;
  file: string;
  /** The format's handler (ingest/types.ts SourceHandler name): costs differ by format. */
  handler: string;
  outcome: 'landed' | 'skipped' | 'failed' | 'retry' | 'given back';
  worker: string;
  seconds: number;
  stage_seconds: number;
  /** Ready to publish → the items before it had landed, then → the lake lock held. */
  turn_wait_seconds: number;
  lock_wait_seconds: number;
  /** Under the lock: book replay, candles, merges, catalogue, publish, compaction. */
  locked_seconds: number;
  level_updates: number;
};

export type WorkerReport = {
  worker: string;
  items: number;
  landed: number;
  skipped: number;
  failed: number;
  given_back: number;
  seconds: number;
  /** CPU seconds of the whole process (DuckDB's threads included): the cost that does not depend on the machine's load. */
  cpu_seconds: number;
  level_updates: number;
  level_updates_per_second: number;
  turn_wait_seconds: number;
  lock_wait_seconds: number;
  costs: ItemCost[];
};

const round = (s: number): number => Math.round(s * 1000) / 1000;

export async function runQueueWorker(opts: QueueWorkerOptions): Promise<WorkerReport> {
  const t0 = performance.now();
  const lakeDir = path.resolve(opts.lakeDir);
  const lake = lakeIdentity(lakeDir);
  const worker = `${os.hostname()}:${process.pid}:${crypto.randomBytes(4).toString('hex')}`;
  const { db, log } = opts;
  const costs: ItemCost[] = [];
  opts.log.info({ worker, lake: lakeDir }, 'ingest worker started');
  while (!opts.stop.aborted) {
    let item: QueueItem | undefined;
    try {
      item = await claimNextItem(db, lake, worker, opts.leaseMs);
      if (!item) {
        if (!opts.wait && (await pendingItems(db, lake)) === 0) break;
      }
    } catch (err) {
      log.warn({ err }, 'ingest queue not reachable; retrying');
    }
    if (!item) {
      await sleep(opts.pollMs ?? 500, opts.stop);
      continue;
    }
    log.info({ seq: item.seq, file: item.path, attempt: item.attempts }, 'ingest item taken');
    costs.push(await processItem({ ...opts, lakeDir, lake, worker }, item));
  }
  const seconds = (performance.now() - t0) / 1000;
  const count = (o: ItemCost['outcome']): number => costs.filter((c) => c.outcome === o).length;
  const levelUpdates = costs.reduce((s, c) => s + c.level_updates, 0);
  const cpu = process.cpuUsage();
  return {
    worker,
    items: costs.length,
    landed: count('landed'),
    skipped: count('skipped'),
    failed: count('failed'),
    given_back: count('given back'),
    seconds: round(seconds),
    cpu_seconds: round((cpu.user + cpu.system) / 1e6),
    level_updates: levelUpdates,
    level_updates_per_second: seconds > 0 ? Math.round(levelUpdates / seconds) : 0,
    turn_wait_seconds: round(costs.reduce((s, c) => s + c.turn_wait_seconds, 0)),
    lock_wait_seconds: round(costs.reduce((s, c) => s + c.lock_wait_seconds, 0)),
    costs,
  };
}

type Ctx = QueueWorkerOptions & { lakeDir: string; lake: string; worker: string };

async function processItem(ctx: Ctx, item: QueueItem): Promise<ItemCost> {
  const { db, log, worker, leaseMs } = ctx;
  const t0 = performance.now();
  const lease = new AbortController();
  const onStop = (): void => lease.abort(new Error('the worker is stopping'));
  ctx.stop.addEventListener('abort', onStop);
  let renewed = Date.now();
  const timer = setInterval(
    () => {
      renewItem(db, item.seq, worker, leaseMs)
        .then((ok) => {
          if (ok) renewed = Date.now();
          else lease.abort(new Error('the item is no longer this worker’s'));
        })
        .catch((err: unknown) => {
          // The database away: go on while the lease may still hold, give up once it cannot.
          if (Date.now() - renewed >= leaseMs) lease.abort(new Error('lease not renewed in time'));
          log.warn({ err, seq: item.seq }, 'ingest lease not renewed');
        });
    },
    Math.max(200, Math.floor(leaseMs / 3)),
  );
  const gate = new PublishGate({ ...ctx, databaseUrl: ctx.ingest.databaseUrl, graceSeconds: ctx.ingest.graceSeconds ?? 86_400, signal: lease.signal }, item);
  let report: IngestReport | undefined;
  let outcome: ItemCost['outcome'];
  let error: string | undefined;
  try {
    // A format whose staging reads the lake (capture redundancy, catalogue polls) stages under the lock, in turn.
    if (!stagesWithoutLake(item.handler)) await gate.take();
    report = await runIngest([item.path], { ...ctx.ingest, lakeDir: ctx.lakeDir, log, lockWhenPublishing: () => gate.take() });
    if (report.ingested > 0) outcome = 'landed';
    else if (report.skipped > 0) outcome = 'skipped';
    else {
      outcome = 'failed';
      error = report.issues.map((i) => i.message).join('; ') || 'nothing could be read';
    }
  } catch (err) {
    if (err instanceof GaveBack) {
      outcome = 'given back';
      log.info({ seq: item.seq, reason: err.message }, 'ingest item given back');
    } else if (err instanceof AlreadyLanded) outcome = 'skipped';
    else {
      outcome = item.attempts < MAX_ATTEMPTS ? 'retry' : 'failed';
      error = (err as Error).message.split('\n')[0] ?? 'failed';
      log.error({ err, seq: item.seq, file: item.path }, 'ingest item failed');
    }
  } finally {
    clearInterval(timer);
    ctx.stop.removeEventListener('abort', onStop);
    // The lock's session lost with the database: the server dropped the lock with it; the worker goes on.
    await gate.releaseIfHeld().catch((err: unknown) => log.warn({ err, seq: item.seq }, 'lake lock not released cleanly'));
  }
  const cost: ItemCost = {
    seq: item.seq,
    file: item.path,
    handler: item.handler,
    outcome,
    worker,
    seconds: round((performance.now() - t0) / 1000),
    stage_seconds: report?.phase_seconds.stage ?? 0,
    turn_wait_seconds: round(gate.turnWaitMs / 1000),
    lock_wait_seconds: round(gate.lockWaitMs / 1000),
    locked_seconds: gate.lockedAt > 0 ? round((performance.now() - gate.lockedAt) / 1000) : 0,
    level_updates: report?.counts.level_updates ?? 0,
  };
  try {
    if (outcome === 'landed' || outcome === 'skipped') await finishItem(db, item.seq, worker, cost);
    else if (outcome === 'given back') await releaseItem(db, item.seq, worker);
    else await failItem(db, item.seq, worker, error ?? 'failed', outcome === 'retry');
  } catch (err) {
    // The lease runs out and the item is taken again; landing it twice adds nothing (the ledger says it landed).
    log.warn({ err, seq: item.seq }, 'ingest item outcome not recorded');
  }
  log.info({ ...cost }, 'ingest item finished');
  return cost;
}

function sleep(ms: number, stop: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const t = setTimeout(done, ms);
    function done(): void {
      clearTimeout(t);
      stop.removeEventListener('abort', done);
      resolve();
    }
    stop.addEventListener('abort', done, { once: true });
  });
}
