import { loadConfig } from '../../src/config.js';
import { Unavailable } from '../../src/errors.js';
import { createLogger } from '../../src/log.js';
import { StateStore } from '../../src/state/store.js';
import { LakeLockUnavailableError } from '../ledger.js';
import { enqueueInputs } from './enqueue.js';
import { runQueueWorker } from './worker.js';

export const QUEUE_USAGE = 'usage: pmlake ingest --queue <file-or-dir>...\n       pmlake ingest --worker [--wait] [--lease-seconds N]\n';

/** Default lease of a queue item: renewed every third of it, so a killed worker's item is free this long after. */
const LEASE_SECONDS = 60;

async function openQueueDb(role: string): Promise<{ state: StateStore; config: ReturnType<typeof loadConfig> }> {
  const config = loadConfig();
  const state = await StateStore.connect({ stateDir: config.stateDir, databaseUrl: config.databaseUrl, log: createLogger(config.logLevel), role });
  return { state, config };
}

function unreachable(err: unknown): number {
  if (err instanceof Unavailable || err instanceof LakeLockUnavailableError) {
    process.stderr.write(`${(err as Error).message}\n`);
    return 2;
  }
  throw err;
}

/**
 * `pmlake ingest --queue <file-or-dir>...`: queues every input file in the shared state (PMLAKE_DATABASE_URL; the
 * embedded state file without it, for workers on this machine) for `pmlake ingest --worker` processes; prints
 * a JSON report. Exit 0 when something was queued or everything already was (or had landed), 1 when no input
 * could be read, 2 for usage errors or an unreachable database.
 */
export async function queueCommand(args: string[]): Promise<number> {
  const paths = args.filter((a) => !a.startsWith('--'));
  if (paths.length === 0 || args.includes('--help')) {
    process.stderr.write(QUEUE_USAGE);
    return 2;
  }
  let opened;
  try {
    opened = await openQueueDb('ingest queue');
  } catch (err) {
    return unreachable(err);
  }
  try {
    const report = await enqueueInputs(opened.state, paths, { lakeDir: opened.config.lakeDir });
    process.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
    return report.queued + report.already_queued + report.already_landed > 0 ? 0 : 1;
  } finally {
    await opened.state.close();
  }
}

/**
 * `pmlake ingest --worker [--wait] [--lease-seconds N]`: lands queued items (ingest/queue/worker.ts) until none is
 * left to land, then prints its JSON report (per-item costs) and exits 0; with `--wait` it keeps looking for new
 * items until SIGTERM/SIGINT. On SIGTERM an item not yet publishing is given back, one publishing finishes.
 */
export async function workerCommand(args: string[]): Promise<number> {
  const leaseAt = args.indexOf('--lease-seconds');
  const leaseSeconds = leaseAt >= 0 ? Number(args[leaseAt + 1]) : LEASE_SECONDS;
  const known = new Set(['--worker', '--wait', '--lease-seconds']);
  const unknown = args.filter((a, i) => !known.has(a) && i !== leaseAt + 1);
  if (unknown.length > 0 || args.includes('--help') || !(leaseSeconds > 0)) {
    process.stderr.write(QUEUE_USAGE);
    return 2;
  }
  let opened;
  try {
    opened = await openQueueDb('ingest worker');
  } catch (err) {
    return unreachable(err);
  }
  const { state, config } = opened;
  const log = createLogger(config.logLevel);
  const stop = new AbortController();
  const onSignal = (): void => stop.abort();
  process.once('SIGTERM', onSignal);
  process.once('SIGINT', onSignal);
  try {
    const report = await runQueueWorker({
      db: state,
      lakeDir: config.lakeDir,
      log,
      leaseMs: leaseSeconds * 1000,
      wait: args.includes('--wait'),
      stop: stop.signal,
      ingest: {
        snapshotSeconds: config.snapshotSeconds,
        threads: config.duckdbThreads ?? 2,
        memoryLimit: config.duckdbMemory,
        graceSeconds: config.lakeGraceSeconds,
        compactSmallFiles: config.compactSmallFiles,
        databaseUrl: config.databaseUrl,
      },
    });
    process.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
    return 0;
  } catch (err) {
    return unreachable(err);
  } finally {
    process.off('SIGTERM', onSignal);
    process.off('SIGINT', onSignal);
    await state.close();
  }
}
