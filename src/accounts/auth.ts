import fs from 'node:fs';
import { createLocalJWKSet, jwtVerify, type JWTVerifyGetKey } from 'jose';
import type { StateStore } from '../state/store.js';
import type { Authenticator, Principal } from './principal.js';
import { activeSubscription, dashboardUser } from '../state/accounts.js';
import { planOf, PLANS } from './plans.js';
import type { UserRow } from '../state/store.js';

/** last_used_at is refreshed at most this often per key: it is informational, and each refresh is a write. */
const TOUCH_EVERY_MS = 60_000;

/** The plan in force at `at` and until when that answer holds without a write (a subscription's period end). */
async function planInForceUntil(store: StateStore, user: UserRow, at: Date): Promise<{ plan: string; until: number }> {
  return planFrom(user, planOf(user.plan).requires_subscription ? ((await activeSubscription(store, user.id, at)) ?? null) : null);
}

/** The plan a user's assigned plan and active subscription (if any) put in force, and until when. */
function planFrom(user: UserRow, sub: { tier: string; current_period_end: string } | null): { plan: string; until: number } {
  const plan = planOf(user.plan);
  if (!plan.requires_subscription) return { plan: plan.id, until: Number.POSITIVE_INFINITY };
  return sub ? { plan: planOf(sub.tier).id, until: Date.parse(sub.current_period_end) } : { plan: PLANS.free.id, until: Number.POSITIVE_INFINITY };
}

/**
 * The plan a principal carries: the plan in force now (a paid plan whose subscription lapsed counts as Free).
 * The meter re-checks inside its own transaction; this is for plan-aware answers and request limits.
 */
async function planInForce(store: StateStore, user: UserRow): Promise<string> {
  return (await planInForceUntil(store, user, new Date())).plan;
}

/**
 * Resolved keys are kept in process: three state reads and a SHA-256 per request were about a fifth of the
 * server's busy time under load (and would be three round trips to PostgreSQL). An entry is used only while
 * - the store's changeStamp is the one seen when the cache was filled. SQLite: any commit by another process
 *   (an operator's tool, another server on the same file) or any non-benign write of this one. PostgreSQL:
 *   any commit, by any replica or tool, that changes users, subscriptions or a key's owner, scopes, expiry or
 *   revocation (a trigger notifies every replica's listener at commit; the revoking replica answers only once
 *   every listening process has counted it, src/state/pg-db.ts publishChanges), or this replica's own writes; and never
 *   while the listener is disconnected. So a revoked or deleted key fails on the next request, on any replica;
 * - the clock is before its validUntil: the key's expiry or scheduled revocation, the end of the
 *   subscription its plan comes from, and at most CACHE_TTL_MS after it was read.
 * Only live keys are cached (a flood of wrong keys cannot fill it). Keyed by the plaintext: hashing it
 * first would cost the SHA-256 the cache saves, and the same bytes sit in every request's headers anyway.
 */
const CACHE_MAX = 10_000;
const CACHE_TTL_MS = 60_000;

type CachedKey = { principal: Principal; keyId: string; validUntil: number; touchedAt: number };

async function resolveKey(store: StateStore, key: string, at: Date): Promise<CachedKey | null> {
  const found = await store.findLiveKeyOwner(key, at);
  if (!found) return null;
  const { key: row, user, subscription } = found;
  const { plan, until } = planFrom(user, subscription);
  let validUntil = Math.min(at.getTime() + CACHE_TTL_MS, until);
  for (const end of [row.expires_at, row.scheduled_revoke_at]) if (end) validUntil = Math.min(validUntil, Date.parse(end));
  const scopes = row.scopes.split(',').filter((s): s is 'read' | 'download' => s === 'read' || s === 'download');
  return {
    // Frozen: one object is shared by every request of the key until the cache drops it.
    principal: Object.freeze({ userId: user.id, email: user.email, keyId: row.id, plan, scopes: Object.freeze(scopes), authMethod: 'api_key' as const }),
    keyId: row.id,
    validUntil,
    touchedAt: row.last_used_at ? Date.parse(row.last_used_at) : 0,
  };
}

/** X-API-Key against the hashed keys in the state store. */
export function keyAuthenticator(store: StateStore): Authenticator {
  const cache = new Map<string, CachedKey>();
  let stamp = '';
  return {
    async authenticate(creds) {
      const key = creds.apiKey;
      // Bound the work an attacker can cause: real keys are short.
      if (!key || key.length > 200) return null;
      const t = Date.now();
      // Read before any row: a commit landing after this is seen by the next request's stamp.
      const current = store.changeStamp();
      if (current !== stamp) {
        cache.clear();
        stamp = current;
      }
      let hit = cache.get(key);
      if (!hit || t >= hit.validUntil) {
        cache.delete(key);
        const fresh = await resolveKey(store, key, new Date(t));
        if (!fresh) return null;
        if (cache.size >= CACHE_MAX) cache.delete(cache.keys().next().value!);
        cache.set(key, fresh);
        hit = fresh;
      }
      if (t - hit.touchedAt >= TOUCH_EVERY_MS) {
        store.touchKey(hit.keyId, new Date(t).toISOString());
        hit.touchedAt = t;
      }
      return hit.principal;
    },
  };
}

/**
 * The legacy dashboard scheme: `Authorization: Bearer <JWT>`, verified with an HS256 secret or a JWKS file,
 * mapped to the user by its `email` claim (a first login creates a Free user). The token must carry `exp`; once
 * an account was deleted, tokens for its address must carry an `iat` after the deletion (state/accounts.ts
 * dashboardUser). A JWT has both scopes: it is the account owner at the dashboard.
 */
export function jwtAuthenticator(store: StateStore, opts: { secret?: string | undefined; jwksFile?: string | undefined }): Authenticator | null {
  let key: Uint8Array | JWTVerifyGetKey;
  let algorithms: string[];
  if (opts.jwksFile) {
    // Read once at start-up: a missing or malformed file stops the process, naming the file.
    key = createLocalJWKSet(JSON.parse(fs.readFileSync(opts.jwksFile, 'utf8')));
    algorithms = ['RS256', 'ES256', 'EdDSA', 'PS256', 'RS384', 'RS512', 'ES384'];
  } else if (opts.secret) {
    key = new TextEncoder().encode(opts.secret);
    algorithms = ['HS256'];
  } else {
    return null;
  }
  return {
    async authenticate(creds) {
      const header = creds.authorization ?? '';
      const m = /^Bearer\s+([A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*)$/.exec(header);
      if (!m || header.length > 8192) return null;
      let email: string;
      let issuedAtMs: number | null;
      try {
        const { payload } = await jwtVerify(m[1]!, key as Uint8Array, { algorithms, requiredClaims: ['exp'] });
        email = typeof payload.email === 'string' ? payload.email.trim() : '';
        // jose has checked that an iat present is a number.
        issuedAtMs = typeof payload.iat === 'number' ? payload.iat * 1000 : null;
      } catch {
        return null;
      }
      if (!email || email.length > 320 || !email.includes('@')) return null;
      // Outside the try: a state database out of reach is a 503 (Unavailable), not a bad token.
      const user = await dashboardUser(store, email, issuedAtMs);
      if (!user) return null;
      return { userId: user.id, email: user.email, keyId: null, plan: await planInForce(store, user), scopes: ['read', 'download'], authMethod: 'jwt' };
    },
  };
}

/** X-API-Key when sent (it wins over a bearer token, as in the anchor); otherwise the dashboard JWT if configured. */
export function accountAuthenticator(store: StateStore, jwt: { secret?: string | undefined; jwksFile?: string | undefined }): Authenticator {
  const keys = keyAuthenticator(store);
  const bearer = jwtAuthenticator(store, jwt);
  return {
    async authenticate(creds) {
      if (creds.apiKey) return keys.authenticate(creds);
      return bearer ? bearer.authenticate(creds) : null;
    },
  };
}
