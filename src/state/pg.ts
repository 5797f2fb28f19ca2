import pg from 'pg';
import { Unavailable } from '../errors.js';

/**
 * The one way pmlake opens a PostgreSQL connection (PMLAKE_DATABASE_URL): bounded waits everywhere, so an
 * unreachable or hung server is a prompt, clear failure rather than a process stuck on a socket, and failures
 * described without the URL's host, user or password (node-postgres puts "connect ECONNREFUSED 10.0.0.5:5432"
 * or the user name into its messages; those reach terminals and logs that users see).
 */
export type PgConnectOptions = {
  /** Shown in pg_stat_activity (at most 63 bytes kept): who holds a session, e.g. which ingest holds a lock. */
  applicationName: string;
  connectTimeoutMs?: number;
  /** Client-side bound on every query (node-postgres' query_timeout) and the server's statement_timeout. */
  queryTimeoutMs?: number;
};

export const CONNECT_TIMEOUT_MS = 5000;
export const QUERY_TIMEOUT_MS = 5000;

/**
 * A connected client. It carries an 'error' listener from the start: a server gone mid-session otherwise
 * becomes an unhandled 'error' event that ends the process. `onError` learns of such a loss.
 */
export async function connectPg(url: string, opts: PgConnectOptions, onError: (err: Error) => void = () => {}): Promise<pg.Client> {
  const queryTimeoutMs = opts.queryTimeoutMs ?? QUERY_TIMEOUT_MS;
  let client: pg.Client;
  try {
    client = new pg.Client({
      connectionString: url,
      application_name: opts.applicationName.slice(0, 63),
      connectionTimeoutMillis: opts.connectTimeoutMs ?? CONNECT_TIMEOUT_MS,
      query_timeout: queryTimeoutMs,
      statement_timeout: queryTimeoutMs,
      // Keepalives: a session whose peer vanished (a machine lost) is noticed instead of waiting forever.
      keepAlive: true,
    });
  } catch (err) {
    throw new Unavailable(`PostgreSQL (PMLAKE_DATABASE_URL) unusable: ${pgFailure(err)}`);
  }
  client.on('error', onError);
  try {
    await client.connect();
  } catch (err) {
    await client.end().catch(() => {});
    throw new Unavailable(`PostgreSQL (PMLAKE_DATABASE_URL): could not connect: ${pgFailure(err)}`);
  }
  return client;
}

const NODE_CODES: Record<string, string> = {
  ECONNREFUSED: 'connection refused',
  ECONNRESET: 'connection reset',
  ETIMEDOUT: 'connection timed out',
  EHOSTUNREACH: 'host unreachable',
  ENETUNREACH: 'network unreachable',
  ENOTFOUND: 'host name not found',
  EAI_AGAIN: 'host name lookup failed',
};

const SQLSTATES: Record<string, string> = {
  '28P01': 'authentication failed',
  '28000': 'authentication rejected',
  '3D000': 'database does not exist',
  '53300': 'too many connections',
  '57P01': 'server shutting down',
  '57P03': 'server not accepting connections yet',
  '57014': 'query timed out',
};

/**
 * A failure in words that name no host, user or password: only the error's code is read, never its message
 * (except node-postgres' own timeout messages, which carry no address).
 */
export function pgFailure(err: unknown): string {
  const code = typeof err === 'object' && err !== null && 'code' in err ? String((err as { code: unknown }).code) : '';
  if (NODE_CODES[code]) return NODE_CODES[code];
  if (SQLSTATES[code]) return SQLSTATES[code];
  const message = err instanceof Error ? err.message : '';
  if (/timeout/i.test(message)) return 'timed out';
  if (/SASL|password/i.test(message)) return 'authentication failed';
  if (err instanceof TypeError) return 'invalid connection URL';
  return code ? `error ${code}` : 'unexpected error';
}

/**
 * Whether a failure means the server is out of reach (no connection, connection lost, shutting down, too many
 * connections, a timeout) rather than a fault of the statement: the caller then answers 503 and retries later.
 */
export function pgUnreachable(err: unknown): boolean {
  const code = typeof err === 'object' && err !== null && 'code' in err ? String((err as { code: unknown }).code) : '';
  if (NODE_CODES[code]) return true;
  if (/^(08|57P|53)/.test(code)) return true;
  // A SQLSTATE of any other class is the statement's own fault (a constraint, a syntax error): not unreachable.
  if (/^[0-9A-Z]{5}$/.test(code)) return false;
  const message = err instanceof Error ? err.message : '';
  return /timeout|timed out|Connection terminated|connection error|not queryable|ECONN|EPIPE/i.test(message);
}
