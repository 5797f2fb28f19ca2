import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { StateStore } from '../src/state/store.js';

/**
 * The pmlake side of every scenario: the real `pmlake serve` as a child process on an ephemeral port, so its
 * memory can be read from /proc/<pid> apart from the benchmark's own, and keys created in its state store the
 * way `pmlake keys create` does. The child is started as `node --import tsx src/cli.ts serve` (not through the
 * tsx CLI, which would put a wrapper process between us and the server and report the wrong pid).
 */

export const REPO = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..');

export type ChildServer = {
  url: string;
  pid: number;
  child: ChildProcess;
  logFile: string;
  stop(): Promise<void>;
};

export type ServerOptions = {
  lakeDir: string;
  stateDir: string;
  env?: Record<string, string>;
  /** Directory for `--cpu-prof` output (profiling a miss); unset = no profiler. */
  cpuProfDir?: string | undefined;
  logFile: string;
};

/**
 * The V8 flag package.json's `pmlake` script starts every command with: a 64 MB semi-space (young
 * generation) instead of V8's 16 MB default. Request handling allocates short-lived objects at a high rate;
 * with the small default most of them survive one scavenge and are copied, and scavenges run several
 * hundred times a second under load: the larger semi-space trades some RSS for more requests a second
 * (http-small shows both). The bare-Express baseline is started with it too.
 */
export const NODE_FLAGS = ['--max-semi-space-size=64'];

/** Node flags for a TypeScript entry point run in-process (no tsx wrapper process). */
export function tsNodeArgs(cpuProfDir?: string): string[] {
  const args = [...NODE_FLAGS, '--import', 'tsx'];
  if (cpuProfDir) {
    fs.mkdirSync(cpuProfDir, { recursive: true });
    args.push('--cpu-prof', '--cpu-prof-dir', cpuProfDir);
  }
  return args;
}

/** Spawns a TS script and waits for the first stdout line matching `ready`; returns the match. */
export async function spawnUntil(
  script: string,
  args: string[],
  env: NodeJS.ProcessEnv,
  ready: RegExp,
  logFile: string,
  cpuProfDir?: string,
  timeoutMs = 120_000,
): Promise<{ child: ChildProcess; match: RegExpExecArray }> {
  fs.mkdirSync(path.dirname(logFile), { recursive: true });
  const log = fs.openSync(logFile, 'a');
  const child = spawn(process.execPath, [...tsNodeArgs(cpuProfDir), script, ...args], {
    cwd: REPO,
    env,
    stdio: ['ignore', 'pipe', log],
  });
  fs.closeSync(log);
  const match = await new Promise<RegExpExecArray>((resolve, reject) => {
    let buf = '';
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`${path.basename(script)} did not become ready in ${timeoutMs} ms (log: ${logFile})`));
    }, timeoutMs);
    const onData = (d: Buffer): void => {
      buf += d.toString('utf8');
      const m = ready.exec(buf);
      if (m) {
        clearTimeout(timer);
        resolve(m);
      }
    };
    child.stdout!.on('data', onData);
    child.once('exit', (code, sig) => {
      clearTimeout(timer);
      reject(new Error(`${path.basename(script)} exited (${code ?? sig}) before it was ready; log: ${logFile}\n${tail(logFile)}`));
    });
  });
  // Keep draining stdout so the child never blocks on a full pipe.
  child.stdout!.resume();
  return { child, match };
}

export function tail(file: string, bytes = 2000): string {
  try {
    const text = fs.readFileSync(file, 'utf8');
    return text.slice(-bytes);
  } catch {
    return '';
  }
}

export async function stopChild(child: ChildProcess, graceMs = 10_000): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
  await exited;
  clearTimeout(timer);
}

export async function startPmlakeServer(opts: ServerOptions): Promise<ChildServer> {
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    PMLAKE_LAKE: opts.lakeDir,
    PMLAKE_STATE: opts.stateDir,
    PORT: '0',
    HOST: '127.0.0.1',
    PMLAKE_DUCKDB_THREADS: '2',
    LOG_LEVEL: process.env.LOG_LEVEL ?? 'info',
    ...opts.env,
  };
  const { child, match } = await spawnUntil(path.join(REPO, 'src/cli.ts'), ['serve'], env, /listening on (http:\/\/[^\s]+)/, opts.logFile, opts.cpuProfDir);
  return {
    url: match[1]!,
    pid: child.pid!,
    child,
    logFile: opts.logFile,
    stop: () => stopChild(child),
  };
}

/**
 * `n` read+download keys of one professional user, created in the server's state store the way
 * `pmlake keys create` does, in one transaction (a durable commit per key would cost an fsync, or a PostgreSQL
 * round trip, each). A fresh label is a fresh user, so fair-use volume and per-key rate windows start at zero.
 * The store (SQLite or PostgreSQL) is opened once, before the server starts, and kept open.
 */
export async function createBenchKeys(store: StateStore, label: string, n: number): Promise<string[]> {
  const user = await store.upsertUser(`bench-${label}@example.com`, 'professional');
  return store.tx(async (t) => {
    const keys: string[] = [];
    for (let k = 0; k < n; k += 1) {
      keys.push((await store.createApiKey({ userId: user.id, name: `bench ${label} ${k}`, prefix: process.env.PMLAKE_KEY_PREFIX ?? 'pm_' }, t)).plaintext);
    }
    return keys;
  });
}

/** Runs a TS script to completion as a child process; rejects on a non-zero exit with the log's tail. */
export async function runToExit(
  script: string,
  args: string[],
  env: NodeJS.ProcessEnv,
  logFile: string,
  onStdout?: (line: string) => void,
): Promise<{ seconds: number; peakRss: number; stdout: string }> {
  fs.mkdirSync(path.dirname(logFile), { recursive: true });
  const log = fs.openSync(logFile, 'a');
  const t0 = process.hrtime.bigint();
  const child = spawn(process.execPath, [...tsNodeArgs(), script, ...args], { cwd: REPO, env, stdio: ['ignore', 'pipe', log] });
  fs.closeSync(log);
  const { peakTracker } = await import('./proc.js');
  const peak = peakTracker(child.pid!);
  let out = '';
  let partial = '';
  child.stdout!.on('data', (d: Buffer) => {
    const s = d.toString('utf8');
    if (out.length < 1 << 20) out += s;
    if (onStdout) {
      partial += s;
      const lines = partial.split('\n');
      partial = lines.pop()!;
      for (const l of lines) onStdout(l);
    }
  });
  // The high-water mark must be read while the process still exists, so sample on a timer and at exit.
  let last = 0;
  const sampler = setInterval(() => {
    last = Math.max(last, peak.stop());
  }, 500);
  const code = await new Promise<number | string>((resolve) => child.once('exit', (c, sig) => resolve(c ?? sig ?? 'unknown')));
  clearInterval(sampler);
  const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
  if (code !== 0) throw new Error(`${path.basename(script)} ${args.join(' ')} exited with ${code}; log ${logFile}:\n${tail(logFile)}`);
  return { seconds, peakRss: last, stdout: out };
}
