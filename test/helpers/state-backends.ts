import pg from 'pg';
import { StateStore } from '../../src/state/store.js';
import { startTestPostgres, type TestPostgres } from './postgres.js';
import { tempDir } from './server.js';

/**
 * The two state backends for suites that must hold on both: the embedded SQLite file and a real PostgreSQL
 * (scripts/postgres-local.sh on loopback). `fresh()` gives an empty, migrated store of its own (a new SQLite
 * file, or a new database on the shared test server); `another(s)` a second store on the same data — another
 * process's connection, or another replica's.
 */
export type StateBackend = {
  readonly name: 'sqlite' | 'postgres';
  fresh(): Promise<StateStore>;
  another(s: StateStore): Promise<StateStore>;
  /** Closes the stores opened so far (after each test: a PostgreSQL store holds a pool of connections). */
  closeStores(): Promise<void>;
  /** The PostgreSQL server (postgres only): stop/start it to test an unreachable database. */
  readonly server?: TestPostgres;
  close(): Promise<void>;
};

/** What both backends share: a place per data set (a directory, a database URL), the stores opened on it. */
function backend(
  name: StateBackend['name'],
  newPlace: () => Promise<string>,
  openAt: (place: string) => Promise<StateStore>,
  dispose: () => Promise<void>,
  server?: TestPostgres,
): StateBackend {
  const placeOf = new WeakMap<StateStore, string>();
  const stores: StateStore[] = [];
  const open = async (place: string) => {
    const s = await openAt(place);
    placeOf.set(s, place);
    stores.push(s);
    return s;
  };
  const closeStores = async () => {
    for (const s of stores.splice(0)) await s.close();
  };
  return {
    name,
    ...(server ? { server } : {}),
    fresh: async () => open(await newPlace()),
    another: (s) => open(placeOf.get(s)!),
    closeStores,
    async close() {
      await closeStores();
      await dispose();
    },
  };
}

export function sqliteBackend(): StateBackend {
  const dirs: { dir: string; cleanup(): void }[] = [];
  return backend(
    'sqlite',
    async () => {
      const t = tempDir('pmlake-state-');
      dirs.push(t);
      return t.dir;
    },
    async (dir) => StateStore.open(dir),
    async () => {
      for (const d of dirs.splice(0)) d.cleanup();
    },
  );
}

export async function postgresBackend(): Promise<StateBackend> {
  const server = await startTestPostgres();
  let n = 0;
  return backend(
    'postgres',
    async () => {
      // A database of its own per data set, on the one test server.
      const name = `t${process.pid}_${++n}`;
      const admin = new pg.Client({ connectionString: server.url });
      await admin.connect();
      try {
        await admin.query(`CREATE DATABASE ${name}`);
      } finally {
        await admin.end();
      }
      const url = new URL(server.url);
      url.pathname = `/${name}`;
      return url.toString();
    },
    (url) => StateStore.connect({ stateDir: '/nonexistent', databaseUrl: url }),
    () => server.close(),
    server,
  );
}
