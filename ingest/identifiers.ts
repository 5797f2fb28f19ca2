import type { DuckDBConnection } from '@duckdb/node-api';
import { runSqlFile } from './sql-file.js';

/**
 * The checks of identifiers and text from outside (sql/ingest/identifiers.sql: token ids, condition ids, Gamma market
 * ids, bounded text), as TEMP macros of the staging connection. Every handler that lands such a value creates them
 * before it stages; they are made once per connection.
 */
const ready = new WeakSet<DuckDBConnection>();

export async function identifierMacros(conn: DuckDBConnection): Promise<void> {
  if (ready.has(conn)) return;
  await runSqlFile(conn, 'identifiers.sql');
  ready.add(conn);
}

/**
 * What an issue shows of a refused value: its first characters (read by SQL, never the whole) and its size. Enough for
 * a whole token or condition id, so an id that is merely malformed is shown as it is.
 */
export const PREVIEW_CHARS = 80;

export function refusedValue(head: unknown, bytes: unknown): string {
  const h = String(head ?? '');
  const n = Number(bytes ?? 0);
  return `${JSON.stringify(h)}${n > Buffer.byteLength(h) ? '…' : ''}, ${n} bytes`;
}
