import { buildCore, type Core } from './compose.js';
import type { Config } from './config.js';
import type { Logger } from './log.js';

/**
 * The `worker` role: the core services and an export worker, no HTTP. It takes export jobs from the queue in
 * the state database (src/exports/queue.ts) that any replica accepted, alongside other workers and the
 * replicas' embedded ones, and reads the same lake through its published versions. Useful with a shared
 * database (PMLAKE_DATABASE_URL); on the embedded SQLite file it shares the work of one machine's processes.
 */
export type RunningWorker = { core: Core; id: string; close(): Promise<void> };

export async function startWorker(config: Config, log: Logger): Promise<RunningWorker> {
  const core = await buildCore(config, log, 'worker');
  core.exports.start({ worker: true });
  return {
    core,
    id: core.exports.workerId ?? '',
    close: () => core.close(),
  };
}
