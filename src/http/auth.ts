import type { Request } from 'express';
import type { StateStore } from '../state/store.js';

/** Who is calling. Attached to `req.principal` by the auth middleware for every keyed route. */
export type Principal = {
  userId: string;
  email: string;
  keyId: string | null;
  plan: string;
  scopes: ReadonlyArray<'read' | 'download'>;
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
      store.touchKey(row.id);
      return {
        userId: user.id,
        email: user.email,
        keyId: row.id,
        plan: user.plan,
        scopes: row.scopes.split(',').filter((s): s is 'read' | 'download' => s === 'read' || s === 'download'),
      };
    },
  };
}
