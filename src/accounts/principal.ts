/** Who is calling: resolved from an API key or the dashboard bearer JWT (src/accounts/auth.ts). */
export type Principal = {
  userId: string;
  email: string;
  keyId: string | null;
  plan: string;
  scopes: ReadonlyArray<'read' | 'download'>;
  /** How the caller authenticated: an API key, or the legacy dashboard bearer JWT. */
  authMethod?: 'api_key' | 'jwt';
};

/** The credentials a caller presented, whatever the transport: the X-API-Key value and the Authorization header. */
export type Credentials = { apiKey?: string | undefined; authorization?: string | undefined };

/** Resolves credentials to a principal, or null. */
export interface Authenticator {
  authenticate(creds: Credentials): Promise<Principal | null>;
}
