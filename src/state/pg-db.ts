import crypto from 'node:crypto';
import pg from 'pg';
import { Unavailable } from '../errors.js';
import type { Logger } from '../log.js';
import type { Db, DbBackend, TxOptions } from './db.js';
import { PG_MIGRATIONS } from './migrations.js';
import { connectPg, pgFailure, pgUnreachable } from './pg.js';
import type { Sql } from './sql.js';

/**
 * The shared backend (PMLAKE_DATABASE_URL): PostgreSQL behind a connection pool, for every replica and worker.
 * The same SQL as SQLite (./sql.ts); integers come back as JS numbers (int8 counts and sums: cents and bytes
 * stay far below 2^53), times are ISO-8601 text in both backends.
 *
 * Failures: a server out of reach is `Unavailable` (503, naming no host or password; the pool reconnects by
 * itself on the next statement); a statement's own fault propagates. A transaction that conflicts with a
 * concurrent one — serialization failure (40001), deadlock (40P01), or a unique key another transaction took
 * between our check and our insert (23505: an idempotency key submitted on two replicas at once) — is rolled
 * back and run again whole (at most MAX_TX_ATTEMPTS), so the second run sees the first's row.
 *
 * Change stamp (the principal cache's validity, src/accounts/auth.ts): triggers on users, subscriptions and the
 * non-informational columns of api_keys (migration 400) `pg_notify('pmlake_state')` in the writing
 * transaction; PostgreSQL delivers it at commit to every session listening. Each process holds one listening
 * connection and counts notifications; its own non-benign writes count at once. While the listener is not
 * connected the stamp changes on every call, so no cached principal is trusted: every request reads the
 * database (and answers 503 if it is away) until the listener is back.
 */
const MAX_TX_ATTEMPTS = 6;
const RETRY_CODES = new Set(['40001', '40P01', '23505']);
const CHANNEL = 'pmlake_state';
/** Each listener's receipt of another process's publishChanges token (see there); not a change in itself. */
const ACK_CHANNEL = 'pmlake_state_ack';
const LISTENER_NAME = 'pmlake listener pid';
const LISTEN_RETRY_MS = 500;
const PUBLISH_WAIT_MS = 2000;

const INT8 = 20;

/**
 * Statements of a fixed shape are prepared once per connection (named by a digest of their text): an
 * authentication that misses the key cache was mostly PostgreSQL parsing and planning. Batches (many values,
 * a text per batch size) stay unnamed, so a connection does not collect one prepared statement per size.
 */
const PREPARE_MAX_VALUES = 16;
const names = new Map<string, string>();

function statement(text: string, values: unknown[]): pg.QueryConfig {
  if (values.length > PREPARE_MAX_VALUES) return { text, values };
  let name = names.get(text);
  if (!name) {
    name = `pmlake_${crypto.createHash('sha1').update(text).digest('hex').slice(0, 16)}`;
    if (names.size < 1000) names.set(text, name);
  }
  return { name, text, values };
}
const NUMERIC = 1700;

export class PgDb implements DbBackend {
  readonly dialect = 'postgres' as const;
  private readonly pool: pg.Pool;
  private listener: pg.Client | null = null;
  private listening = false;
  private epoch = 0;
  private notifications = 0;
  private localWrites = 0;
  private offline = 0;
  private closed = false;
  private retryTimer: NodeJS.Timeout | null = null;
  /** publishChanges in flight, by token: acknowledgements still awaited, and whether our own listener has it. */
  private readonly waiters = new Map<string, { acks: number; own: boolean; done: () => void }>();

  private constructor(
    private readonly url: string,
    private readonly log: Logger | undefined,
    applicationName: string,
  ) {
    this.pool = new pg.Pool({
      connectionString: url,
      application_name: applicationName.slice(0, 63),
      max: 10,
      connectionTimeoutMillis: 2000,
      idleTimeoutMillis: 30_000,
      query_timeout: 15_000,
      statement_timeout: 15_000,
      keepAlive: true,
      types: {
        getTypeParser: ((oid: number, format?: 'text' | 'binary') =>
          oid === INT8 || oid === NUMERIC ? (v: string) => Number(v) : pg.types.getTypeParser(oid, format)) as typeof pg.types.getTypeParser,
      },
    });
    // An idle pooled connection the server dropped must not end the process; the pool replaces it.
    this.pool.on('error', (err) => this.log?.warn({ reason: pgFailure(err) }, 'state database connection lost'));
  }

  /** Connects, applies pending migrations (one replica at a time), starts listening for changes. */
  static async connect(url: string, opts: { log?: Logger; applicationName?: string } = {}): Promise<PgDb> {
    const db = new PgDb(url, opts.log, opts.applicationName ?? `pmlake pid ${process.pid}`);
    try {
      await db.migrate();
      await db.listen();
    } catch (err) {
      await db.close();
      throw err;
    }
    return db;
  }

  async all<T>(q: Sql): Promise<T[]> {
    return (await this.query<T>(this.pool, q)).rows;
  }

  async get<T>(q: Sql): Promise<T | undefined> {
    return (await this.query<T>(this.pool, q)).rows[0];
  }

  async run(q: Sql): Promise<number> {
    const r = await this.query(this.pool, q);
    this.localWrites += 1;
    return r.rowCount ?? 0;
  }

  async tx<T>(fn: (t: Db) => Promise<T>, opts: TxOptions = {}): Promise<T> {
    for (let attempt = 1; ; attempt += 1) {
      const client = await this.pool.connect().catch((err: unknown) => this.unavailable(err));
      let broken = false;
      let begun = false;
      try {
        await client.query('BEGIN');
        begun = true;
        const result = await fn(this.handle(client));
        await client.query('COMMIT');
        if (!opts.benign) this.localWrites += 1;
        return result;
      } catch (err) {
        // A pooled connection the server dropped while it sat idle fails at BEGIN, before anything ran: take another.
        if (!begun && pgUnreachable(err) && attempt < MAX_TX_ATTEMPTS) {
          broken = true;
          continue;
        }
        await client.query('ROLLBACK').catch(() => (broken = true));
        const code = (err as { code?: unknown }).code;
        if (typeof code === 'string' && RETRY_CODES.has(code) && attempt < MAX_TX_ATTEMPTS) {
          await new Promise((r) => setTimeout(r, Math.random() * 5 * attempt));
          continue;
        }
        if (pgUnreachable(err)) this.unavailable(err);
        throw err;
      } finally {
        client.release(broken);
      }
    }
  }

  changeStamp(): string {
    if (!this.listening) return `offline:${(this.offline += 1)}`;
    return `${this.epoch}:${this.notifications}:${this.localWrites}`;
  }

  /**
   * Returns once every process listening when the caller's commit landed has counted a notification sent after
   * it: our own listener receives the token, each other listener (replicas, workers, tools) answers it on
   * ACK_CHANNEL after counting it. Waiting for our own listener alone was not enough: PostgreSQL signals the
   * other listeners' backends at commit, but a busy machine may run such a backend only after this replica's
   * client has already sent its next request elsewhere. Only writes that must be seen at once (revocations,
   * deletions) call this, so the extra round trips are rare. Bounded by PUBLISH_WAIT_MS: a listener that is
   * gone or stuck delays the answer, it does not block it (a lost listener already makes every stamp new).
   */
  async publishChanges(): Promise<void> {
    if (!this.listening) return;
    const token = crypto.randomBytes(8).toString('hex');
    try {
      // The other listening sessions now: each must answer. One not counted (connecting meanwhile) starts a
      // new epoch when it is up, which empties its cache anyway.
      const others = await this.pool.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND application_name LIKE $1 AND pid <> $2`,
        [`${LISTENER_NAME} %`, (this.listener as (pg.Client & { processID?: number }) | null)?.processID ?? 0],
      );
      const seen = new Promise<void>((resolve) => {
        this.waiters.set(token, { acks: others.rows[0]?.n ?? 0, own: false, done: resolve });
        setTimeout(resolve, PUBLISH_WAIT_MS).unref();
      });
      await this.pool.query('SELECT pg_notify($1, $2)', [CHANNEL, token]);
      await seen;
    } catch (err) {
      if (pgUnreachable(err)) this.unavailable(err);
      throw err;
    } finally {
      this.waiters.delete(token);
    }
  }

  /** A notification on either channel, as the listener receives it. */
  private notified(n: pg.Notification): void {
    if (n.channel === ACK_CHANNEL) {
      const w = n.payload ? this.waiters.get(n.payload) : undefined;
      if (w) this.settle(w, -1);
      return;
    }
    this.notifications += 1;
    if (!n.payload) return;
    const own = this.waiters.get(n.payload);
    if (own) {
      own.own = true;
      this.settle(own, 0);
      return;
    }
    // Another process's publishChanges: counted above, so its caller may answer now.
    this.pool.query('SELECT pg_notify($1, $2)', [ACK_CHANNEL, n.payload]).catch((err: unknown) => this.log?.debug({ err }, 'change ack not sent'));
  }

  private settle(w: { acks: number; own: boolean; done: () => void }, delta: number): void {
    w.acks += delta;
    if (w.own && w.acks <= 0) w.done();
  }

  async close(): Promise<void> {
    this.closed = true;
    if (this.retryTimer) clearTimeout(this.retryTimer);
    await this.listener?.end().catch(() => {});
    this.listener = null;
    await this.pool.end().catch(() => {});
  }

  private handle(client: pg.PoolClient): Db {
    const h: Db = {
      dialect: 'postgres',
      all: async <T>(q: Sql) => (await this.query<T>(client, q)).rows,
      get: async <T>(q: Sql) => (await this.query<T>(client, q)).rows[0],
      run: async (q: Sql) => (await this.query(client, q)).rowCount ?? 0,
      tx: (fn) => fn(h),
    };
    return h;
  }

  private async query<T>(on: pg.Pool | pg.PoolClient, q: Sql): Promise<pg.QueryResult<T & pg.QueryResultRow>> {
    const { text, values } = q.compile('postgres');
    try {
      return await on.query<T & pg.QueryResultRow>(statement(text, values));
    } catch (err) {
      // Inside a transaction the caller decides (retry, rollback); a lone statement out of reach is a 503.
      if (on === this.pool && pgUnreachable(err)) this.unavailable(err);
      throw err;
    }
  }

  private unavailable(err: unknown): never {
    throw new Unavailable(`The state database is unavailable (${pgFailure(err)}); try again shortly`, 1);
  }

  private async listen(): Promise<void> {
    // The error callback can fire before connectPg returns (a server gone mid-handshake): it finds no client yet.
    let connected: pg.Client | null = null;
    const client = await connectPg(this.url, { applicationName: `${LISTENER_NAME} ${process.pid}`, queryTimeoutMs: 5000 }, () => {
      if (connected) this.lost(connected);
    });
    connected = client;
    client.on('end', () => this.lost(client));
    client.on('notification', (n) => this.notified(n));
    try {
      await client.query(`LISTEN ${CHANNEL}`);
      await client.query(`LISTEN ${ACK_CHANNEL}`);
    } catch (err) {
      connected = null;
      await client.end().catch(() => {});
      throw err;
    }
    this.listener = client;
    // Changes committed while no listener was connected were never counted: a new epoch empties every cache.
    this.epoch += 1;
    this.listening = true;
  }

  private lost(client: pg.Client): void {
    if (this.listener !== client) return;
    this.listener = null;
    this.listening = false;
    void client.end().catch(() => {});
    if (!this.closed) this.log?.warn('state database listener lost; cached keys are re-read until it is back');
    this.scheduleListen();
  }

  private scheduleListen(): void {
    if (this.closed || this.retryTimer) return;
    this.retryTimer = setTimeout(() => {
      this.retryTimer = null;
      this.listen().catch(() => this.scheduleListen());
    }, LISTEN_RETRY_MS);
    this.retryTimer.unref();
  }

  private async migrate(): Promise<void> {
    const client = await this.pool.connect().catch((err: unknown) => this.unavailable(err));
    try {
      await client.query('BEGIN');
      // Replicas starting together: one applies the migrations, the others wait here, then find them applied.
      await client.query('SELECT pg_advisory_xact_lock(7158310001)');
      await client.query('CREATE TABLE IF NOT EXISTS schema_migrations (id INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)');
      const applied = new Set((await client.query<{ id: number }>('SELECT id FROM schema_migrations')).rows.map((r) => r.id));
      for (const m of PG_MIGRATIONS) {
        if (applied.has(m.id)) continue;
        await client.query(m.sql);
        await client.query('INSERT INTO schema_migrations (id, name, applied_at) VALUES ($1, $2, $3)', [m.id, m.name, new Date().toISOString()]);
      }
      await client.query('COMMIT');
    } catch (err) {
      await client.query('ROLLBACK').catch(() => {});
      if (pgUnreachable(err)) this.unavailable(err);
      throw err;
    } finally {
      client.release();
    }
  }
}
