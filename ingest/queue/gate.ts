import type { Db } from '../../src/state/db.js';
import type { Logger } from '../../src/log.js';
import { acquireLakeLock, LakeLockedError, readLedger } from '../ledger.js';
import { sweepTempFiles } from '../partitions.js';
import { sweepLake } from '../sweep.js';
import { earlierClaimable, isTurn, renewItem, type QueueItem } from './store.js';

/**
 * The publish gate of one queue item: the item may derive and publish only when every item before it in the
 * queue has landed (or failed for good) — its turn — and then only under the lake's single-writer lock
 * (ingest/ledger.ts acquireLakeLock: the PostgreSQL advisory lock across machines). So items publish one at a
 * time in queue order whatever worker staged them, and each one's books are seeded from a lake that holds exactly
 * the items before it, as in a single ingest of the inputs one batch per input.
 *
 * While it waits it gives its item back (GaveBack) when an earlier item is free to take — queued, or held by a
 * worker whose lease ended (killed) — since that one must land first and this worker may be the only one left
 * to take it; and when the worker is told to stop or lost its lease. Under the lock, before anything is written:
 * the lease is renewed (a worker that lost it does not publish), and an item the ledger already holds (an
 * earlier holder published it and died before saying so) is not landed again (AlreadyLanded).
 */

export class GaveBack extends Error {}
export class AlreadyLanded extends Error {}

export type GateDeps = {
  db: Db;
  lake: string;
  lakeDir: string;
  databaseUrl: string | undefined;
  worker: string;
  leaseMs: number;
  graceSeconds: number;
  log: Logger;
  /** Aborted when the worker stops or loses the item's lease. */
  signal: AbortSignal;
};

/** Whether this process swept what killed writers left in the lake (the stagers never write there) yet. */
let swept = false;

/** Longest pause between two looks at the queue while waiting: the lake stands idle for at most this after a publish. */
const MAX_POLL_MS = 100;

export class PublishGate {
  private release: (() => Promise<void>) | undefined;
  private waitFrom = 0;
  /** From ready to publish until the items before it had landed, then until the lock was held (ms). */
  turnWaitMs = 0;
  lockWaitMs = 0;
  lockedAt = 0;

  constructor(
    private readonly deps: GateDeps,
    private readonly item: QueueItem,
  ) {}

  /** Waits for the turn and takes the lock; returns its release (idempotent). Throws GaveBack or AlreadyLanded. */
  async take(): Promise<() => Promise<void>> {
    if (this.release) return this.release;
    const { db, lake } = this.deps;
    this.waitFrom = performance.now();
    let turnAt = 0;
    for (let delay = 10; ; delay = Math.min(MAX_POLL_MS, delay * 2)) {
      if (this.deps.signal.aborted) throw new GaveBack(String(this.deps.signal.reason ?? 'stopping'));
      if (turnAt === 0) {
        if (await earlierClaimable(db, lake, this.item.seq)) throw new GaveBack('an earlier item is free to take: it lands first');
        if (await isTurn(db, lake, this.item.seq)) turnAt = performance.now();
      }
      if (turnAt > 0) {
        const rel = await this.tryLock();
        if (rel) {
          this.lockedAt = performance.now();
          this.turnWaitMs = turnAt - this.waitFrom;
          this.lockWaitMs = this.lockedAt - turnAt;
          await this.underLock(rel);
          let done = false;
          this.release = async () => {
            if (done) return;
            done = true;
            await rel();
          };
          return this.release;
        }
      }
      await new Promise((r) => setTimeout(r, delay));
    }
  }

  /** Releases the lock if this gate took it and the ingest did not (nothing was left to publish). */
  async releaseIfHeld(): Promise<void> {
    await this.release?.();
  }

  private async tryLock(): Promise<(() => Promise<void>) | undefined> {
    try {
      return await acquireLakeLock(this.deps.lakeDir, { databaseUrl: this.deps.databaseUrl });
    } catch (err) {
      // Another writer: the previous item's worker finishing its compaction, or a hand-run `pmlake compact`.
      if (err instanceof LakeLockedError) return undefined;
      throw err;
    }
  }

  private async underLock(rel: () => Promise<void>): Promise<void> {
    const { db, lakeDir, worker, leaseMs } = this.deps;
    try {
      if (!(await renewItem(db, this.item.seq, worker, leaseMs))) throw new GaveBack('the item’s lease was lost before publishing');
      // Once per process, and whenever the item was taken before: its holder may have died mid-publish.
      if (!swept || this.item.attempts > 1) {
        swept = true;
        const temps = sweepTempFiles(lakeDir);
        const lake = sweepLake(lakeDir, this.deps.graceSeconds * 1000);
        if (temps + lake.orphans + lake.retired > 0) this.deps.log.info({ temps, ...lake }, 'swept what killed writers left in the lake');
      }
      if (readLedger(lakeDir).has(this.item.sha256)) throw new AlreadyLanded('the ledger already holds the item');
    } catch (err) {
      await rel();
      throw err;
    }
  }
}
