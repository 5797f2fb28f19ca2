import { sql, type Dialect, type Sql } from './sql.js';

/**
 * The one async interface over the state database, with two backends: the embedded SQLite file (the default:
 * demo, tests, one machine; ./sqlite-db.ts) and PostgreSQL shared by every replica and worker
 * (PMLAKE_DATABASE_URL; ./pg-db.ts). Every state module (accounts, billing, pulls, exports, lifecycle, usage)
 * writes its SQL once with the `sql` tag (./sql.ts) and runs it through this.
 *
 * Transactions: `tx(fn)` runs fn in one transaction (inside one, fn joins it). A money or quota change reads
 * and writes in one `tx` and first locks the rows it decides on (`lockUser`): SQLite's BEGIN IMMEDIATE holds
 * the file's write lock for the whole transaction, so that is a no-op there; on PostgreSQL it is
 * `SELECT … FOR UPDATE`, which serializes one user's money and quota changes across replicas under READ
 * COMMITTED. PostgreSQL transactions that still conflict (serialization failure, deadlock, a unique key a
 * concurrent transaction took first) are retried whole, a bounded number of times.
 */
export interface Db {
  readonly dialect: Dialect;
  all<T>(q: Sql): Promise<T[]>;
  get<T>(q: Sql): Promise<T | undefined>;
  /** Runs a write; the number of rows it changed. */
  run(q: Sql): Promise<number>;
  /** One transaction (see above); `fn` may run more than once on PostgreSQL, so it must only touch the database. */
  tx<T>(fn: (t: Db) => Promise<T>, opts?: TxOptions): Promise<T>;
}

export type TxOptions = {
  /**
   * A write that cannot change who a key belongs to or what it may do (request counters, last_used_at): it
   * does not move the change stamp, so the principal cache survives it, and SQLite commits it without an
   * fsync (synchronous=NORMAL: atomic, survives kill -9, a power loss may drop it).
   */
  benign?: boolean;
};

/** A backend: the interface plus what the store around it needs. */
export interface DbBackend extends Db {
  /**
   * Synchronous and cheap (checked on every request): a value that changes whenever a change that may matter
   * to a cached principal was committed, by this process or any other (see each backend).
   */
  changeStamp(): string;
  /** Waits until every other process can see this one's committed changes in its change stamp (PostgreSQL). */
  publishChanges(): Promise<void>;
  close(): Promise<void>;
}

/**
 * A write that cannot change who a key belongs to or what it may do (export progress, leases, claims): run as a
 * benign transaction, so it neither empties the principal caches nor, on SQLite, waits for an fsync.
 */
export function benignRun(t: Db, q: Sql): Promise<number> {
  return t.tx((x) => x.run(q), { benign: true });
}

/** Locks the user's row until the transaction ends (PostgreSQL); SQLite's write lock already excludes everyone. */
export async function lockUser(t: Db, userId: string): Promise<void> {
  if (t.dialect !== 'postgres') return;
  await t.get(sql`SELECT id FROM users WHERE id = ${userId} FOR UPDATE`);
}
