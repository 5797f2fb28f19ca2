import type Database from 'better-sqlite3';
import { SqliteDb } from '../../src/state/sqlite-db.js';
import type { StateStore } from '../../src/state/store.js';

/**
 * The embedded store's own SQLite connection, for tests that look at (or age) rows directly on the default
 * backend. Tests meant for both backends use the store's async interface instead.
 */
export function sqliteOf(store: StateStore): Database.Database {
  if (!(store.backend instanceof SqliteDb)) throw new Error('not the embedded SQLite store');
  return store.backend.raw;
}
