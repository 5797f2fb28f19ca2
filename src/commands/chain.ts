import { parseArgs } from 'node:util';
import { z } from 'zod';
import { ChainIndexer } from '../chain/indexer.js';
import { loadConfig } from '../config.js';
import { StartupError } from '../errors.js';
import { createLogger } from '../log.js';
import { runUntilStopped } from './until-stopped.js';

const USAGE = 'usage: pmlake chain --out DIR [--from-block N] [--to-block N]\n';

const block = z.coerce.number({ error: 'a block number' }).int('a block number').min(0, 'a block number ≥ 0').max(Number.MAX_SAFE_INTEGER);
const ChainArgs = z
  .object({ out: z.string().min(1, '--out DIR is required'), 'from-block': block.optional(), 'to-block': block.optional() })
  .refine((a) => a['from-block'] === undefined || a['to-block'] === undefined || a['from-block'] <= a['to-block'], '--from-block is after --to-block');

export type ChainArgs = { out: string; fromBlock: number | undefined; toBlock: number | undefined };

/** The command line, or an error text for the operator. */
export function parseChainArgs(args: string[]): ChainArgs | string {
  let values: Record<string, string | undefined>;
  try {
    ({ values } = parseArgs({
      args,
      options: { out: { type: 'string' }, 'from-block': { type: 'string' }, 'to-block': { type: 'string' } },
      strict: true,
      allowPositionals: false,
    }));
  } catch (err) {
    return err instanceof Error ? err.message : String(err);
  }
  const r = ChainArgs.safeParse({ out: values.out ?? '', 'from-block': values['from-block'], 'to-block': values['to-block'] });
  if (!r.success) return r.error.issues.map((i) => (i.path.length ? `--${String(i.path[0])}: ${i.message}` : i.message)).join('; ');
  return { out: r.data.out, fromBlock: r.data['from-block'], toBlock: r.data['to-block'] };
}

/**
 * `pmlake chain --out DIR [--from-block N] [--to-block N]`: writes every log of the venue's exchange contracts from
 * the Polygon node `PMLAKE_POLYGON_RPC_URL` into chain files in DIR (docs/chain-format.md), each block once it has
 * `PMLAKE_CHAIN_CONFIRMATIONS` on top, until SIGINT/SIGTERM (or until `--to-block` is written, then exit 0).
 */
export async function chainCommand(args: string[]): Promise<number> {
  if (args.includes('--help') || args.includes('-h')) {
    process.stdout.write(USAGE);
    return 0;
  }
  const parsed = parseChainArgs(args);
  if (typeof parsed === 'string') {
    process.stderr.write(`pmlake chain: ${parsed}\n${USAGE}`);
    return 2;
  }
  const config = loadConfig();
  const url = config.live.polygonRpcUrl;
  if (!url) {
    process.stderr.write('pmlake chain: PMLAKE_POLYGON_RPC_URL is not set: the Polygon JSON-RPC node to read logs from (an http(s) URL)\n');
    return 2;
  }
  const log = createLogger(config.logLevel);
  const fromBlock = parsed.fromBlock ?? config.live.chainFromBlock;
  const { indexer, startBlock } = await ChainIndexer.start(
    {
      rpcUrl: url,
      outDir: parsed.out,
      confirmations: config.live.chainConfirmations,
      maxRange: config.live.chainMaxRange,
      rotateSeconds: config.live.recordRotateSeconds,
      ...(fromBlock !== undefined ? { fromBlock } : {}),
      ...(parsed.toBlock !== undefined ? { toBlock: parsed.toBlock } : {}),
      log,
    },
    (f) => log.info({ file: f.name, from: f.from, to: f.to, blocks: f.blocks, logs: f.logs, lagBlocks: f.head - f.to }, 'chain file written'),
  ).catch((err: unknown) => {
    const code = (err as NodeJS.ErrnoException).code;
    if (code) throw new StartupError(`cannot use ${parsed.out}: ${(err as Error).message}`);
    throw err;
  });
  process.stdout.write(`pmlake chain: ${redact(url)} from block ${startBlock} into ${parsed.out}\n`);
  if (parsed.toBlock !== undefined) {
    const stopped = runUntilStopped(() => indexer.stop());
    const end = await Promise.race([indexer.done, stopped]);
    await indexer.stop();
    if (end === 'halted') log.error('a reorg deeper than the confirmations: stopped before --to-block');
    return end === 'complete' ? 0 : 1;
  }
  void indexer.done.then((end) => {
    if (end === 'halted') log.error('chain indexer halted on a reorg deeper than the confirmations; nothing more is written until an operator looks');
  });
  return runUntilStopped(() => indexer.stop());
}

/** A provider's key often sits in the URL (a long path segment, the query, credentials): the readiness line hides it. */
function redact(url: string): string {
  const u = new URL(url);
  const segments = u.pathname.split('/').map((s) => (s.length >= 20 ? '…' : s));
  return `${u.protocol}//${u.host}${segments.join('/')}${u.search ? '?…' : ''}`;
}
