import { newId, now, type ApiKeyRow, type Scope, type StateStore, type UserRow } from './store.js';

/**
 * Keys and subscriptions: the account-side SQL, as functions over the store (a PostgreSQL implementation
 * replaces this file). Every change that must be atomic is one `transaction()` call.
 */

export type SubscriptionRow = {
  id: string;
  user_id: string;
  tier: string;
  billing_period: 'monthly' | 'annual';
  status: 'active' | 'canceled';
  funded_by: 'card' | 'credits' | 'grant';
  current_period_start: string;
  current_period_end: string;
  cancel_at_period_end: number;
  created_at: string;
  canceled_at: string | null;
};

export const ROTATION_GRACE_DAYS = 7;
const DAY_MS = 86_400_000;

/** Keys a user can still see: not revoked (expired and rotated keys stay listed until revoked). */
export function listKeys(store: StateStore, userId: string): ApiKeyRow[] {
  // last_used_at is buffered in memory (StateStore.touchKey): show this process's latest.
  store.flushTouches();
  return store.db
    .prepare('SELECT * FROM api_keys WHERE user_id = ? AND revoked_at IS NULL ORDER BY created_at DESC, id')
    .all(userId) as ApiKeyRow[];
}

export function getKey(store: StateStore, userId: string, keyId: string): ApiKeyRow | undefined {
  store.flushTouches();
  return store.db.prepare('SELECT * FROM api_keys WHERE id = ? AND user_id = ?').get(keyId, userId) as ApiKeyRow | undefined;
}

/** Revokes a key of this user; returns the row as it is now, or undefined when the user has no such key. */
export function revokeKey(store: StateStore, userId: string, keyId: string, at: Date = new Date()): ApiKeyRow | undefined {
  return store.db.transaction(() => {
    const row = getKey(store, userId, keyId);
    if (!row) return undefined;
    if (!row.revoked_at) store.db.prepare('UPDATE api_keys SET revoked_at = ? WHERE id = ?').run(at.toISOString(), keyId);
    return getKey(store, userId, keyId);
  })();
}

/**
 * Issues a new key with the old one's name and scopes and schedules the old key's revocation in 7 days, so
 * scripts can move over. One transaction: either both happen or neither.
 */
export function rotateKey(
  store: StateStore,
  userId: string,
  keyId: string,
  prefix: string,
  at: Date = new Date(),
): { row: ApiKeyRow; plaintext: string; old: ApiKeyRow } | undefined {
  return store.db.transaction(() => {
    const old = getKey(store, userId, keyId);
    if (!old || old.revoked_at) return undefined;
    if (old.expires_at && Date.parse(old.expires_at) <= at.getTime()) return undefined;
    const graceEnd = new Date(at.getTime() + ROTATION_GRACE_DAYS * DAY_MS).toISOString();
    const scheduled = old.scheduled_revoke_at && old.scheduled_revoke_at < graceEnd ? old.scheduled_revoke_at : graceEnd;
    store.db.prepare('UPDATE api_keys SET scheduled_revoke_at = ? WHERE id = ?').run(scheduled, keyId);
    // The new key keeps the old key's lifetime length, if it had one.
    const lifetime = old.expires_at ? Date.parse(old.expires_at) - Date.parse(old.created_at) : null;
    const created = store.createApiKey({
      userId,
      name: old.name,
      prefix,
      scopes: old.scopes.split(',').filter((s): s is Scope => s === 'read' || s === 'download'),
      expiresAt: lifetime ? new Date(at.getTime() + lifetime).toISOString() : null,
    });
    return { ...created, old: { ...old, scheduled_revoke_at: scheduled } };
  })();
}

/** Names the dashboard gives the key it provisions at login; only these are rotated by a new login. */
export const PROVISIONED_KEY_NAMES = ['Default', 'Auto-provisioned'];

/**
 * The dashboard's login key: revokes the user's earlier auto-provisioned keys and issues a new one, in one
 * transaction. Keys the user named themselves are left alone.
 */
export function provisionKey(store: StateStore, userId: string, name: string, prefix: string, at: Date = new Date()): { row: ApiKeyRow; plaintext: string } {
  return store.db.transaction(() => {
    const names = [...new Set([...PROVISIONED_KEY_NAMES, name])];
    store.db
      .prepare(`UPDATE api_keys SET revoked_at = ? WHERE user_id = ? AND revoked_at IS NULL AND name IN (${names.map(() => '?').join(', ')})`)
      .run(at.toISOString(), userId, ...names);
    return store.createApiKey({ userId, name, prefix });
  })();
}

/** Creates (or finds) the user a dashboard JWT names; a first login gets the Free plan. */
export function userForEmail(store: StateStore, email: string): UserRow {
  return store.getUserByEmail(email) ?? store.upsertUser(email, 'free');
}

// ---- subscriptions ----

/** The subscription that entitles the user at `at`: status active and the period not yet over. */
export function activeSubscription(store: StateStore, userId: string, at: Date = new Date()): SubscriptionRow | undefined {
  return store.db
    .prepare(
      `SELECT * FROM subscriptions WHERE user_id = ? AND status = 'active' AND current_period_end > ?
       ORDER BY current_period_end DESC LIMIT 1`,
    )
    .get(userId, at.toISOString()) as SubscriptionRow | undefined;
}

export function periodDays(billingPeriod: 'monthly' | 'annual'): number {
  return billingPeriod === 'annual' ? 365 : 30;
}

/**
 * Activates (or, when one is already active, extends) a subscription. Runs inside the caller's transaction:
 * the webhook and the redeem path both need it atomic with their money movement.
 */
export function activateSubscriptionTx(
  store: StateStore,
  opts: { userId: string; tier: string; billingPeriod: 'monthly' | 'annual'; fundedBy: SubscriptionRow['funded_by']; at: Date },
): SubscriptionRow {
  const days = periodDays(opts.billingPeriod);
  const existing = activeSubscription(store, opts.userId, opts.at);
  if (existing) {
    // A second payment while active is never lost: it extends the current period.
    const end = new Date(Date.parse(existing.current_period_end) + days * DAY_MS).toISOString();
    store.db.prepare('UPDATE subscriptions SET current_period_end = ?, cancel_at_period_end = 0 WHERE id = ?').run(end, existing.id);
  } else {
    const id = newId('sub');
    const start = opts.at.toISOString();
    store.db
      .prepare(
        `INSERT INTO subscriptions (id, user_id, tier, billing_period, status, funded_by, current_period_start,
           current_period_end, cancel_at_period_end, created_at)
         VALUES (?, ?, ?, ?, 'active', ?, ?, ?, 0, ?)`,
      )
      .run(id, opts.userId, opts.tier, opts.billingPeriod, opts.fundedBy, start, new Date(opts.at.getTime() + days * DAY_MS).toISOString(), now());
  }
  store.db.prepare('UPDATE users SET plan = ? WHERE id = ?').run(opts.tier, opts.userId);
  return activeSubscription(store, opts.userId, opts.at)!;
}

/** Cancel at period end: entitlement runs until current_period_end. Undefined when nothing is active. */
export function cancelSubscription(store: StateStore, userId: string, at: Date = new Date()): SubscriptionRow | undefined {
  return store.db.transaction(() => {
    const sub = activeSubscription(store, userId, at);
    if (!sub) return undefined;
    store.db.prepare('UPDATE subscriptions SET cancel_at_period_end = 1, canceled_at = ? WHERE id = ?').run(at.toISOString(), sub.id);
    return activeSubscription(store, userId, at);
  })();
}

/** Test and operator helper: ends a subscription now (as if its period had run out). */
export function expireSubscriptions(store: StateStore, userId: string, at: Date = new Date()): void {
  store.db
    .prepare(`UPDATE subscriptions SET current_period_end = ? WHERE user_id = ? AND current_period_end > ?`)
    .run(at.toISOString(), userId, at.toISOString());
}
