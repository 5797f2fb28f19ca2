import { parseArgs } from 'node:util';
import { z } from 'zod';
import { loadConfig } from '../config.js';
import { createLogger } from '../log.js';
import { SimulatedVenue, syntheticMarkets } from '../../ingest/simulate/venue.js';
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
 * `pmlake simulate --port P`: the simulated venue's market channel on ws://HOST:P/ws/market (ingest/README.md,
 * "Simulated venue") until SIGINT/SIGTERM, logging its counters every 10 s.
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
  const venue = await SimulatedVenue.start({ host, port, markets: syntheticMarkets(markets, seed), rate, seed });
  log.info({ url: venue.url, markets, rate, seed }, 'simulated venue listening');
  process.stdout.write(`pmlake simulate: ${venue.url} (${markets} markets, ${rate} level updates/s on subscribed assets)\n`);
  let prev = venue.stats();
  const timer = setInterval(() => {
    const now = venue.stats();
    const perSecond = (now.levelUpdates - prev.levelUpdates) / (STATS_EVERY_MS / 1000);
    const mem = process.memoryUsage();
    log.info(
      { ...now, levelUpdatesPerSecond: Math.round(perSecond), rssMB: Math.round(mem.rss / 2 ** 20), heapMB: Math.round(mem.heapUsed / 2 ** 20) },
      'simulated venue',
    );
    prev = now;
  }, STATS_EVERY_MS);
  return runUntilStopped(async () => {
    clearInterval(timer);
    await venue.close();
    log.info(venue.stats(), 'simulated venue stopped');
  });
}
