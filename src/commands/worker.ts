import { loadConfig } from '../config.js';
import { createLogger } from '../log.js';
import { startWorker } from '../worker.js';

/** `pmlake worker`: builds exports from the shared queue until SIGINT/SIGTERM (running jobs go back to the queue). */
export async function workerCommand(_args: string[]): Promise<number> {
  void _args;
  const config = loadConfig();
  const log = createLogger(config.logLevel);
  const running = await startWorker(config, log);
  process.stdout.write(`pmlake worker ${running.id} building exports (state: ${running.core.state.dialect}, lake: ${config.lakeDir})\n`);
  const stop = (): void => {
    void running.close().then(() => process.exit(0));
  };
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
  await new Promise(() => {});
  return 0;
}
