import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import Database from 'better-sqlite3';
import { MIGRATIONS } from './migrations.js';

/**
 * The service's durable state (users, keys, and what the accounts, downloads and exports modules add) in one
 * embedded SQLite file under PMLAKE_STATE. WAL + synchronous=FULL: a committed transaction survives kill -9.
 * better-sqlite3 is synchronous, so a transaction body runs without interleaving other requests — money and
 * quota changes are single `transaction()` calls, never read-modify-write across awaits.
 *
 * Everything the rest of the service needs goes through methods on this class (SQL stays here), so a
 * PostgreSQL implementation of the same methods can follow for several replicas.
 */
export type Plan = 'free' | 'professional';
export type Scope = 'read' | 'download';

export type UserRow = { id: string; email: string; plan: Plan; created_at: string };
export type ApiKeyRow = {
  id: string;
  user_id: string;
  name: string;
  key_prefix: string;
  key_hash: string;
  scopes: string;
  created_at: string;
  last_used_at: string | null;
  expires_at: string | null;
  revoked_at: string | null;
  /** Set when the key was rotated: it keeps working until then (a grace window for the caller's scripts). */
  scheduled_revoke_at?: string | null;
};

/** SQLite's wal-index header: two copies of 48 bytes at the start of the -shm file; iVersion 3007000. */
const WAL_INDEX_HEADER_BYTES = 48;
const WAL_INDEX_VERSION = 3007000;

/** last_used_at updates are buffered this long and written in one transaction (see touchKey). */
const TOUCH_FLUSH_MS = 2000;

export class StateStore {
  readonly db: Database.Database;
  private readonly closeHooks: (() => void)[] = [];
  private readonly dataVersionStmt: Database.Statement;
  private readonly totalChangesStmt: Database.Statement;
  /** Row changes this connection made through benignWrite: subtracted from total_changes() in changeStamp. */
  private benignChanges = 0;
  private dataVersion = -1;
  /** Read-only descriptor of the -shm file, or null when it could not be opened (see walIndexMoved). */
  private shmFd: number | null = null;
  private readonly shmHeader = Buffer.alloc(WAL_INDEX_HEADER_BYTES);
  /** The header as it was when data_version was last read; zeros until then, so the first look reads it. */
  private readonly shmSeen = Buffer.alloc(WAL_INDEX_HEADER_BYTES);
  private pendingTouches = new Map<string, string>();
  private touchTimer: NodeJS.Timeout | null = null;

  constructor(file: string) {
    fs.mkdirSync(path.dirname(file), { recursive: true });
    this.db = new Database(file);
    // busy_timeout first: switching to WAL needs the lock too, and a CLI opening the store while the server
    // writes must wait for it rather than fail at once.
    this.db.pragma('busy_timeout = 5000');
    this.db.pragma('journal_mode = WAL');
    this.db.pragma('synchronous = FULL');
    this.db.pragma('foreign_keys = ON');
    this.migrate();
    // Compiled before memoizePrepare and kept private: they are put in raw/pluck mode, which shared
    // memoized statements must never be.
    // Two statements, not one: `SELECT ... FROM pragma_data_version` cost three times PRAGMA's ~1 µs, and
    // total_changes() alone reads no page (~0.1 µs).
    this.dataVersionStmt = this.db.prepare('PRAGMA data_version').pluck();
    this.totalChangesStmt = this.db.prepare('SELECT total_changes()').pluck();
    // The -shm file exists while this connection is open in WAL mode (migrate() has read through it), and
    // SQLite removes it only when the last connection closes — never while this one is open.
    try {
      this.shmFd = fs.openSync(`${file}-shm`, 'r');
    } catch {
      this.shmFd = null;
    }
    memoizePrepare(this.db);
  }

  static open(stateDir: string): StateStore {
    return new StateStore(path.join(stateDir, 'pmlake.sqlite'));
  }

  close(): void {
    // Hooks flush what modules batch in memory (request counters) before the file closes.
    for (const hook of this.closeHooks.splice(0)) hook();
    this.flushTouches();
    if (this.touchTimer) clearTimeout(this.touchTimer);
    if (this.shmFd !== null) fs.closeSync(this.shmFd);
    this.shmFd = null;
    this.db.close();
  }

  /**
   * A value that changes whenever a change that may matter to a cached read was committed: by another
   * connection, in this process or another one (SQLite's `data_version`, which moves on every commit of any
   * other connection; read only when the WAL-index header moved, see walIndexMoved), or by this one
   * (`total_changes()`, minus the row changes made through benignWrite). A few microseconds: cheap enough to
   * check on every request, so a revocation is seen by the very next one.
   */
  changeStamp(): string {
    if (this.walIndexMoved()) this.dataVersion = this.dataVersionStmt.get() as number;
    const changes = this.totalChangesStmt.get() as number;
    return `${this.dataVersion}:${changes - this.benignChanges}`;
  }

  /**
   * Whether any connection may have committed since the last look, from the WAL-index header (the first 48
   * bytes of the -shm file, which every commit rewrites — mxFrame, checksums, salts — after its frames are in
   * the WAL). `PRAGMA data_version` opens a read transaction: four file-lock syscalls and an fstat, measured
   * at ~20 µs a call in the server under load, against ~5 µs for this pread of the header; data_version is
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

  /**
   * Runs a synchronous write that cannot change who a key belongs to or what it may do (request counters,
   * last_used_at), so it does not move changeStamp and does not empty the caches keyed on it. Anything not
   * run through here counts as a change: forgetting to mark a write costs a cache refill, never a stale answer.
   */
  benignWrite<T>(fn: () => T): T {
    const before = this.totalChangesStmt.get() as number;
    try {
      return fn();
    } finally {
      this.benignChanges += (this.totalChangesStmt.get() as number) - before;
    }
  }

  /**
   * A benignWrite of batched, informational data (request counters, last_used_at), committed without the
   * fsync: synchronous=NORMAL for this write only. In WAL mode that is still atomic and survives kill -9 (the
   * frames are in the OS); only a power loss can drop it. The fsync ran on the event loop and, with the disk
   * busy, stalled every request in flight every two seconds — the tail of the latency under load.
   */
  writeBehind<T>(fn: () => T): T {
    // The setting cannot change inside a transaction; nested in one, the outer commit decides.
    if (this.db.inTransaction) return this.benignWrite(fn);
    this.db.pragma('synchronous = NORMAL');
    try {
      return this.benignWrite(fn);
    } finally {
      this.db.pragma('synchronous = FULL');
    }
  }

  /** Runs fn just before the store closes (in registration order). */
  onClose(fn: () => void): void {
    this.closeHooks.push(fn);
  }

  private migrate(): void {
    this.db.exec('CREATE TABLE IF NOT EXISTS schema_migrations (id INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)');
    const applied = new Set(
      (this.db.prepare('SELECT id FROM schema_migrations').all() as { id: number }[]).map((r) => r.id),
    );
    for (const m of MIGRATIONS) {
      if (applied.has(m.id)) continue;
      this.db.transaction(() => {
        this.db.exec(m.sql);
        this.db.prepare('INSERT INTO schema_migrations (id, name, applied_at) VALUES (?, ?, ?)').run(m.id, m.name, now());
      }).immediate();
    }
  }

  // ---- users ----

  /**
   * Creates or updates a user with an operator-assigned plan. Assigning a paid plan this way (the `keys create`
   * CLI, test helpers) grants a one-year subscription funded by 'grant', so the paid plan is entitled exactly
   * like a bought one; assigning 'free' ends any grant. Bought subscriptions are left alone.
   */
  upsertUser(email: string, plan: Plan): UserRow {
    const normalized = email.trim().toLowerCase();
    // IMMEDIATE: it reads then writes; a deferred transaction would fail with SQLITE_BUSY instead of waiting
    // when another process commits between the read and the write.
    return this.db.transaction(() => {
      const at = now();
      let row = this.db.prepare('SELECT * FROM users WHERE email = ?').get(normalized) as UserRow | undefined;
      if (row) {
        if (row.plan !== plan) this.db.prepare('UPDATE users SET plan = ? WHERE id = ?').run(plan, row.id);
        row = { ...row, plan };
      } else {
        row = { id: newId('usr'), email: normalized, plan, created_at: at };
        this.db.prepare('INSERT INTO users (id, email, plan, created_at) VALUES (@id, @email, @plan, @created_at)').run(row);
      }
      if (plan === 'free') {
        this.db
          .prepare(
            `UPDATE subscriptions SET status = 'canceled', canceled_at = @at, current_period_end = @at
             WHERE user_id = @user AND funded_by = 'grant' AND current_period_end > @at`,
          )
          .run({ user: row.id, at });
      } else {
        const active = this.db
          .prepare(`SELECT id FROM subscriptions WHERE user_id = ? AND status = 'active' AND current_period_end > ?`)
          .get(row.id, at);
        if (!active) {
          this.db
            .prepare(
              `INSERT INTO subscriptions (id, user_id, tier, billing_period, status, funded_by, current_period_start,
                 current_period_end, cancel_at_period_end, created_at)
               VALUES (@id, @user, @tier, 'annual', 'active', 'grant', @at, @end, 0, @at)`,
            )
            .run({ id: newId('sub'), user: row.id, tier: plan, at, end: new Date(Date.parse(at) + 365 * 86_400_000).toISOString() });
        }
      }
      return row;
    }).immediate();
  }

  getUser(id: string): UserRow | undefined {
    return this.db.prepare('SELECT * FROM users WHERE id = ?').get(id) as UserRow | undefined;
  }

  getUserByEmail(email: string): UserRow | undefined {
    return this.db.prepare('SELECT * FROM users WHERE email = ?').get(email.trim().toLowerCase()) as UserRow | undefined;
  }

  // ---- API keys ----

  /** Creates a key; the plaintext is returned once and only its SHA-256 is stored. */
  createApiKey(opts: {
    userId: string;
    name: string;
    prefix: string;
    scopes?: Scope[];
    expiresAt?: string | null;
  }): { row: ApiKeyRow; plaintext: string } {
    const plaintext = `${opts.prefix}${crypto.randomBytes(16).toString('hex')}`;
    const row: ApiKeyRow = {
      id: newId('key'),
      user_id: opts.userId,
      name: opts.name,
      // The shown prefix is the service prefix plus 4 characters: enough to recognise a key, useless to guess it.
      key_prefix: plaintext.slice(0, opts.prefix.length + 4),
      key_hash: hashKey(plaintext),
      scopes: (opts.scopes ?? ['read', 'download']).join(','),
      created_at: now(),
      last_used_at: null,
      expires_at: opts.expiresAt ?? null,
      revoked_at: null,
    };
    this.db
      .prepare(
        `INSERT INTO api_keys (id, user_id, name, key_prefix, key_hash, scopes, created_at, last_used_at, expires_at, revoked_at)
         VALUES (@id, @user_id, @name, @key_prefix, @key_hash, @scopes, @created_at, @last_used_at, @expires_at, @revoked_at)`,
      )
      .run(row);
    return { row, plaintext };
  }

  /**
   * Finds the live key for a plaintext. Lookup is by the SHA-256 digest (an index probe that reveals nothing
   * about the plaintext's characters); the digests are then compared in constant time.
   */
  findLiveKey(plaintext: string, at: Date = new Date()): ApiKeyRow | undefined {
    const digest = hashKey(plaintext);
    const row = this.db.prepare('SELECT * FROM api_keys WHERE key_hash = ?').get(digest) as ApiKeyRow | undefined;
    if (!row) return undefined;
    const a = Buffer.from(row.key_hash, 'hex');
    const b = Buffer.from(digest, 'hex');
    if (a.length !== b.length || !crypto.timingSafeEqual(a, b)) return undefined;
    if (row.revoked_at) return undefined;
    if (row.expires_at && Date.parse(row.expires_at) <= at.getTime()) return undefined;
    // A rotated key's grace window is enforced here, at request time, not by a sweeper.
    if (row.scheduled_revoke_at && Date.parse(row.scheduled_revoke_at) <= at.getTime()) return undefined;
    const touched = this.pendingTouches.get(row.id);
    return touched ? { ...row, last_used_at: touched } : row;
  }

  /**
   * Records that a key was used. The UPDATE is buffered and written with the others every TOUCH_FLUSH_MS in
   * one transaction: one synchronous=FULL commit (an fsync, blocking the event loop) per first use of a key
   * showed as the largest single cost under load. Readers of api_keys in this process call flushTouches
   * first; a kill -9 loses at most the last interval of last_used_at, which is informational only.
   */
  touchKey(id: string, at: string = now()): void {
    this.pendingTouches.set(id, at);
    this.scheduleTouchFlush();
  }

  private scheduleTouchFlush(): void {
    if (this.touchTimer) return;
    this.touchTimer = setTimeout(() => this.flushTouches(), TOUCH_FLUSH_MS);
    this.touchTimer.unref();
  }

  /** Writes the buffered last_used_at values now. */
  flushTouches(): void {
    if (this.touchTimer) clearTimeout(this.touchTimer);
    this.touchTimer = null;
    if (this.pendingTouches.size === 0) return;
    const batch = this.pendingTouches;
    this.pendingTouches = new Map();
    const stmt = this.db.prepare('UPDATE api_keys SET last_used_at = ? WHERE id = ?');
    try {
      this.writeBehind(() =>
        this.db.transaction(() => {
          for (const [id, at] of batch) stmt.run(at, id);
        })(),
      );
    } catch {
      // Busy past busy_timeout (another process holding the write lock): keep the values for the next
      // attempt rather than throw from a timer; newer touches recorded meanwhile win.
      for (const [id, at] of batch) if (!this.pendingTouches.has(id)) this.pendingTouches.set(id, at);
      if (this.db.open) this.scheduleTouchFlush();
    }
  }
}

/**
 * Every `db.prepare(sql)` returns one compiled statement per SQL text. Auth and the meter run several
 * statements on every request, and compiling them each time cost more than running them (profiled under
 * load). Reuse is safe here: statements are run synchronously to completion and no caller changes a
 * statement's mode (pluck/raw/expand).
 */
function memoizePrepare(db: Database.Database): void {
  const compile = db.prepare.bind(db);
  const compiled = new Map<string, Database.Statement>();
  db.prepare = ((sql: string) => {
    let stmt = compiled.get(sql);
    if (!stmt) {
      stmt = compile(sql);
      compiled.set(sql, stmt);
    }
    return stmt;
  }) as Database.Database['prepare'];
}

export function hashKey(plaintext: string): string {
  return crypto.createHash('sha256').update(plaintext, 'utf8').digest('hex');
}

export function newId(prefix: string): string {
  return `${prefix}_${crypto.randomBytes(12).toString('hex')}`;
}

export function now(): string {
  return new Date().toISOString();
}
