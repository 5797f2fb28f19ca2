import { parseArgs } from 'node:util';
import type { DuckDBInstance } from '@duckdb/node-api';
import { loadConfig } from '../config.js';
import { StartupError } from '../errors.js';
import { openLakeDb } from '../lake/duckdb.js';
import { createLogger } from '../log.js';
import { catalogueAssets } from '../record/catalogue-assets.js';
import { isTokenId } from '../token-id.js';
import { Recorder } from '../record/recorder.js';
import { runUntilStopped } from './until-stopped.js';
import { redactUrl } from '../record/capture-lines.js';

const USAGE = 'usage: pmlake record --out DIR [--assets ID,ID,…]\n';

type RecordArgs = { out: string; assets: string[] | undefined };

/** The command line, or an error text for the operator. */
export function parseRecordArgs(args: string[]): RecordArgs | string {
  let values: { out?: string | undefined; assets?: string | undefined };
  try {
    ({ values } = parseArgs({ args, options: { out: { type: 'string' }, assets: { type: 'string' } }, strict: true, allowPositionals: false }));
  } catch (err) {
    return err instanceof Error ? err.message : String(err);
  }
  if (!values.out) return '--out DIR is required';
  if (values.assets === undefined) return { out: values.out, assets: undefined };
  const assets = values.assets.split(',').map((a) => a.trim());
  const bad = assets.find((a) => !isTokenId(a));
  if (bad !== undefined) return `--assets: not a token id: '${bad.slice(0, 100)}' (a comma-separated list of token ids: decimal, at most 2^256 - 1)`;
  return { out: values.out, assets: [...new Set(assets)] };
}

/**
 * `pmlake record --out DIR [--assets …]`: records the venue's market channel into capture files in DIR
 * (docs/capture-format.md) until SIGINT/SIGTERM, which writes `stop` and puts the open file into place.
 * Without `--assets` it records every live token of the lake's catalogue, asked again every PMLAKE_CATALOGUE_SECONDS.
 */
export async function recordCommand(args: string[]): Promise<number> {
  if (args.includes('--help') || args.includes('-h')) {
    process.stdout.write(USAGE);
    return 0;
  }
  const parsed = parseRecordArgs(args);
  if (typeof parsed === 'string') {
    process.stderr.write(`pmlake record: ${parsed}\n${USAGE}`);
    return 2;
  }
  const config = loadConfig();
  const log = createLogger(config.logLevel);
  let db: DuckDBInstance | null = null;
  if (!parsed.assets) db = await openLakeDb({ allowedDirectories: [config.lakeDir], threads: 1, memoryLimit: '256MB' });
  const recorder = await Recorder.start({
    url: config.live.venueWsUrl,
    outDir: parsed.out,
    recorderId: config.live.recorderId,
    rotateSeconds: config.live.recordRotateSeconds,
    ...(parsed.assets ? { assets: parsed.assets } : {}),
    ...(db ? { discoverAssets: catalogueAssets(db, config.lakeDir) } : {}),
    // The catalogue the lake holds is the poller's (`pmlake catalogue`, landed by the follower): asked as often as
    // the poller polls, a new market is recorded about one poll after it is listed (at once when the channel
    // announces it).
    refreshSeconds: config.live.catalogueSeconds,
    log,
  }).catch((err: unknown) => {
    db?.closeSync();
    // The capture directory cannot be made, read or written: the operator's to fix, said in one line.
    const code = (err as NodeJS.ErrnoException).code;
    if (code) throw new StartupError(`cannot use ${parsed.out}: ${(err as Error).message}`);
    throw err;
  });
  process.stdout.write(`pmlake record ${config.live.recorderId} session ${recorder.session} writing ${parsed.out} from ${redactUrl(config.live.venueWsUrl)}\n`);
  return runUntilStopped(async () => {
    await recorder.stop();
    db?.closeSync();
  });
}
