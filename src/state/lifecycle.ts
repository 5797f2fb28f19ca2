import { newId, type StateStore } from './store.js';

/**
 * The account lifecycle's SQL (migration 300): the append-only privacy-event log, deletion requests (only the
 * token's SHA-256 is stored) and the deletion itself. Each change is one IMMEDIATE transaction, like the money
 * code in billing.ts: a confirm that races a cancel, or two confirms, see one winner.
 */

export type PrivacyEventRow = {
  seq: number;
  id: string;
  user_id: string;
  event: string;
  metadata: string;
  ip_hash: string | null;
  user_agent: string | null;
  created_at: string;
};

export type DeletionRequestRow = {
  id: string;
  user_id: string;
  token_hash: string;
  reason: string | null;
  status: 'pending' | 'confirmed' | 'cancelled' | 'superseded';
  created_at: string;
  expires_at: string;
  resolved_at: string | null;
};

/** Where a privacy-relevant request came from: the SHA-256 of the caller's IP (never the IP) and its user agent. */
export type Origin = { ipHash: string | null; userAgent: string | null };

export type PrivacyEvent = { userId: string; event: string; metadata: Record<string, unknown>; origin: Origin; at: Date };

/** Appends one event inside the caller's transaction. */
export function appendPrivacyEventTx(store: StateStore, e: PrivacyEvent): void {
  store.db
    .prepare(
      `INSERT INTO privacy_events (id, user_id, event, metadata, ip_hash, user_agent, created_at)
       VALUES (?, ?, ?, ?, ?, ?, ?)`,
    )
    .run(newId('pev'), e.userId, e.event, JSON.stringify(e.metadata), e.origin.ipHash, e.origin.userAgent, e.at.toISOString());
}

/** The user's events, newest first. */
export function listPrivacyEvents(store: StateStore, userId: string, limit: number, offset: number): PrivacyEventRow[] {
  return store.db
    .prepare('SELECT * FROM privacy_events WHERE user_id = ? ORDER BY seq DESC LIMIT ? OFFSET ?')
    .all(userId, limit, offset) as PrivacyEventRow[];
}

/** Every row the state store holds about a user, table by table (raw; the core picks what is shown). */
export type UserRecords = {
  user: Record<string, unknown> | undefined;
  api_keys: Record<string, unknown>[];
  subscriptions: Record<string, unknown>[];
  credit_account: Record<string, unknown> | undefined;
  ledger: Record<string, unknown>[];
  checkouts: Record<string, unknown>[];
  orders: Record<string, unknown>[];
  order_items: Record<string, unknown>[];
  pulls: Record<string, unknown>[];
  export_jobs: Record<string, unknown>[];
  usage_daily: Record<string, unknown>[];
  privacy_events: PrivacyEventRow[];
  deletion_requests: DeletionRequestRow[];
};

function readRecords(store: StateStore, userId: string): UserRecords {
  const all = (sql: string) => store.db.prepare(sql).all(userId) as Record<string, unknown>[];
  return {
    user: store.db.prepare('SELECT * FROM users WHERE id = ?').get(userId) as Record<string, unknown> | undefined,
    api_keys: all('SELECT * FROM api_keys WHERE user_id = ? ORDER BY created_at, id'),
    subscriptions: all('SELECT * FROM subscriptions WHERE user_id = ? ORDER BY created_at, id'),
    credit_account: store.db.prepare('SELECT * FROM credit_accounts WHERE user_id = ?').get(userId) as Record<string, unknown> | undefined,
    ledger: all('SELECT * FROM ledger WHERE user_id = ? ORDER BY seq'),
    checkouts: all('SELECT * FROM checkouts WHERE user_id = ? ORDER BY created_at, id'),
    orders: all('SELECT * FROM orders WHERE user_id = ? ORDER BY created_at, id'),
    order_items: all(
      'SELECT i.* FROM order_items i JOIN orders o ON o.id = i.order_id WHERE o.user_id = ? ORDER BY o.created_at, o.id, i.position',
    ),
    pulls: all('SELECT * FROM pulls WHERE user_id = ? ORDER BY created_at, id'),
    export_jobs: all('SELECT * FROM export_jobs WHERE user_id = ? ORDER BY created_at, id'),
    usage_daily: all('SELECT * FROM usage_daily WHERE user_id = ? ORDER BY day, key_id'),
    privacy_events: all('SELECT * FROM privacy_events WHERE user_id = ? ORDER BY seq') as PrivacyEventRow[],
    deletion_requests: all('SELECT * FROM account_deletion_requests WHERE user_id = ? ORDER BY created_at, id') as DeletionRequestRow[],
  };
}

/**
 * Logs the export and reads the records in one IMMEDIATE transaction: the export is one consistent snapshot
 * and includes its own event.
 */
export function exportUserRecords(store: StateStore, userId: string, origin: Origin, at: Date): UserRecords {
  store.flushTouches();
  return store.db
    .transaction(() => {
      appendPrivacyEventTx(store, { userId, event: 'data_export_requested', metadata: {}, origin, at });
      return readRecords(store, userId);
    })
    .immediate();
}

/** Opens a deletion request; an earlier pending one is superseded (only the newest token works). */
export function openDeletionRequest(
  store: StateStore,
  r: { userId: string; tokenHash: string; reason: string | null; expiresAt: Date; origin: Origin; at: Date },
): DeletionRequestRow {
  return store.db
    .transaction(() => {
      const at = r.at.toISOString();
      const superseded = store.db
        .prepare(`UPDATE account_deletion_requests SET status = 'superseded', resolved_at = ? WHERE user_id = ? AND status = 'pending'`)
        .run(at, r.userId).changes;
      const row: DeletionRequestRow = {
        id: newId('del'),
        user_id: r.userId,
        token_hash: r.tokenHash,
        reason: r.reason,
        status: 'pending',
        created_at: at,
        expires_at: r.expiresAt.toISOString(),
        resolved_at: null,
      };
      store.db
        .prepare(
          `INSERT INTO account_deletion_requests (id, user_id, token_hash, reason, status, created_at, expires_at, resolved_at)
           VALUES (@id, @user_id, @token_hash, @reason, @status, @created_at, @expires_at, @resolved_at)`,
        )
        .run(row);
      appendPrivacyEventTx(store, {
        userId: r.userId,
        event: 'account_deletion_requested',
        metadata: { request_id: row.id, expires_at: row.expires_at, superseded_requests: superseded },
        origin: r.origin,
        at: r.at,
      });
      return row;
    })
    .immediate();
}

/** Why a token was refused, or the pending request it names. */
export type TokenLookup = { outcome: 'unknown' } | { outcome: 'expired' | 'used'; row: DeletionRequestRow } | { outcome: 'pending'; row: DeletionRequestRow };

function lookupTx(store: StateStore, tokenHash: string, at: Date): TokenLookup {
  const row = store.db.prepare('SELECT * FROM account_deletion_requests WHERE token_hash = ?').get(tokenHash) as DeletionRequestRow | undefined;
  if (!row) return { outcome: 'unknown' };
  if (row.status !== 'pending') return { outcome: 'used', row };
  if (Date.parse(row.expires_at) <= at.getTime()) return { outcome: 'expired', row };
  return { outcome: 'pending', row };
}

/** Cancels the pending request the token names. */
export function cancelDeletionRequest(store: StateStore, tokenHash: string, origin: Origin, at: Date): TokenLookup {
  return store.db
    .transaction((): TokenLookup => {
      const found = lookupTx(store, tokenHash, at);
      if (found.outcome !== 'pending') return found;
      store.db.prepare(`UPDATE account_deletion_requests SET status = 'cancelled', resolved_at = ? WHERE id = ?`).run(at.toISOString(), found.row.id);
      appendPrivacyEventTx(store, { userId: found.row.user_id, event: 'account_deletion_cancelled', metadata: { request_id: found.row.id }, origin, at });
      return { outcome: 'pending', row: { ...found.row, status: 'cancelled', resolved_at: at.toISOString() } };
    })
    .immediate();
}

export type DeletionSummary = { keys_revoked: number; downloads_erased: number; usage_days_erased: number; export_jobs_erased: number };

/**
 * Executes the deletion the token names, all or nothing:
 * - every API key revoked at once (and its user-chosen name erased); being an ordinary write it moves
 *   StateStore.changeStamp, so the key cache empties and each key fails on the very next request;
 * - personal data erased: the email pseudonymised (`deleted+<user id>@deleted.invalid`: the row stays, because
 *   the money records point at it), download history, request counters and export jobs deleted, checkout return
 *   URLs blanked, the privacy log's IP hashes and user agents cleared;
 * - kept, because billing records must be: the credit account and its append-only ledger (amounts, dates),
 *   orders and their items, subscriptions (any active one ends now), checkouts' amounts and dates.
 */
export function confirmDeletion(store: StateStore, tokenHash: string, at: Date): TokenLookup & { summary?: DeletionSummary } {
  store.flushTouches();
  return store.db
    .transaction((): TokenLookup & { summary?: DeletionSummary } => {
      const found = lookupTx(store, tokenHash, at);
      if (found.outcome !== 'pending') return found;
      const userId = found.row.user_id;
      const iso = at.toISOString();
      const run = (sql: string, ...params: unknown[]) => store.db.prepare(sql).run(...params).changes;
      const keys = run(`UPDATE api_keys SET revoked_at = ? WHERE user_id = ? AND revoked_at IS NULL`, iso, userId);
      run(`UPDATE api_keys SET name = 'deleted' WHERE user_id = ?`, userId);
      run(`UPDATE users SET email = ?, plan = 'free', deleted_at = ? WHERE id = ?`, `deleted+${userId}@deleted.invalid`, iso, userId);
      run(
        `UPDATE subscriptions SET status = 'canceled', canceled_at = COALESCE(canceled_at, @at), current_period_end = @at
         WHERE user_id = @user AND status = 'active' AND current_period_end > @at`,
        { at: iso, user: userId },
      );
      run(`UPDATE checkouts SET success_url = '', cancel_url = '', status = CASE status WHEN 'open' THEN 'canceled' ELSE status END WHERE user_id = ?`, userId);
      const downloads = run('DELETE FROM pulls WHERE user_id = ?', userId);
      const usage = run('DELETE FROM usage_daily WHERE user_id = ?', userId);
      // A running job is left to finish (its worker owns the row); its file is market data, not personal data.
      const jobs = run(`DELETE FROM export_jobs WHERE user_id = ? AND status != 'running'`, userId);
      run('UPDATE privacy_events SET ip_hash = NULL, user_agent = NULL WHERE user_id = ?', userId);
      run(`UPDATE account_deletion_requests SET status = 'confirmed', resolved_at = ? WHERE id = ?`, iso, found.row.id);
      run(`UPDATE account_deletion_requests SET reason = NULL WHERE user_id = ?`, userId);
      const summary = { keys_revoked: keys, downloads_erased: downloads, usage_days_erased: usage, export_jobs_erased: jobs };
      // The deletion's own record keeps no origin: it is logged after the erasure, about a pseudonymous user.
      const none = { ipHash: null, userAgent: null };
      appendPrivacyEventTx(store, { userId, event: 'api_keys_revoked', metadata: { reason: 'account_deletion', count: keys }, origin: none, at });
      appendPrivacyEventTx(store, { userId, event: 'account_deletion_confirmed', metadata: { request_id: found.row.id, ...summary }, origin: none, at });
      return { outcome: 'pending', row: { ...found.row, status: 'confirmed', resolved_at: iso, reason: null }, summary };
    })
    .immediate();
}
