import crypto from 'node:crypto';
import path from 'node:path';
import type { Logger } from '../log.js';
import type { Db, DbBackend, TxOptions } from './db.js';
import { PgDb } from './pg-db.js';
import { join, sql, type Sql } from './sql.js';
import { SqliteDb } from './sqlite-db.js';

/**
 * The service's durable state (users, keys, and what the accounts, downloads and exports modules add) behind
 * one async interface (./db.ts) with two backends: the embedded SQLite file under PMLAKE_STATE (the default)
 * or PostgreSQL shared by every replica and worker (PMLAKE_DATABASE_URL). A StateStore is itself a `Db`, so
 * every state function takes either the store or a transaction's handle. Money and quota changes are single
 * `tx()` calls that lock the rows they decide on first (`lockUser`), never read-modify-write across calls.
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

/** last_used_at updates are buffered this long and written in one transaction (see touchKey). */
const TOUCH_FLUSH_MS = 2000;
/** Keys per last_used_at statement. */
const TOUCH_BATCH = 500;

export class StateStore implements Db {
  readonly dialect: Db['dialect'];
  private readonly closeHooks: (() => Promise<void>)[] = [];
  private pendingTouches = new Map<string, string>();
  private touchTimer: NodeJS.Timeout | null = null;
  private closed = false;

  constructor(readonly backend: DbBackend) {
    this.dialect = backend.dialect;
  }

  /** The embedded store: `pmlake.sqlite` in the state directory (created and migrated on open). */
  static open(stateDir: string): StateStore {
    return new StateStore(new SqliteDb(path.join(stateDir, 'pmlake.sqlite')));
  }

  /** PostgreSQL when a URL is given (migrated on connect, one replica at a time), else the embedded file. */
  static async connect(opts: { stateDir: string; databaseUrl?: string | undefined; log?: Logger; role?: string }): Promise<StateStore> {
    if (!opts.databaseUrl) return StateStore.open(opts.stateDir);
    const db = await PgDb.connect(opts.databaseUrl, { log: opts.log, applicationName: `pmlake ${opts.role ?? 'process'} pid ${process.pid}` });
    return new StateStore(db);
  }

  all<T>(q: Sql): Promise<T[]> {
    return this.backend.all<T>(q);
  }

  get<T>(q: Sql): Promise<T | undefined> {
    return this.backend.get<T>(q);
  }

  run(q: Sql): Promise<number> {
    return this.backend.run(q);
  }

  tx<T>(fn: (t: Db) => Promise<T>, opts?: TxOptions): Promise<T> {
    return this.backend.tx(fn, opts);
  }

  /** See DbBackend.changeStamp: moves whenever a committed change may matter to a cached principal. */
  changeStamp(): string {
    return this.backend.changeStamp();
  }

  /** See DbBackend.publishChanges: every replica's change stamp has moved past this process's commits. */
  publishChanges(): Promise<void> {
    return this.backend.publishChanges();
  }

  get isClosed(): boolean {
    return this.closed;
  }

  async close(): Promise<void> {
    if (this.closed) return;
    // Hooks flush what modules batch in memory (request counters) before the database closes.
    for (const hook of this.closeHooks.splice(0)) await hook().catch(() => {});
    await this.flushTouches().catch(() => {});
    if (this.touchTimer) clearTimeout(this.touchTimer);
    this.closed = true;
    await this.backend.close();
  }

  /** Runs fn just before the store closes (in registration order). */
  onClose(fn: () => Promise<void>): void {
    this.closeHooks.push(fn);
  }

  // ---- users ----

  /**
   * Creates or updates a user with an operator-assigned plan. Assigning a paid plan this way (the `keys create`
   * CLI, test helpers) grants a one-year subscription funded by 'grant', so the paid plan is entitled exactly
   * like a bought one; assigning 'free' ends any grant. Bought subscriptions are left alone.
   */
  upsertUser(email: string, plan: Plan): Promise<UserRow> {
    const normalized = email.trim().toLowerCase();
    return this.tx(async (t) => {
      const at = now();
      let row = await t.get<UserRow>(sql`SELECT * FROM users WHERE email = ${normalized}`);
      if (row) {
        if (row.plan !== plan) await t.run(sql`UPDATE users SET plan = ${plan} WHERE id = ${row.id}`);
        row = { ...row, plan };
      } else {
        row = { id: newId('usr'), email: normalized, plan, created_at: at };
        // Two processes creating one user at once: the second's insert conflicts and its transaction re-runs
        // (PostgreSQL) or waits for the write lock (SQLite); either way it then finds the row above.
        await t.run(sql`INSERT INTO users (id, email, plan, created_at) VALUES (${row.id}, ${row.email}, ${plan}, ${at})`);
      }
      if (plan === 'free') {
        await t.run(
          sql`UPDATE subscriptions SET status = 'canceled', canceled_at = ${at}, current_period_end = ${at}
              WHERE user_id = ${row.id} AND funded_by = 'grant' AND current_period_end > ${at}`,
        );
      } else {
        const active = await t.get(sql`SELECT id FROM subscriptions WHERE user_id = ${row.id} AND status = 'active' AND current_period_end > ${at}`);
        if (!active) {
          const end = new Date(Date.parse(at) + 365 * 86_400_000).toISOString();
          await t.run(
            sql`INSERT INTO subscriptions (id, user_id, tier, billing_period, status, funded_by, current_period_start,
                  current_period_end, cancel_at_period_end, created_at)
                VALUES (${newId('sub')}, ${row.id}, ${plan}, 'annual', 'active', 'grant', ${at}, ${end}, 0, ${at})`,
          );
        }
      }
      return row;
    });
  }

  getUser(id: string): Promise<UserRow | undefined> {
    return this.get<UserRow>(sql`SELECT * FROM users WHERE id = ${id}`);
  }

  getUserByEmail(email: string): Promise<UserRow | undefined> {
    return this.get<UserRow>(sql`SELECT * FROM users WHERE email = ${email.trim().toLowerCase()}`);
  }

  // ---- API keys ----

  /** Creates a key (in the caller's transaction when given one); the plaintext is returned once, only its SHA-256 is stored. */
  async createApiKey(
    opts: { userId: string; name: string; prefix: string; scopes?: Scope[]; expiresAt?: string | null },
    t: Db = this,
  ): Promise<{ row: ApiKeyRow; plaintext: string }> {
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
    await t.run(
      sql`INSERT INTO api_keys (id, user_id, name, key_prefix, key_hash, scopes, created_at, last_used_at, expires_at, revoked_at)
          VALUES (${row.id}, ${row.user_id}, ${row.name}, ${row.key_prefix}, ${row.key_hash}, ${row.scopes}, ${row.created_at},
                  ${null}, ${row.expires_at}, ${null})`,
    );
    return { row, plaintext };
  }

  /**
   * Finds the live key for a plaintext. Lookup is by the SHA-256 digest (an index probe that reveals nothing
   * about the plaintext's characters); the digests are then compared in constant time.
   */
  async findLiveKey(plaintext: string, at: Date = new Date()): Promise<ApiKeyRow | undefined> {
    return (await this.findLiveKeyOwner(plaintext, at))?.key;
  }

  /**
   * The live key for a plaintext with its user and the subscription active at `at` (tier and period end), in one
   * statement: an authentication that misses the key cache costs one round trip, not three.
   */
  async findLiveKeyOwner(
    plaintext: string,
    at: Date = new Date(),
  ): Promise<{ key: ApiKeyRow; user: UserRow; subscription: { tier: string; current_period_end: string } | null } | undefined> {
    const digest = hashKey(plaintext);
    const iso = at.toISOString();
    const active = sql`FROM subscriptions s WHERE s.user_id = u.id AND s.status = 'active' AND s.current_period_end > ${iso}
                       ORDER BY s.current_period_end DESC LIMIT 1`;
    const row = await this.get<
      ApiKeyRow & { owner_email: string; owner_plan: Plan; owner_created_at: string; sub_tier: string | null; sub_end: string | null }
    >(
      sql`SELECT k.*, u.email AS owner_email, u.plan AS owner_plan, u.created_at AS owner_created_at,
                 (SELECT s.tier ${active}) AS sub_tier, (SELECT s.current_period_end ${active}) AS sub_end
          FROM api_keys k JOIN users u ON u.id = k.user_id WHERE k.key_hash = ${digest}`,
    );
    if (!row) return undefined;
    const { owner_email, owner_plan, owner_created_at, sub_tier, sub_end, ...keyRow } = row;
    const key = this.liveKey(keyRow, digest, at);
    if (!key) return undefined;
    return {
      key,
      user: { id: key.user_id, email: owner_email, plan: owner_plan, created_at: owner_created_at },
      subscription: sub_tier !== null && sub_end !== null ? { tier: sub_tier, current_period_end: sub_end } : null,
    };
  }

  /** The row if it is the digest's and live at `at` (not revoked, expired or past a rotation's grace window). */
  private liveKey(row: ApiKeyRow, digest: string, at: Date): ApiKeyRow | undefined {
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
   * one benign transaction: one durable commit per first use of a key showed as the largest single cost under
   * load. Readers of api_keys in this process call flushTouches first; a kill -9 loses at most the last
   * interval of last_used_at, which is informational only.
   */
  touchKey(id: string, at: string = now()): void {
    this.pendingTouches.set(id, at);
    this.scheduleTouchFlush();
  }

  private scheduleTouchFlush(): void {
    if (this.touchTimer || this.closed) return;
    this.touchTimer = setTimeout(() => void this.flushTouches().catch(() => {}), TOUCH_FLUSH_MS);
    this.touchTimer.unref();
  }

  /** Writes the buffered last_used_at values now. */
  async flushTouches(): Promise<void> {
    if (this.touchTimer) clearTimeout(this.touchTimer);
    this.touchTimer = null;
    if (this.pendingTouches.size === 0 || this.closed) return;
    const batch = this.pendingTouches;
    this.pendingTouches = new Map();
    try {
      await this.tx(
        async (t) => {
          // One statement per TOUCH_BATCH keys (UPDATE … FROM, in both dialects), not a round trip per key.
          const touches = [...batch];
          for (let i = 0; i < touches.length; i += TOUCH_BATCH) {
            // A UNION of typed one-row SELECTs: SQLite cannot name a VALUES list's columns.
            const rows = touches.slice(i, i + TOUCH_BATCH).map(([id, at]) => sql`SELECT CAST(${id} AS TEXT) AS id, CAST(${at} AS TEXT) AS at`);
            await t.run(sql`UPDATE api_keys SET last_used_at = v.at FROM (${join(rows, ' UNION ALL ')}) AS v WHERE api_keys.id = v.id`);
          }
        },
        { benign: true },
      );
    } catch (err) {
      // Busy (another process holding the write lock) or the database away: keep the values for the next
      // attempt rather than throw from a timer; newer touches recorded meanwhile win.
      for (const [id, at] of batch) if (!this.pendingTouches.has(id)) this.pendingTouches.set(id, at);
      this.scheduleTouchFlush();
      throw err;
    }
  }
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
