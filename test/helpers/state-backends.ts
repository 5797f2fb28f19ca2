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

export function sqliteBackend(): StateBackend {
  const dirs: { dir: string; cleanup(): void }[] = [];
  const dirOf = new WeakMap<StateStore, string>();
  const stores: StateStore[] = [];
  const open = (dir: string) => {
    const s = StateStore.open(dir);
    dirOf.set(s, dir);
    stores.push(s);
    return s;
  };
  return {
    name: 'sqlite',
    async fresh() {
      const t = tempDir('pmlake-state-');
      dirs.push(t);
      return open(t.dir);
    },
    async another(s) {
      return open(dirOf.get(s)!);
    },
    async closeStores() {
      for (const s of stores.splice(0)) await s.close();
    },
    async close() {
      for (const s of stores.splice(0)) await s.close();
      for (const d of dirs.splice(0)) d.cleanup();
    },
  };
}

export async function postgresBackend(): Promise<StateBackend> {
  const server = await startTestPostgres();
  const urlOf = new WeakMap<StateStore, string>();
  const stores: StateStore[] = [];
  let n = 0;
  const open = async (url: string) => {
    const s = await StateStore.connect({ stateDir: '/nonexistent', databaseUrl: url });
    urlOf.set(s, url);
    stores.push(s);
    return s;
  };
  return {
    name: 'postgres',
    server,
    async fresh() {
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
      return open(url.toString());
    },
    async another(s) {
      return open(urlOf.get(s)!);
    },
    async closeStores() {
      for (const s of stores.splice(0)) await s.close();
    },
    async close() {
      for (const s of stores.splice(0)) await s.close();
      await server.close();
    },
  };
}
