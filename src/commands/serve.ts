import { loadConfig } from '../config.js';
import { createLogger } from '../log.js';
import { startServer } from '../server.js';
import { runUntilStopped } from './until-stopped.js';

export async function serveCommand(_args: string[]): Promise<number> {
  void _args;
  const config = loadConfig();
  const log = createLogger(config.logLevel);
  const running = await startServer(config, log);
  process.stdout.write(`pmlake listening on ${running.url} (lake: ${config.lakeDir})\n`);
  return runUntilStopped(() => running.close());
}
