import fs from 'node:fs';
import type { Request } from 'express';
import { createLocalJWKSet, jwtVerify, type JWTVerifyGetKey } from 'jose';
import type { StateStore } from '../state/store.js';
import { activeSubscription, userForEmail } from '../state/accounts.js';
import { planOf, PLANS } from '../accounts/plans.js';
import type { UserRow } from '../state/store.js';

/** Who is calling. Attached to `req.principal` by the auth middleware for every keyed route. */
export type Principal = {
  userId: string;
  email: string;
  keyId: string | null;
  plan: string;
  scopes: ReadonlyArray<'read' | 'download'>;
  /** How the caller authenticated: an API key, or the legacy dashboard bearer JWT. */
  authMethod?: 'api_key' | 'jwt';
};

/** Resolves a request's credentials (X-API-Key, or a dashboard bearer JWT) to a principal, or null. */
export interface Authenticator {
  authenticate(req: Request): Promise<Principal | null>;
}

declare module 'express-serve-static-core' {
  interface Request {
    principal?: Principal;
    id?: string;
  }
}

/** last_used_at is refreshed at most this often per key: a write (and fsync) per request would cost more than it tells. */
const TOUCH_EVERY_MS = 60_000;

/**
 * The plan a principal carries: the plan in force now (a paid plan whose subscription lapsed counts as Free).
 * The meter re-checks inside its own transaction; this is for plan-aware answers and request limits.
 */
function planInForce(store: StateStore, user: UserRow): string {
  const plan = planOf(user.plan);
  if (!plan.requires_subscription) return plan.id;
  const sub = activeSubscription(store, user.id);
  return sub ? planOf(sub.tier).id : PLANS.free.id;
}

/** X-API-Key against the hashed keys in the state store. */
export function keyAuthenticator(store: StateStore): Authenticator {
  return {
    async authenticate(req) {
      const key = req.header('x-api-key');
      // Bound the work an attacker can cause: real keys are short.
      if (!key || key.length > 200) return null;
      const row = store.findLiveKey(key);
      if (!row) return null;
      const user = store.getUser(row.user_id);
      if (!user) return null;
      if (!row.last_used_at || Date.now() - Date.parse(row.last_used_at) >= TOUCH_EVERY_MS) store.touchKey(row.id);
      return {
        userId: user.id,
        email: user.email,
        keyId: row.id,
        plan: planInForce(store, user),
        scopes: row.scopes.split(',').filter((s): s is 'read' | 'download' => s === 'read' || s === 'download'),
        authMethod: 'api_key',
      };
    },
  };
}

/**
 * The legacy dashboard scheme: `Authorization: Bearer <JWT>`, verified with an HS256 secret or a JWKS file,
 * mapped to the user by its `email` claim (a first login creates a Free user). The token must carry `exp`.
 * A JWT has both scopes: it is the account owner at the dashboard.
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
    async authenticate(req) {
      const header = req.header('authorization') ?? '';
      const m = /^Bearer\s+([A-Za-z0-9_\-]+\.[A-Za-z0-9_\-]+\.[A-Za-z0-9_\-]*)$/.exec(header);
      if (!m || header.length > 8192) return null;
      try {
        const { payload } = await jwtVerify(m[1]!, key as Uint8Array, { algorithms, requiredClaims: ['exp'] });
        const email = typeof payload.email === 'string' ? payload.email.trim() : '';
        if (!email || email.length > 320 || !email.includes('@')) return null;
        const user = userForEmail(store, email);
        return { userId: user.id, email: user.email, keyId: null, plan: planInForce(store, user), scopes: ['read', 'download'], authMethod: 'jwt' };
      } catch {
        return null;
      }
    },
  };
}

/** X-API-Key when sent (it wins over a bearer token, as in the anchor); otherwise the dashboard JWT if configured. */
export function accountAuthenticator(store: StateStore, jwt: { secret?: string | undefined; jwksFile?: string | undefined }): Authenticator {
  const keys = keyAuthenticator(store);
  const bearer = jwtAuthenticator(store, jwt);
  return {
    async authenticate(req) {
      if (req.header('x-api-key')) return keys.authenticate(req);
      return bearer ? bearer.authenticate(req) : null;
    },
  };
}
