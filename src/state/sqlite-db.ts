import fs from 'node:fs';
import path from 'node:path';
import Database from 'better-sqlite3';
import { Unavailable } from '../errors.js';
import type { Db, DbBackend, TxOptions } from './db.js';
import { SQLITE_MIGRATIONS } from './migrations.js';
import type { Sql } from './sql.js';

/**
 * The embedded backend: one SQLite file under PMLAKE_STATE (WAL, synchronous=FULL: a committed transaction
 * survives kill -9). better-sqlite3 runs each statement synchronously; the interface is async so PostgreSQL can
 * stand behind it too. Because a transaction body now awaits between its statements, other requests' statements
 * could otherwise land on this one connection in the middle of it: a transaction takes the connection for
 * itself (BEGIN IMMEDIATE — also the file's write lock against other processes) and every statement outside it
 * waits until it ends. Statements outside a transaction run at once when none is open (the common case).
 */

/** SQLite's wal-index header: two copies of 48 bytes at the start of the -shm file; iVersion 3007000. */
const WAL_INDEX_HEADER_BYTES = 48;
const WAL_INDEX_VERSION = 3007000;
/** How long a transaction waits for another process's write lock before the request is answered 503. */
const BEGIN_WAIT_MS = 10_000;

export class SqliteDb implements DbBackend {
  readonly dialect = 'sqlite' as const;
  readonly raw: Database.Database;
  /** Settles when the open transaction ends; null when none is open. */
  private active: Promise<void> | null = null;
  private readonly statements = new Map<string, Database.Statement>();
  private readonly dataVersionStmt: Database.Statement;
  private readonly totalChangesStmt: Database.Statement;
  /** Row changes made in benign transactions: subtracted from total_changes() in changeStamp. */
  private benignChanges = 0;
  private dataVersion = -1;
  /** Read-only descriptor of the -shm file, or null when it could not be opened (see walIndexMoved). */
  private shmFd: number | null = null;
  private readonly shmHeader = Buffer.alloc(WAL_INDEX_HEADER_BYTES);
  /** The header as it was when data_version was last read; zeros until then, so the first look reads it. */
  private readonly shmSeen = Buffer.alloc(WAL_INDEX_HEADER_BYTES);

  constructor(file: string) {
    fs.mkdirSync(path.dirname(file), { recursive: true });
    this.raw = new Database(file);
    // busy_timeout first: switching to WAL needs the lock too, and a CLI opening the store while the server
    // writes must wait for it rather than fail at once.
    this.raw.pragma('busy_timeout = 5000');
    this.raw.pragma('journal_mode = WAL');
    this.raw.pragma('synchronous = FULL');
    this.raw.pragma('foreign_keys = ON');
    this.migrate();
    // Two statements, not one: `SELECT ... FROM pragma_data_version` costs several times the PRAGMA, and
    // total_changes() alone reads no page. Kept apart from the shared statements: they are plucked.
    this.dataVersionStmt = this.raw.prepare('PRAGMA data_version').pluck();
    this.totalChangesStmt = this.raw.prepare('SELECT total_changes()').pluck();
    // The -shm file exists while this connection is open in WAL mode (migrate() has read through it), and
    // SQLite removes it only when the last connection closes — never while this one is open.
    try {
      this.shmFd = fs.openSync(`${file}-shm`, 'r');
    } catch {
      this.shmFd = null;
    }
  }

  async all<T>(q: Sql): Promise<T[]> {
    while (this.active) await this.active;
    return this.allNow<T>(q);
  }

  async get<T>(q: Sql): Promise<T | undefined> {
    while (this.active) await this.active;
    return this.getNow<T>(q);
  }

  /** A write on its own is a transaction of its own: it takes the write lock the same non-blocking way. */
  run(q: Sql): Promise<number> {
    return this.tx(async (t) => t.run(q));
  }

  async tx<T>(fn: (t: Db) => Promise<T>, opts: TxOptions = {}): Promise<T> {
    while (this.active) await this.active; // no await between this check and taking the connection below
    let release!: () => void;
    this.active = new Promise<void>((resolve) => (release = resolve));
    const before = opts.benign ? (this.totalChangesStmt.get() as number) : 0;
    // Informational writes skip the fsync: it ran on the event loop and stalled every request in flight.
    if (opts.benign) this.raw.pragma('synchronous = NORMAL');
    try {
      await this.begin();
      const result = await fn(this.handle);
      this.raw.exec('COMMIT');
      return result;
    } catch (err) {
      if (this.raw.inTransaction) this.raw.exec('ROLLBACK');
      throw err;
    } finally {
      if (opts.benign) {
        this.raw.pragma('synchronous = FULL');
        this.benignChanges += (this.totalChangesStmt.get() as number) - before;
      }
      this.active = null;
      release();
    }
  }

  /**
   * BEGIN IMMEDIATE — the transactions read then write; a deferred one would fail with SQLITE_BUSY instead of
   * waiting when another process commits between the read and the write. While another connection holds the
   * write lock this waits without blocking the event loop (busy_timeout would: every request of this process
   * would stall behind another process's transaction, and two stores of one process would deadlock), up to
   * BEGIN_WAIT_MS, then answers 503.
   */
  private async begin(): Promise<void> {
    const deadline = Date.now() + BEGIN_WAIT_MS;
    for (let pause = 1; ; pause = Math.min(pause * 2, 50)) {
      this.raw.pragma('busy_timeout = 0');
      try {
        this.raw.exec('BEGIN IMMEDIATE');
        return;
      } catch (err) {
        if ((err as { code?: string }).code !== 'SQLITE_BUSY') throw err;
        if (Date.now() >= deadline) throw new Unavailable('The state database is busy; try again shortly', 1);
      } finally {
        this.raw.pragma('busy_timeout = 5000');
      }
      await new Promise((r) => setTimeout(r, pause));
    }
  }

  /**
   * Moves on every commit of any other connection, in this process or another (SQLite's `data_version`, read
   * only when the WAL-index header moved, see walIndexMoved), and on this connection's non-benign writes
   * (`total_changes()` minus the benign ones). A few microseconds.
   */
  changeStamp(): string {
    if (this.walIndexMoved()) this.dataVersion = this.dataVersionStmt.get() as number;
    const changes = this.totalChangesStmt.get() as number;
    return `${this.dataVersion}:${changes - this.benignChanges}`;
  }

  /** Every process reads the same file: a commit is in the others' change stamp as soon as it returns. */
  async publishChanges(): Promise<void> {}

  async close(): Promise<void> {
    await this.idle();
    if (this.shmFd !== null) fs.closeSync(this.shmFd);
    this.shmFd = null;
    if (this.raw.open) this.raw.close();
  }

  get open(): boolean {
    return this.raw.open;
  }

  /** The handle a transaction body gets: statements run on the connection it holds, without waiting. */
  private readonly handle: Db = {
    dialect: 'sqlite',
    all: async <T>(q: Sql) => this.allNow<T>(q),
    get: async <T>(q: Sql) => this.getNow<T>(q),
    run: async (q: Sql) => this.runNow(q),
    tx: (fn) => fn(this.handle),
  };

  private async idle(): Promise<void> {
    while (this.active) await this.active;
  }

  private allNow<T>(q: Sql): T[] {
    const { text, values } = q.compile('sqlite');
    return this.prepare(text).all(...values) as T[];
  }

  private getNow<T>(q: Sql): T | undefined {
    const { text, values } = q.compile('sqlite');
    return this.prepare(text).get(...values) as T | undefined;
  }

  private runNow(q: Sql): number {
    const { text, values } = q.compile('sqlite');
    return this.prepare(text).run(...values).changes;
  }

  /**
   * One compiled statement per SQL text: auth and the meter run several statements on every request, and
   * compiling them each time cost more than running them (profiled under load).
   */
  private prepare(text: string): Database.Statement {
    let stmt = this.statements.get(text);
    if (!stmt) {
      stmt = this.raw.prepare(text);
      this.statements.set(text, stmt);
    }
    return stmt;
  }

  private migrate(): void {
    this.raw.exec('CREATE TABLE IF NOT EXISTS schema_migrations (id INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)');
    const applied = new Set((this.raw.prepare('SELECT id FROM schema_migrations').all() as { id: number }[]).map((r) => r.id));
    for (const m of SQLITE_MIGRATIONS) {
      if (applied.has(m.id)) continue;
      this.raw
        .transaction(() => {
          this.raw.exec(m.sql);
          this.raw.prepare('INSERT INTO schema_migrations (id, name, applied_at) VALUES (?, ?, ?)').run(m.id, m.name, new Date().toISOString());
        })
        .immediate();
    }
  }

  /**
   * Whether any connection may have committed since the last look, from the WAL-index header (the first 48
   * bytes of the -shm file, which every commit rewrites — mxFrame, checksums, salts — after its frames are in
   * the WAL). `PRAGMA data_version` opens a read transaction: four file-lock syscalls and an fstat, against
   * one pread of the header here; data_version is
   * asked only after the header moved. A torn read looks moved (a needless data_version). Anything unexpected — no
   * -shm, another header version — answers "moved", so the check falls back to data_version every time.
   */
  private walIndexMoved(): boolean {
    if (this.shmFd === null) return true;
    try {
      if (fs.readSync(this.shmFd, this.shmHeader, 0, WAL_INDEX_HEADER_BYTES, 0) !== WAL_INDEX_HEADER_BYTES) return true;
    } catch {
      return true;
    }
    // iVersion, in the host's byte order: the wal-index format SQLite has used since 3.7.0.
    if (this.shmHeader.readUInt32LE(0) !== WAL_INDEX_VERSION && this.shmHeader.readUInt32BE(0) !== WAL_INDEX_VERSION) return true;
    if (this.shmHeader.equals(this.shmSeen)) return false;
    this.shmHeader.copy(this.shmSeen);
    return true;
  }
}
