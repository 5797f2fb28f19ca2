import type { Request } from 'express';

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
