import fs from 'node:fs';
import path from 'node:path';
import type { Config } from '../config.js';
import type { LakeSession } from '../lake/session.js';
import type { Logger } from '../log.js';
import { liveMarketsQuery } from '../query/live-tokens.js';
import { ChainIndexer } from '../chain/indexer.js';
import { CataloguePoller } from '../poll/poller.js';
import { catalogueAssets } from '../record/catalogue-assets.js';
import { Recorder } from '../record/recorder.js';
import { Follower } from '../../ingest/follow.js';
import { blockAt } from '../../sim/generate/format.js';
import { SimulatedVenue, type SimMarket } from '../../sim/simulate/venue.js';
import { SimulatedCatalogue } from '../../sim/simulate/catalogue.js';
import { SimulatedChain } from '../../sim/simulate/chain.js';

/** At most this many of the lake's live markets trade on the demo's simulated venue. */
const LIVE_MARKETS = 24;
/** Level updates per second across the demo's markets: enough to move candles every minute, light on 2 cores. */
const LIVE_RATE = 400;
/** The demo's chain: a block every 2 s, like Polygon; fills settle on the V1 exchanges for a minute, then on V2. */
const BLOCK_MS = 2000;
const V1_BLOCKS = 30;
/** Few confirmations: the simulated chain never reorganises, and the demo should show fills within seconds. */
const CONFIRMATIONS = 2;

export type DemoLive = {
  captureDir: string;
  catalogueDir: string;
  chainDir: string;
  venueUrl: string;
  markets: number;
  rotateSeconds: number;
  followSeconds: number;
  catalogueSeconds: number;
  close(): Promise<void>;
};

function simMarket(r: Record<string, unknown>): SimMarket[] {
  const tokens = (r.tokens as unknown[] | null)?.map(String) ?? [];
  if (tokens.length !== 2) return [];
  const opt = (k: string): string | undefined => (r[k] === null || r[k] === undefined ? undefined : String(r[k]));
  return [
    {
      conditionId: String(r.condition_id),
      tokens: [tokens[0]!, tokens[1]!],
      tick: String(r.tick),
      id: opt('id'),
      question: opt('question'),
      slug: opt('slug'),
      eventId: opt('event_id'),
      seriesSlug: opt('series_id'),
      category: opt('category'),
    },
  ];
}

/**
 * `make demo`'s live input, in the demo's process: a simulated venue trading the lake's live markets over the real
 * protocol, serving their catalogue pages and a JSON-RPC node whose blocks settle its trades; the three roles of a
 * deployment against it (a recorder of the market channel, with assets from the lake's catalogue; a catalogue
 * poller; a chain indexer) and a following ingest of their three directories into the served lake, so the newest
 * candle moves on /charts and /v1/status shows each source's lag. Files go under `root/demo-live/`; the cadences are
 * `config.live`'s (the demo's own defaults: DEMO_LIVE_ENV in ./demo.ts).
 */
export async function startDemoLive(opts: { config: Config; log: Logger; lake: LakeSession; root: string }): Promise<DemoLive | null> {
  const { config, log, lake } = opts;
  const rows = await lake.rows(liveMarketsQuery(lake.sources, LIVE_MARKETS));
  // The simulated catalogue keeps a market's id only in increasing order (its keyset paging relies on id order).
  const markets = rows.flatMap(simMarket).sort((a, b) => Number(a.id ?? Infinity) - Number(b.id ?? Infinity));
  if (markets.length === 0) {
    log.warn('the demo lake has no live market: no live input');
    return null;
  }
  const { recordRotateSeconds: rotateSeconds, followSeconds, catalogueSeconds } = config.live;
  const dir = (name: string): string => {
    const d = path.join(opts.root, 'demo-live', name);
    fs.mkdirSync(d, { recursive: true });
    return d;
  };
  const captureDir = dir('capture');
  const catalogueDir = dir('catalogue');
  // Each demo run simulates a new chain (block numbers from the wall clock, so they only grow): the previous run's
  // chain files are landed already and would be another chain's cursor.
  fs.rmSync(path.join(opts.root, 'demo-live', 'chain'), { recursive: true, force: true });
  const chainDir = dir('chain');

  const seed = 20261126;
  const catalogue = new SimulatedCatalogue({ markets, seed });
  const startBlock = blockAt(Math.floor(Date.now() / 1000));
  const chain = new SimulatedChain({ blockMs: BLOCK_MS, startBlock, v2FromBlock: startBlock + V1_BLOCKS, seed });
  const venue = await SimulatedVenue.start({ markets, rate: LIVE_RATE, seed, onTrade: chain.trade, routes: [...catalogue.routes, chain.route] });
  chain.start();
  const recorder = await Recorder.start({
    url: venue.url,
    outDir: captureDir,
    recorderId: 'demo',
    rotateSeconds,
    discoverAssets: catalogueAssets(lake.db, config.lakeDir),
    log,
  });
  const poller = await CataloguePoller.start({
    outDir: catalogueDir,
    pollerId: 'demo',
    gammaUrl: `${venue.httpUrl}/gamma`,
    clobUrl: `${venue.httpUrl}/clob`,
    periodSeconds: catalogueSeconds,
    log,
  });
  const { indexer } = await ChainIndexer.start({
    rpcUrl: `${venue.httpUrl}/rpc`,
    outDir: chainDir,
    confirmations: CONFIRMATIONS,
    maxRange: config.live.chainMaxRange,
    rotateSeconds,
    fromBlock: startBlock,
    log,
  });
  const follower = await Follower.start({
    dirs: [captureDir, catalogueDir, chainDir],
    lakeDir: config.lakeDir,
    cycleSeconds: followSeconds,
    log,
    // Beside the server's own DuckDB in this process: the demo's cycles are small.
    memoryLimit: '1GB',
    threads: 1,
    snapshotSeconds: config.snapshotSeconds,
    graceSeconds: config.lakeGraceSeconds,
  });
  return {
    captureDir,
    catalogueDir,
    chainDir,
    venueUrl: venue.url,
    markets: markets.length,
    rotateSeconds,
    followSeconds,
    catalogueSeconds,
    // The roles first (their last files close), then the follower (its cycle in progress ends), then the venue.
    async close() {
      await recorder.stop();
      await poller.stop();
      await indexer.stop();
      await follower.stop();
      chain.stop();
      await venue.close();
    },
  };
}
