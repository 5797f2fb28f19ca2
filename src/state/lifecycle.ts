import crypto from 'node:crypto';
import type { Db } from './db.js';
import { sql } from './sql.js';
import { newId, type StateStore } from './store.js';

/**
 * The account lifecycle's SQL (migration 300): the append-only privacy-event log, deletion requests (only the
 * token's SHA-256 is stored) and the deletion itself. Each change is one transaction, like the money
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

/**
 * How an erased address is remembered (migration 500): its SHA-256, never the address. A dashboard token names
 * its user by address alone, so without this a token issued before the deletion would sign the erased person
 * up again as a new user (src/state/accounts.ts dashboardUser).
 */
export function emailDigest(email: string): string {
  return crypto.createHash('sha256').update(email.trim().toLowerCase(), 'utf8').digest('hex');
}

/** Appends one event inside the caller's transaction. */
export async function appendPrivacyEventTx(t: Db, e: PrivacyEvent): Promise<void> {
  await t.run(
    sql`INSERT INTO privacy_events (id, user_id, event, metadata, ip_hash, user_agent, created_at)
        VALUES (${newId('pev')}, ${e.userId}, ${e.event}, ${JSON.stringify(e.metadata)}, ${e.origin.ipHash}, ${e.origin.userAgent}, ${e.at.toISOString()})`,
  );
}

/** The user's events, newest first. */
export function listPrivacyEvents(t: Db, userId: string, limit: number, offset: number): Promise<PrivacyEventRow[]> {
  return t.all<PrivacyEventRow>(sql`SELECT * FROM privacy_events WHERE user_id = ${userId} ORDER BY seq DESC LIMIT ${limit} OFFSET ${offset}`);
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

async function readRecords(t: Db, userId: string): Promise<UserRecords> {
  const all = (q: ReturnType<typeof sql>) => t.all<Record<string, unknown>>(q);
  return {
    user: await t.get<Record<string, unknown>>(sql`SELECT * FROM users WHERE id = ${userId}`),
    api_keys: await all(sql`SELECT * FROM api_keys WHERE user_id = ${userId} ORDER BY created_at, id`),
    subscriptions: await all(sql`SELECT * FROM subscriptions WHERE user_id = ${userId} ORDER BY created_at, id`),
    credit_account: await t.get<Record<string, unknown>>(sql`SELECT * FROM credit_accounts WHERE user_id = ${userId}`),
    ledger: await all(sql`SELECT * FROM ledger WHERE user_id = ${userId} ORDER BY seq`),
    checkouts: await all(sql`SELECT * FROM checkouts WHERE user_id = ${userId} ORDER BY created_at, id`),
    orders: await all(sql`SELECT * FROM orders WHERE user_id = ${userId} ORDER BY created_at, id`),
    order_items: await all(
      sql`SELECT i.* FROM order_items i JOIN orders o ON o.id = i.order_id WHERE o.user_id = ${userId} ORDER BY o.created_at, o.id, i.position`,
    ),
    pulls: await all(sql`SELECT * FROM pulls WHERE user_id = ${userId} ORDER BY created_at, id`),
    export_jobs: await all(sql`SELECT * FROM export_jobs WHERE user_id = ${userId} ORDER BY created_at, id`),
    usage_daily: await all(sql`SELECT * FROM usage_daily WHERE user_id = ${userId} ORDER BY day, key_id`),
    privacy_events: (await all(sql`SELECT * FROM privacy_events WHERE user_id = ${userId} ORDER BY seq`)) as PrivacyEventRow[],
    deletion_requests: (await all(sql`SELECT * FROM account_deletion_requests WHERE user_id = ${userId} ORDER BY created_at, id`)) as DeletionRequestRow[],
  };
}

/**
 * Logs the export and reads the records in one transaction: the export is one consistent snapshot and
 * includes its own event.
 */
export async function exportUserRecords(store: StateStore, userId: string, origin: Origin, at: Date): Promise<UserRecords> {
  await store.flushTouches().catch(() => {});
  return store.tx(async (t) => {
    await appendPrivacyEventTx(t, { userId, event: 'data_export_requested', metadata: {}, origin, at });
    return readRecords(t, userId);
  });
}

/** Opens a deletion request; an earlier pending one is superseded (only the newest token works). */
export function openDeletionRequest(
  store: Db,
  r: { userId: string; tokenHash: string; reason: string | null; expiresAt: Date; origin: Origin; at: Date },
): Promise<DeletionRequestRow> {
  return store.tx(async (t) => {
    const at = r.at.toISOString();
    const superseded = await t.run(
      sql`UPDATE account_deletion_requests SET status = 'superseded', resolved_at = ${at} WHERE user_id = ${r.userId} AND status = 'pending'`,
    );
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
    await t.run(
      sql`INSERT INTO account_deletion_requests (id, user_id, token_hash, reason, status, created_at, expires_at, resolved_at)
          VALUES (${row.id}, ${row.user_id}, ${row.token_hash}, ${row.reason}, ${row.status}, ${row.created_at}, ${row.expires_at}, ${null})`,
    );
    await appendPrivacyEventTx(t, {
      userId: r.userId,
      event: 'account_deletion_requested',
      metadata: { request_id: row.id, expires_at: row.expires_at, superseded_requests: superseded },
      origin: r.origin,
      at: r.at,
    });
    return row;
  });
}

/** Why a token was refused, or the pending request it names. */
export type TokenLookup = { outcome: 'unknown' } | { outcome: 'expired' | 'used'; row: DeletionRequestRow } | { outcome: 'pending'; row: DeletionRequestRow };

async function lookupTx(t: Db, tokenHash: string, at: Date): Promise<TokenLookup> {
  const row = await t.get<DeletionRequestRow>(sql`SELECT * FROM account_deletion_requests WHERE token_hash = ${tokenHash}`);
  if (!row) return { outcome: 'unknown' };
  if (row.status !== 'pending') return { outcome: 'used', row };
  if (Date.parse(row.expires_at) <= at.getTime()) return { outcome: 'expired', row };
  return { outcome: 'pending', row };
}

/** Cancels the pending request the token names. */
export function cancelDeletionRequest(store: Db, tokenHash: string, origin: Origin, at: Date): Promise<TokenLookup> {
  return store.tx(async (t): Promise<TokenLookup> => {
    const found = await lookupTx(t, tokenHash, at);
    if (found.outcome !== 'pending') return found;
    await t.run(sql`UPDATE account_deletion_requests SET status = 'cancelled', resolved_at = ${at.toISOString()} WHERE id = ${found.row.id}`);
    await appendPrivacyEventTx(t, { userId: found.row.user_id, event: 'account_deletion_cancelled', metadata: { request_id: found.row.id }, origin, at });
    return { outcome: 'pending', row: { ...found.row, status: 'cancelled', resolved_at: at.toISOString() } };
  });
}

export type DeletionSummary = { keys_revoked: number; downloads_erased: number; usage_days_erased: number; export_jobs_erased: number };

/**
 * Executes the deletion the token names, all or nothing:
 * - every API key revoked at once (and its user-chosen name erased); being an ordinary write it moves
 *   StateStore.changeStamp on every replica, so the key caches empty and each key fails on the very next request;
 * - personal data erased: the email pseudonymised (`deleted+<user id>@deleted.invalid`: the row stays, because
 *   the money records point at it), download history, request counters and export jobs deleted (a running one
 *   too: its worker sees the job gone and discards what it built), checkout return URLs blanked, the privacy
 *   log's IP hashes and user agents cleared;
 * - remembered: when the address was erased (by its SHA-256: dashboard tokens issued until then are refused),
 *   and that the account's export files are to be removed from the export store (export_purges: the export
 *   service does it after the commit, and its sweep retries until it is done);
 * - kept, because billing records must be: the credit account and its append-only ledger (amounts, dates),
 *   orders and their items, subscriptions (any active one ends now), checkouts' amounts and dates.
 */
export async function confirmDeletion(store: StateStore, tokenHash: string, at: Date): Promise<TokenLookup & { summary?: DeletionSummary }> {
  await store.flushTouches().catch(() => {});
  const result = await store.tx(async (t): Promise<TokenLookup & { summary?: DeletionSummary }> => {
    const found = await lookupTx(t, tokenHash, at);
    if (found.outcome !== 'pending') return found;
    const userId = found.row.user_id;
    const iso = at.toISOString();
    const user = await t.get<{ email: string }>(sql`SELECT email FROM users WHERE id = ${userId}`);
    if (user) {
      await t.run(
        sql`INSERT INTO account_erasures (email_hash, erased_at) VALUES (${emailDigest(user.email)}, ${iso})
            ON CONFLICT (email_hash) DO UPDATE SET erased_at = excluded.erased_at`,
      );
    }
    await t.run(sql`INSERT INTO export_purges (user_id, requested_at) VALUES (${userId}, ${iso}) ON CONFLICT (user_id) DO NOTHING`);
    const keys = await t.run(sql`UPDATE api_keys SET revoked_at = ${iso} WHERE user_id = ${userId} AND revoked_at IS NULL`);
    await t.run(sql`UPDATE api_keys SET name = 'deleted' WHERE user_id = ${userId}`);
    await t.run(sql`UPDATE users SET email = ${`deleted+${userId}@deleted.invalid`}, plan = 'free', deleted_at = ${iso} WHERE id = ${userId}`);
    await t.run(
      sql`UPDATE subscriptions SET status = 'canceled', canceled_at = COALESCE(canceled_at, ${iso}), current_period_end = ${iso}
          WHERE user_id = ${userId} AND status = 'active' AND current_period_end > ${iso}`,
    );
    await t.run(
      sql`UPDATE checkouts SET success_url = '', cancel_url = '', status = CASE status WHEN 'open' THEN 'canceled' ELSE status END WHERE user_id = ${userId}`,
    );
    const downloads = await t.run(sql`DELETE FROM pulls WHERE user_id = ${userId}`);
    const usage = await t.run(sql`DELETE FROM usage_daily WHERE user_id = ${userId}`);
    const jobs = await t.run(sql`DELETE FROM export_jobs WHERE user_id = ${userId}`);
    await t.run(sql`UPDATE privacy_events SET ip_hash = NULL, user_agent = NULL WHERE user_id = ${userId}`);
    await t.run(sql`UPDATE account_deletion_requests SET status = 'confirmed', resolved_at = ${iso} WHERE id = ${found.row.id}`);
    await t.run(sql`UPDATE account_deletion_requests SET reason = NULL WHERE user_id = ${userId}`);
    const summary = { keys_revoked: keys, downloads_erased: downloads, usage_days_erased: usage, export_jobs_erased: jobs };
    // The deletion's own record keeps no origin: it is logged after the erasure, about a pseudonymous user.
    const none = { ipHash: null, userAgent: null };
    await appendPrivacyEventTx(t, { userId, event: 'api_keys_revoked', metadata: { reason: 'account_deletion', count: keys }, origin: none, at });
    await appendPrivacyEventTx(t, { userId, event: 'account_deletion_confirmed', metadata: { request_id: found.row.id, ...summary }, origin: none, at });
    return { outcome: 'pending', row: { ...found.row, status: 'confirmed', resolved_at: iso, reason: null }, summary };
  });
  if (result.summary) await store.publishChanges();
  return result;
}
