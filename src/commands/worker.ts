import { loadConfig } from '../config.js';
import { createLogger } from '../log.js';
import { startWorker } from '../worker.js';
import { runUntilStopped } from './until-stopped.js';

/** `pmlake worker`: builds exports from the shared queue until SIGINT/SIGTERM (running jobs go back to the queue). */
export async function workerCommand(_args: string[]): Promise<number> {
  void _args;
  const config = loadConfig();
  const log = createLogger(config.logLevel);
  const running = await startWorker(config, log);
  process.stdout.write(`pmlake worker ${running.id} building exports (state: ${running.core.state.dialect}, lake: ${config.lakeDir})\n`);
  return runUntilStopped(() => running.close());
}
