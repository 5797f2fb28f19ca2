import { parseArgs } from 'node:util';
import { z } from 'zod';
import { loadConfig } from '../config.js';
import { StartupError } from '../errors.js';
import { createLogger } from '../log.js';
import { CataloguePoller, type CataloguePollerOptions } from '../poll/poller.js';
import { runUntilStopped } from './until-stopped.js';

const USAGE = 'usage: pmlake catalogue --out DIR [--once]\n';

const Args = z.object({ out: z.string().min(1, 'DIR is required'), once: z.boolean().default(false) });

/** The command line, or an error text for the operator. */
export function parseCatalogueArgs(args: string[]): z.infer<typeof Args> | string {
  let values: Record<string, string | boolean | undefined>;
  try {
    ({ values } = parseArgs({ args, options: { out: { type: 'string' }, once: { type: 'boolean' } }, strict: true, allowPositionals: false }));
  } catch (err) {
    return (err as Error).message;
  }
  if (values.out === undefined) return '--out DIR is required';
  const parsed = Args.safeParse(values);
  return parsed.success ? parsed.data : parsed.error.issues.map((i) => `--${i.path.join('.')}: ${i.message}`).join('\n');
}

/**
 * `pmlake catalogue --out DIR [--once]`: polls the venue's catalogue (Gamma markets and events, CLOB markets) every
 * PMLAKE_CATALOGUE_SECONDS into poll files in DIR (docs/catalogue-format.md) until SIGINT/SIGTERM; a poll in
 * progress then is cut and its open file removed (a partial poll is worth nothing). `--once`: one poll, then exit
 * (0 when every endpoint was paged to its end, 1 otherwise).
 */
export async function catalogueCommand(args: string[]): Promise<number> {
  if (args.includes('--help') || args.includes('-h')) {
    process.stdout.write(USAGE);
    return 0;
  }
  const parsed = parseCatalogueArgs(args);
  if (typeof parsed === 'string') {
    process.stderr.write(`pmlake catalogue: ${parsed}\n${USAGE}`);
    return 2;
  }
  const config = loadConfig();
  const log = createLogger(config.logLevel);
  const { gammaUrl, clobUrl, catalogueSeconds, recorderId } = config.live;
  const opts: CataloguePollerOptions = { outDir: parsed.out, pollerId: recorderId, gammaUrl, clobUrl, periodSeconds: catalogueSeconds, log };
  const cannotUse = (err: unknown): never => {
    // The directory cannot be made, read or written: the operator's to fix, said in one line.
    if ((err as NodeJS.ErrnoException).code) throw new StartupError(`cannot use ${parsed.out}: ${(err as Error).message}`);
    throw err;
  };
  if (parsed.once) {
    const poller = await CataloguePoller.prepare(opts).catch(cannotUse);
    const summary = await poller.pollOnce().catch(cannotUse);
    if (summary === null) return 1;
    process.stdout.write(`pmlake catalogue: ${summary.file} (${summary.pages} pages, complete ${JSON.stringify(summary.complete)})\n`);
    return Object.values(summary.complete).every(Boolean) ? 0 : 1;
  }
  const poller = await CataloguePoller.start(opts).catch(cannotUse);
  process.stdout.write(`pmlake catalogue: polling ${gammaUrl} and ${clobUrl} every ${catalogueSeconds} s into ${parsed.out}\n`);
  return runUntilStopped(() => poller.stop());
}
