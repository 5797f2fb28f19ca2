import { benignRun, type Db } from '../../src/state/db.js';
import { raw, sql } from '../../src/state/sql.js';
import { now } from '../../src/state/store.js';

/**
 * The ingest queue in the state database (migration 600): one row per input of a lake, by content hash, in the
 * order the inputs are to land (`seq`). Status: queued → running → done | failed. A worker claims the lowest
 * `seq` that is queued, or running under a lease that ended (its worker died), in one transaction — `FOR UPDATE
 * SKIP LOCKED` on PostgreSQL, SQLite's write lock on one machine — as export jobs are claimed
 * (src/state/exports.ts), and renews the lease while it works. Every later write is guarded by the worker's id
 * and the status, so a worker that lost its lease changes nothing.
 */

export type QueueStatus = 'queued' | 'running' | 'done' | 'failed';

export type QueueItem = {
  seq: number;
  lake: string;
  sha256: string;
  path: string;
  bytes: number;
  handler: string;
  status: QueueStatus;
  attempts: number;
  worker: string | null;
  lease_until: string | null;
  error: string | null;
  report: string | null;
  enqueued_at: string;
  started_at: string | null;
  completed_at: string | null;
};

export type NewItem = { sha256: string; path: string; bytes: number; handler: string };

/** A worker killed this many times on one item (or failing on it) gives it up: the item is failed. */
export const MAX_ATTEMPTS = 3;

/** Adds the items (in order) that the lake's queue does not hold yet; returns how many were added. */
export function enqueueItems(db: Db, lake: string, items: readonly NewItem[]): Promise<number> {
  return db.tx(
    async (t) => {
      let added = 0;
      const at = now();
      for (const i of items) {
        added += await t.run(
          sql`INSERT INTO ingest_queue (lake, sha256, path, bytes, handler, status, enqueued_at)
              VALUES (${lake}, ${i.sha256}, ${i.path}, ${i.bytes}, ${i.handler}, 'queued', ${at})
              ON CONFLICT (lake, sha256) DO NOTHING`,
        );
      }
      return added;
    },
    { benign: true },
  );
}

const claimable = (iso: string): ReturnType<typeof sql> => sql`(status = 'queued' OR (status = 'running' AND (lease_until IS NULL OR lease_until < ${iso})))`;

/**
 * Takes the lowest item that is queued or whose lease ended, for `worker` until now + leaseMs: running, one
 * more attempt. An item whose worker died MAX_ATTEMPTS times is failed instead and the next one looked at.
 */
export async function claimNextItem(db: Db, lake: string, worker: string, leaseMs: number): Promise<QueueItem | undefined> {
  const at = new Date();
  const iso = at.toISOString();
  if (!(await db.get(sql`SELECT seq FROM ingest_queue WHERE lake = ${lake} AND ${claimable(iso)} LIMIT 1`))) return undefined;
  const skipLocked = raw(db.dialect === 'postgres' ? 'FOR UPDATE SKIP LOCKED' : '');
  return db.tx(
    async (t) => {
      for (;;) {
        const item = await t.get<QueueItem>(sql`SELECT * FROM ingest_queue WHERE lake = ${lake} AND ${claimable(iso)} ORDER BY seq LIMIT 1 ${skipLocked}`);
        if (!item) return undefined;
        if (item.attempts >= MAX_ATTEMPTS) {
          await t.run(
            sql`UPDATE ingest_queue SET status = 'failed', worker = NULL, lease_until = NULL, completed_at = ${iso},
                error = coalesce(error, ${`given up after ${item.attempts} attempts (workers died on it)`}) WHERE seq = ${item.seq}`,
          );
          continue;
        }
        await t.run(
          sql`UPDATE ingest_queue SET status = 'running', worker = ${worker}, lease_until = ${new Date(at.getTime() + leaseMs).toISOString()},
              started_at = ${iso}, attempts = attempts + 1 WHERE seq = ${item.seq}`,
        );
        return { ...item, status: 'running', worker, attempts: item.attempts + 1 };
      }
    },
    { benign: true },
  );
}

const mine = (seq: number, worker: string): ReturnType<typeof sql> => sql`seq = ${seq} AND worker = ${worker} AND status = 'running'`;

/** Extends the lease; false when the item is no longer this worker's (taken over after its lease ended). */
export async function renewItem(db: Db, seq: number, worker: string, leaseMs: number): Promise<boolean> {
  const until = new Date(Date.now() + leaseMs).toISOString();
  return (await benignRun(db, sql`UPDATE ingest_queue SET lease_until = ${until} WHERE ${mine(seq, worker)}`)) === 1;
}

/** running → done (landed, or the ledger already had it), with the item's costs. */
export async function finishItem(db: Db, seq: number, worker: string, report: object): Promise<boolean> {
  const q = sql`UPDATE ingest_queue SET status = 'done', lease_until = NULL, completed_at = ${now()}, error = NULL, report = ${JSON.stringify(report)}
                WHERE ${mine(seq, worker)}`;
  return (await db.run(q)) === 1;
}

/** running → failed for good (the input cannot be read), or back to queued while attempts remain (`retry`). */
export async function failItem(db: Db, seq: number, worker: string, error: string, retry: boolean): Promise<void> {
  await db.run(
    retry
      ? sql`UPDATE ingest_queue SET status = 'queued', worker = NULL, lease_until = NULL, error = ${error.slice(0, 1000)} WHERE ${mine(seq, worker)}`
      : sql`UPDATE ingest_queue SET status = 'failed', lease_until = NULL, completed_at = ${now()}, error = ${error.slice(0, 1000)} WHERE ${mine(seq, worker)}`,
  );
}

/** running → queued without counting the attempt: the worker gave the item back (its turn is not come, or it stops). */
export async function releaseItem(db: Db, seq: number, worker: string): Promise<void> {
  await benignRun(db, sql`UPDATE ingest_queue SET status = 'queued', worker = NULL, lease_until = NULL, attempts = attempts - 1 WHERE ${mine(seq, worker)}`);
}

/** Whether every item before `seq` has landed or failed for good: the item's turn to publish. */
export async function isTurn(db: Db, lake: string, seq: number): Promise<boolean> {
  return !(await db.get(sql`SELECT seq FROM ingest_queue WHERE lake = ${lake} AND seq < ${seq} AND status IN ('queued', 'running') LIMIT 1`));
}

/** Whether an item before `seq` is free to take (queued, or its worker's lease ended): it must land first. */
export async function earlierClaimable(db: Db, lake: string, seq: number): Promise<boolean> {
  return (
    (await db.get(sql`SELECT seq FROM ingest_queue WHERE lake = ${lake} AND seq < ${seq} AND ${claimable(new Date().toISOString())} LIMIT 1`)) !== undefined
  );
}

/** Items still to land (queued or running): a worker without `--wait` ends when there are none. */
export async function pendingItems(db: Db, lake: string): Promise<number> {
  const r = await db.get<{ n: number }>(sql`SELECT count(*) AS n FROM ingest_queue WHERE lake = ${lake} AND status IN ('queued', 'running')`);
  return Number(r?.n ?? 0);
}

export function queueItems(db: Db, lake: string): Promise<QueueItem[]> {
  return db.all<QueueItem>(sql`SELECT * FROM ingest_queue WHERE lake = ${lake} ORDER BY seq`);
}

/** The hashes the lake's queue holds, of any status. */
export async function queuedHashes(db: Db, lake: string): Promise<Set<string>> {
  const rows = await db.all<{ sha256: string }>(sql`SELECT sha256 FROM ingest_queue WHERE lake = ${lake}`);
  return new Set(rows.map((r) => r.sha256));
}
