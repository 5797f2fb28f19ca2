import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';

/**
 * A throwaway real Redis for tests: Debian's `redis-server` (scripts/ensure-system-deps.sh installs it) on
 * loopback, on a free port, in a temporary directory, without persistence. `stop()` and `start()` again keep
 * the port, so a test can take Redis away and bring it back under running servers.
 */
export type TestRedis = {
  readonly port: number;
  readonly url: string;
  /** The running server's process id (undefined while stopped): benches read its CPU time. */
  readonly pid: number | undefined;
  /** Stops the server (SIGTERM, then SIGKILL after 5 s) and waits for it to exit. */
  stop(): Promise<void>;
  /** Starts it again on the same port; resolves once it answers PING. */
  start(): Promise<void>;
  /** Stops it and removes its directory. */
  close(): Promise<void>;
};

export async function startTestRedis(): Promise<TestRedis> {
  const bin = 'redis-server';
  if (!onPath(bin)) throw new Error('redis-server is not installed: run `bash scripts/ensure-system-deps.sh` (Debian package redis-server)');
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pmlake-redis-'));
  const port = await freePort();
  let child: ChildProcess | null = null;

  const start = async (): Promise<void> => {
    const proc = spawn(bin, ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir, '--logfile', ''], {
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let stderr = '';
    proc.stderr?.on('data', (d: Buffer) => (stderr = (stderr + d.toString()).slice(-2000)));
    child = proc;
    // Bounded: 200 tries, 50 ms apart.
    for (let i = 0; i < 200; i++) {
      if (proc.exitCode !== null) throw new Error(`redis-server exited with ${proc.exitCode}: ${stderr}`);
      if (await pings(port)) return;
      await new Promise((r) => setTimeout(r, 50));
    }
    proc.kill('SIGKILL');
    throw new Error(`redis-server did not answer PING on port ${port}: ${stderr}`);
  };

  const stop = async (): Promise<void> => {
    const proc = child;
    child = null;
    if (!proc || proc.exitCode !== null || proc.signalCode !== null) return;
    const exited = new Promise<void>((resolve) => proc.once('exit', () => resolve()));
    proc.kill('SIGTERM');
    const timer = setTimeout(() => proc.kill('SIGKILL'), 5000);
    await exited;
    clearTimeout(timer);
  };

  await start();
  return {
    port,
    url: `redis://127.0.0.1:${port}`,
    get pid() {
      return child?.pid;
    },
    stop,
    start,
    close: async () => {
      await stop();
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}

function onPath(bin: string): boolean {
  return (process.env.PATH ?? '').split(path.delimiter).some((d) => d && fs.existsSync(path.join(d, bin)));
}

/** A port the kernel just handed out on loopback (then released for redis-server to take). */
function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as net.AddressInfo;
      srv.close(() => resolve(port));
    });
  });
}

/** True when something on the port answers a RESP PING with +PONG (within a second). */
function pings(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const sock = net.connect({ port, host: '127.0.0.1' });
    let got = '';
    const done = (ok: boolean) => {
      clearTimeout(timer);
      sock.destroy();
      resolve(ok);
    };
    const timer = setTimeout(() => done(false), 1000);
    sock.on('connect', () => sock.write('PING\r\n'));
    sock.on('data', (d) => {
      got += d.toString();
      if (got.includes('\r\n')) done(got.startsWith('+PONG'));
    });
    sock.on('error', () => done(false));
  });
}
