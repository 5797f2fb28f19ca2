import { lockUser, type Db } from './db.js';
import { emailDigest } from './lifecycle.js';
import { list, sql } from './sql.js';
import { newId, now, type ApiKeyRow, type Scope, type StateStore, type UserRow } from './store.js';

/**
 * Keys and subscriptions: the account-side SQL, once for both backends (./db.ts). Every change that must be
 * atomic is one `tx()` call.
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
export async function listKeys(store: StateStore, userId: string): Promise<ApiKeyRow[]> {
  // last_used_at is buffered in memory (StateStore.touchKey): show this process's latest.
  await store.flushTouches().catch(() => {});
  return store.all<ApiKeyRow>(sql`SELECT * FROM api_keys WHERE user_id = ${userId} AND revoked_at IS NULL ORDER BY created_at DESC, id`);
}

export async function getKey(store: StateStore, userId: string, keyId: string): Promise<ApiKeyRow | undefined> {
  await store.flushTouches().catch(() => {});
  return keyOf(store, userId, keyId);
}

function keyOf(t: Db, userId: string, keyId: string): Promise<ApiKeyRow | undefined> {
  return t.get<ApiKeyRow>(sql`SELECT * FROM api_keys WHERE id = ${keyId} AND user_id = ${userId}`);
}

/**
 * Revokes a key of this user; returns the row as it is now, or undefined when the user has no such key. Returns
 * once every replica's key cache has let the key go (StateStore.publishChanges): its next request fails anywhere.
 */
export async function revokeKey(store: StateStore, userId: string, keyId: string, at: Date = new Date()): Promise<ApiKeyRow | undefined> {
  await store.flushTouches().catch(() => {});
  const row = await store.tx(async (t) => {
    const row = await keyOf(t, userId, keyId);
    if (!row) return undefined;
    if (!row.revoked_at) await t.run(sql`UPDATE api_keys SET revoked_at = ${at.toISOString()} WHERE id = ${keyId}`);
    return keyOf(t, userId, keyId);
  });
  await store.publishChanges();
  return row;
}

/**
 * Issues a new key with the old one's name and scopes and schedules the old key's revocation in 7 days, so
 * scripts can move over. One transaction: either both happen or neither.
 */
export async function rotateKey(
  store: StateStore,
  userId: string,
  keyId: string,
  prefix: string,
  at: Date = new Date(),
): Promise<{ row: ApiKeyRow; plaintext: string; old: ApiKeyRow } | undefined> {
  await store.flushTouches().catch(() => {});
  const rotated = await store.tx(async (t) => {
    const old = await keyOf(t, userId, keyId);
    if (!old || old.revoked_at) return undefined;
    if (old.expires_at && Date.parse(old.expires_at) <= at.getTime()) return undefined;
    const graceEnd = new Date(at.getTime() + ROTATION_GRACE_DAYS * DAY_MS).toISOString();
    const scheduled = old.scheduled_revoke_at && old.scheduled_revoke_at < graceEnd ? old.scheduled_revoke_at : graceEnd;
    await t.run(sql`UPDATE api_keys SET scheduled_revoke_at = ${scheduled} WHERE id = ${keyId}`);
    // The new key keeps the old key's lifetime length, if it had one.
    const lifetime = old.expires_at ? Date.parse(old.expires_at) - Date.parse(old.created_at) : null;
    const created = await store.createApiKey(
      {
        userId,
        name: old.name,
        prefix,
        scopes: old.scopes.split(',').filter((s): s is Scope => s === 'read' || s === 'download'),
        expiresAt: lifetime ? new Date(at.getTime() + lifetime).toISOString() : null,
      },
      t,
    );
    return { ...created, old: { ...old, scheduled_revoke_at: scheduled } };
  });
  await store.publishChanges();
  return rotated;
}

/** Names the dashboard gives the key it provisions at login; only these are rotated by a new login. */
export const PROVISIONED_KEY_NAMES = ['Default', 'Auto-provisioned'];

/**
 * The dashboard's login key: revokes the user's earlier auto-provisioned keys and issues a new one, in one
 * transaction. Keys the user named themselves are left alone.
 */
export async function provisionKey(
  store: StateStore,
  userId: string,
  name: string,
  prefix: string,
  at: Date = new Date(),
): Promise<{ row: ApiKeyRow; plaintext: string }> {
  const created = await store.tx(async (t) => {
    const names = [...new Set([...PROVISIONED_KEY_NAMES, name])];
    await t.run(sql`UPDATE api_keys SET revoked_at = ${at.toISOString()} WHERE user_id = ${userId} AND revoked_at IS NULL AND name IN (${list(names)})`);
    return store.createApiKey({ userId, name, prefix }, t);
  });
  await store.publishChanges();
  return created;
}

/**
 * The user a dashboard token names by its address, created on a first login (Free plan); null when the token
 * may not sign in. After an account is deleted its address is free, but a token issued up to the erasure
 * (`issuedAtMs` not after it, or unknown: a token without `iat`) is refused whether or not the address has
 * an account again: it must not bring the erased person back as a new user, nor sign in to the next account.
 * Only a token issued after the erasure — a sign-in at the dashboard since — creates a new account.
 * The user and the erasure are read in one statement (one snapshot): a deletion committing meanwhile is either
 * wholly seen (no user, its erasure) or not at all (the user still there, for this last request).
 */
export async function dashboardUser(store: StateStore, email: string, issuedAtMs: number | null): Promise<UserRow | null> {
  const address = email.trim().toLowerCase();
  const found = await store.get<Partial<UserRow> & { deleted_at: string | null; erased_at: string | null }>(
    sql`SELECT u.id, u.email, u.plan, u.created_at, u.deleted_at, e.erased_at
        FROM (SELECT 1 AS one) AS x
        LEFT JOIN users u ON u.email = ${address}
        LEFT JOIN account_erasures e ON e.email_hash = ${emailDigest(address)}`,
  );
  // Seconds (iat) against milliseconds: a token of the erasure's own second counts as issued before it.
  if (found?.erased_at && (issuedAtMs === null || issuedAtMs <= Date.parse(found.erased_at))) return null;
  if (found?.id) {
    // A pseudonymised (deleted) account signs in to nothing.
    if (found.deleted_at) return null;
    return { id: found.id, email: found.email!, plan: found.plan!, created_at: found.created_at! };
  }
  await store.run(sql`INSERT INTO users (id, email, plan, created_at) VALUES (${newId('usr')}, ${address}, 'free', ${now()}) ON CONFLICT (email) DO NOTHING`);
  // Created here, or by a concurrent first login of the same address (its insert won).
  return (await store.getUserByEmail(address)) ?? null;
}

// ---- subscriptions ----

/** The subscription that entitles the user at `at`: status active and the period not yet over. */
export function activeSubscription(t: Db, userId: string, at: Date = new Date()): Promise<SubscriptionRow | undefined> {
  return t.get<SubscriptionRow>(
    sql`SELECT * FROM subscriptions WHERE user_id = ${userId} AND status = 'active' AND current_period_end > ${at.toISOString()}
        ORDER BY current_period_end DESC LIMIT 1`,
  );
}

export function periodDays(billingPeriod: 'monthly' | 'annual'): number {
  return billingPeriod === 'annual' ? 365 : 30;
}

/**
 * Activates (or, when one is already active, extends) a subscription. Runs inside the caller's transaction:
 * the webhook and the redeem path both need it atomic with their money movement.
 */
export async function activateSubscriptionTx(
  t: Db,
  opts: { userId: string; tier: string; billingPeriod: 'monthly' | 'annual'; fundedBy: SubscriptionRow['funded_by']; at: Date },
): Promise<SubscriptionRow> {
  const days = periodDays(opts.billingPeriod);
  const existing = await activeSubscription(t, opts.userId, opts.at);
  if (existing) {
    // A second payment while active is never lost: it extends the current period.
    const end = new Date(Date.parse(existing.current_period_end) + days * DAY_MS).toISOString();
    await t.run(sql`UPDATE subscriptions SET current_period_end = ${end}, cancel_at_period_end = 0 WHERE id = ${existing.id}`);
  } else {
    const start = opts.at.toISOString();
    const end = new Date(opts.at.getTime() + days * DAY_MS).toISOString();
    await t.run(
      sql`INSERT INTO subscriptions (id, user_id, tier, billing_period, status, funded_by, current_period_start,
            current_period_end, cancel_at_period_end, created_at)
          VALUES (${newId('sub')}, ${opts.userId}, ${opts.tier}, ${opts.billingPeriod}, 'active', ${opts.fundedBy}, ${start}, ${end}, 0, ${now()})`,
    );
  }
  await t.run(sql`UPDATE users SET plan = ${opts.tier} WHERE id = ${opts.userId}`);
  return (await activeSubscription(t, opts.userId, opts.at))!;
}

/** Cancel at period end: entitlement runs until current_period_end. Undefined when nothing is active. */
export function cancelSubscription(store: Db, userId: string, at: Date = new Date()): Promise<SubscriptionRow | undefined> {
  return store.tx(async (t) => {
    await lockUser(t, userId);
    const sub = await activeSubscription(t, userId, at);
    if (!sub) return undefined;
    await t.run(sql`UPDATE subscriptions SET cancel_at_period_end = 1, canceled_at = ${at.toISOString()} WHERE id = ${sub.id}`);
    return activeSubscription(t, userId, at);
  });
}

/** Test and operator helper: ends a subscription now (as if its period had run out). */
export async function expireSubscriptions(store: Db, userId: string, at: Date = new Date()): Promise<void> {
  await store.run(
    sql`UPDATE subscriptions SET current_period_end = ${at.toISOString()} WHERE user_id = ${userId} AND current_period_end > ${at.toISOString()}`,
  );
}
