import { parseArgs } from 'node:util';
import { z } from 'zod';
import { loadConfig } from '../config.js';
import { createLogger } from '../log.js';
import { blockAt } from '../../sim/generate/format.js';
import { SimulatedCatalogue } from '../../sim/simulate/catalogue.js';
import { SimulatedChain } from '../../sim/simulate/chain.js';
import { SimulatedVenue, syntheticMarkets } from '../../sim/simulate/venue.js';
import { runUntilStopped } from './until-stopped.js';

const USAGE = 'usage: pmlake simulate --port P [--host H] [--markets N] [--rate X] [--seed S]\n';

const Args = z.object({
  port: z.coerce.number().int().min(0).max(65_535),
  host: z.string().min(1).default('127.0.0.1'),
  markets: z.coerce.number().int().min(1).max(10_000).default(50),
  rate: z.coerce.number().min(0).max(10_000_000).default(2_000),
  seed: z.coerce
    .number()
    .int()
    .min(0)
    .max(2 ** 31 - 1)
    .default(1),
});

const STATS_EVERY_MS = 10_000;

/**
 * `pmlake simulate --port P`: the simulated venue (ingest/README.md, "Simulated venue") until SIGINT/SIGTERM, logging
 * its counters every 10 s: the market channel on ws://HOST:P/ws/market, the catalogue pages under http://HOST:P/gamma
 * and /clob, and a JSON-RPC node at http://HOST:P/rpc whose blocks (one every 2 s, numbered from the wall clock)
 * settle the printed trades as exchange logs — V2 from the start, as the venue is since 2026-04-28.
 */
export async function simulateCommand(args: string[]): Promise<number> {
  let values: Record<string, string | boolean | undefined>;
  try {
    values = parseArgs({
      args,
      options: { port: { type: 'string' }, host: { type: 'string' }, markets: { type: 'string' }, rate: { type: 'string' }, seed: { type: 'string' } },
      strict: true,
    }).values;
  } catch (err) {
    process.stderr.write(`${(err as Error).message}\n${USAGE}`);
    return 2;
  }
  const parsed = Args.safeParse(values);
  if (!parsed.success) {
    process.stderr.write(`${parsed.error.issues.map((i) => `--${i.path.join('.')}: ${i.message}`).join('\n')}\n${USAGE}`);
    return 2;
  }
  const { port, host, markets, rate, seed } = parsed.data;
  const log = createLogger(loadConfig().logLevel);
  const list = syntheticMarkets(markets, seed);
  const catalogue = new SimulatedCatalogue({ markets: list, seed });
  const chain = new SimulatedChain({ startBlock: blockAt(Math.floor(Date.now() / 1000)), seed });
  const venue = await SimulatedVenue.start({ host, port, markets: list, rate, seed, onTrade: chain.trade, routes: [...catalogue.routes, chain.route] });
  chain.start();
  const urls = { gamma: `${venue.httpUrl}/gamma`, clob: `${venue.httpUrl}/clob`, rpc: `${venue.httpUrl}/rpc` };
  log.info({ url: venue.url, ...urls, markets, rate, seed }, 'simulated venue listening');
  // Readiness lines: the market channel first (what scripts wait for), then what to point the other roles at.
  process.stdout.write(`pmlake simulate: ${venue.url} (${markets} markets, ${rate} level updates/s on subscribed assets)\n`);
  process.stdout.write(`pmlake simulate: PMLAKE_GAMMA_URL=${urls.gamma} PMLAKE_CLOB_URL=${urls.clob} PMLAKE_POLYGON_RPC_URL=${urls.rpc}\n`);
  let prev = venue.stats();
  const timer = setInterval(() => {
    const now = venue.stats();
    const perSecond = (now.levelUpdates - prev.levelUpdates) / (STATS_EVERY_MS / 1000);
    const mem = process.memoryUsage();
    log.info(
      {
        ...now,
        block: chain.head,
        levelUpdatesPerSecond: Math.round(perSecond),
        rssMB: Math.round(mem.rss / 2 ** 20),
        heapMB: Math.round(mem.heapUsed / 2 ** 20),
      },
      'simulated venue',
    );
    prev = now;
  }, STATS_EVERY_MS);
  return runUntilStopped(async () => {
    clearInterval(timer);
    chain.stop();
    await venue.close();
    log.info(venue.stats(), 'simulated venue stopped');
  });
}
