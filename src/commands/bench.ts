import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/** The bench's own entry point: a checkout's bench/, which the service never imports. */
const BENCH_ENTRY = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', 'bench', 'cli.ts');

/**
 * `pmlake bench`: runs bench/cli.ts as a child process, so the service's import graph holds no bench code and a
 * deployment without bench/ still has a working CLI. The child gets this process's Node flags (the semi-space
 * size and the TypeScript loader `npm run pmlake` starts with), working directory, environment and terminal;
 * its exit code is ours. Ctrl-C reaches the child directly (the terminal signals the whole process group), so
 * it is only kept from ending this process first; a SIGTERM sent to this process alone is passed on.
 */
export async function benchCommand(args: string[]): Promise<number> {
  if (!fs.existsSync(BENCH_ENTRY)) {
    process.stderr.write(`pmlake bench: no ${BENCH_ENTRY}; the benchmark runs from a source checkout: make bench\n`);
    return 2;
  }
  const child = spawn(process.execPath, [...process.execArgv, BENCH_ENTRY, ...args], { stdio: 'inherit' });
  const ignore = (): void => undefined;
  const forward = (signal: NodeJS.Signals): void => {
    child.kill(signal);
  };
  process.on('SIGINT', ignore);
  process.on('SIGTERM', forward);
  try {
    return await new Promise<number>((resolve, reject) => {
      child.once('error', reject);
      child.once('exit', (code, signal) => resolve(code ?? 128 + (signal ? os.constants.signals[signal] : 0)));
    });
  } finally {
    process.off('SIGINT', ignore);
    process.off('SIGTERM', forward);
  }
}
