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

export class StateStore {
  readonly db: Database.Database;
  private readonly closeHooks: (() => void)[] = [];

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
    memoizePrepare(this.db);
  }

  static open(stateDir: string): StateStore {
    return new StateStore(path.join(stateDir, 'pmlake.sqlite'));
  }

  close(): void {
    // Hooks flush what modules batch in memory (request counters) before the file closes.
    for (const hook of this.closeHooks.splice(0)) hook();
    this.db.close();
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
    return row;
  }

  touchKey(id: string): void {
    this.db.prepare('UPDATE api_keys SET last_used_at = ? WHERE id = ?').run(now(), id);
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
