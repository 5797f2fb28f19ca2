import { execFile } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';

/**
 * A throwaway real PostgreSQL for tests, through scripts/postgres-local.sh (the same script a human or `make
 * cluster` uses): initdb into a temporary directory (owned by the `postgres` user when the tests run as root,
 * since PostgreSQL refuses root), the server on 127.0.0.1 and a free port with its socket in that directory,
 * fsync off, database `pmlake`. `url` carries the generated password. `close()` stops it and removes the directory.
 */
export type TestPostgres = {
  readonly port: number;
  /** postgresql://pmlake:<password>@127.0.0.1:<port>/pmlake */
  readonly url: string;
  readonly password: string;
  /** Stops the server (fast shutdown); the cluster stays for start(). */
  stop(): Promise<void>;
  /** Starts it again on the same port; resolves once it accepts connections. */
  start(): Promise<void>;
  /** Stops it and removes its directory. */
  close(): Promise<void>;
};

const SCRIPT = path.resolve(import.meta.dirname, '../../scripts/postgres-local.sh');

export async function startTestPostgres(): Promise<TestPostgres> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pmlake-pg-'));
  const port = await freePort();
  const run = (cmd: 'start' | 'stop'): Promise<string> =>
    new Promise((resolve, reject) => {
      // Bounded: pg_ctl itself waits at most 30 s; this is the backstop.
      execFile('bash', [SCRIPT, cmd, dir, String(port)], { timeout: 90_000 }, (err, stdout, stderr) => {
        if (err) reject(new Error(`postgres-local.sh ${cmd} failed: ${stderr || err.message}`));
        else resolve(stdout.trim());
      });
    });
  let url: string;
  try {
    url = await run('start');
  } catch (err) {
    await run('stop').catch(() => {});
    fs.rmSync(dir, { recursive: true, force: true });
    throw err;
  }
  const password = decodeURIComponent(new URL(url).password);
  return {
    port,
    url,
    password,
    stop: async () => {
      await run('stop');
    },
    start: async () => {
      await run('start');
    },
    close: async () => {
      await run('stop').catch(() => {});
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** A port the kernel just handed out on loopback (then released for the server to take). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as net.AddressInfo;
      srv.close(() => resolve(port));
    });
  });
}
