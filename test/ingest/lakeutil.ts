import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { lakeRows } from './oracle.js';
import { currentVersion, SET_NAMES, setDir } from '../../src/lake/versions.js';

/** Every file under a directory with its size and mtime (to show files were left untouched). */
export function listing(dir: string): Record<string, string> {
  const out: Record<string, string> = {};
  const walk = (d: string): void => {
    for (const e of fs.readdirSync(d, { withFileTypes: true })) {
      const full = path.join(d, e.name);
      if (e.isDirectory()) walk(full);
      else {
        const st = fs.statSync(full);
        out[path.relative(dir, full)] = `${st.size}:${st.mtimeMs}:${st.ino}`;
      }
    }
  };
  if (fs.existsSync(dir)) walk(dir);
  return out;
}

/** The current version's Parquet files grouped by data-set directory (catalog/markets, l2, ...). */
export function datasetsOf(lake: string): Map<string, string[]> {
  const out = new Map<string, string[]>();
  const v = currentVersion(lake);
  for (const name of SET_NAMES) if (v.hasFiles(name)) out.set(setDir(name), v.files(name));
  return out;
}

/** All rows of a data set as sorted JSON lines (decimals and lists as text). */
export async function datasetRows(files: string[]): Promise<string[]> {
  const list = files.map((f) => `'${f}'`).join(', ');
  const rows = await lakeRows(`SELECT * FROM read_parquet([${list}], hive_partitioning = false)`);
  // updated_at on catalogue rows is the wall-clock time of the batch that wrote them, not data.
  return rows.map(({ updated_at: _ignored, ...r }) => JSON.stringify(r)).sort();
}

export type CliRun = { code: number | null; signal: NodeJS.Signals | null; stdout: string; stderr: string };

/** Runs `pmlake <args>` as a child process to its end; `onStderr` may kill it. */
export function runCli(args: string[], env: Record<string, string>, onStderr?: (text: string, kill: () => void) => void): Promise<CliRun> {
  const child = spawnCli(args, env);
  if (onStderr) child.onStderr(() => onStderr(child.stderr(), child.kill));
  return child.done;
}

export type Child = {
  /** Resolves when the process ended (killed or not). */
  done: Promise<CliRun>;
  /** The `pmlake-test:` marker lines printed so far. */
  markers(): string[];
  kill(): void;
  /** The process id (to send it another signal than SIGKILL). */
  pid: number;
  /** Called on every stderr chunk. */
  onStderr(cb: () => void): void;
  /** Everything printed on stderr so far. */
  stderr(): string;
};

/** `pmlake <args>` as a child process, with its handle for killing it at any moment. */
export function spawnCli(args: string[], env: Record<string, string>): Child {
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/cli.ts', ...args], {
    cwd: path.resolve('.'),
    env: { ...process.env, LOG_LEVEL: 'error', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  const listeners: (() => void)[] = [];
  child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr.on('data', (d: Buffer) => {
    stderr += d.toString();
    for (const l of listeners) l();
  });
  const done = new Promise<CliRun>((resolve, reject) => {
    child.on('error', reject);
    child.on('close', (code, signal) => resolve({ code, signal, stdout, stderr }));
  });
  return {
    done,
    markers: () => stderr.split('\n').filter((l) => l.startsWith('pmlake-test: ')),
    kill: () => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    },
    onStderr: (cb) => listeners.push(cb),
    stderr: () => stderr,
    pid: child.pid ?? 0,
  };
}
