import fs from 'node:fs';
import path from 'node:path';
import type { Config } from '../config.js';
import type { LakeSession } from '../lake/session.js';
import type { Logger } from '../log.js';
import { liveMarketsQuery } from '../query/live-tokens.js';
import { catalogueAssets } from '../record/catalogue-assets.js';
import { Recorder } from '../record/recorder.js';
import { Follower } from '../../ingest/follow.js';
import { SimulatedVenue, type SimMarket } from '../../ingest/simulate/venue.js';
import { SimulatedSettlement } from '../../ingest/simulate/settlement.js';

/** At most this many of the lake's live markets trade on the demo's simulated venue. */
const LIVE_MARKETS = 24;
/** Level updates per second across the demo's markets: enough to move candles every minute, light on 2 cores. */
const LIVE_RATE = 400;

export type DemoLive = {
  captureDir: string;
  chainDir: string;
  venueUrl: string;
  markets: number;
  rotateSeconds: number;
  followSeconds: number;
  close(): Promise<void>;
};

/**
 * `make demo`'s live input, in the demo's process: a simulated venue trading the lake's live markets over the real
 * protocol, a recorder of it (assets from the lake's catalogue, as `pmlake record` finds them) and a following
 * ingest into the served lake, so the newest candle moves on /charts. Files go under `root/demo-live/`; the
 * rotation and the cycle are `config.live`'s (the demo's own defaults: DEMO_LIVE_ENV in ./demo.ts).
 */
export async function startDemoLive(opts: { config: Config; log: Logger; lake: LakeSession; root: string }): Promise<DemoLive | null> {
  const { config, log, lake } = opts;
  const rows = await lake.rows(liveMarketsQuery(lake.sources, LIVE_MARKETS));
  const markets: SimMarket[] = rows.flatMap((r) => {
    const tokens = (r.tokens as unknown[] | null)?.map(String) ?? [];
    return tokens.length === 2 ? [{ conditionId: String(r.condition_id), tokens: [tokens[0]!, tokens[1]!] as [string, string], tick: String(r.tick) }] : [];
  });
  if (markets.length === 0) {
    log.warn('the demo lake has no live market: no live input');
    return null;
  }
  const rotateSeconds = config.live.recordRotateSeconds;
  const followSeconds = config.live.followSeconds;
  const captureDir = path.join(opts.root, 'demo-live', 'capture');
  fs.mkdirSync(captureDir, { recursive: true });
  // Candles come from on-chain fills, not from the tape: until the chain indexer exists, the simulated venue's
  // trades settle into fills files of their own, which the follower lands beside the capture.
  const chainDir = path.join(opts.root, 'demo-live', 'chain');
  const settlement = new SimulatedSettlement(chainDir, rotateSeconds, 20261126);
  const venue = await SimulatedVenue.start({ markets, rate: LIVE_RATE, seed: 20261126, onTrade: settlement.trade });
  const recorder = await Recorder.start({
    url: venue.url,
    outDir: captureDir,
    recorderId: 'demo',
    rotateSeconds,
    discoverAssets: catalogueAssets(lake.db, config.lakeDir),
    log,
  });
  const follower = await Follower.start({
    dirs: [captureDir, chainDir],
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
    chainDir,
    venueUrl: venue.url,
    markets: markets.length,
    rotateSeconds,
    followSeconds,
    // The recorder first (its last file closes), then the follower (its cycle in progress ends), then the venue.
    async close() {
      await recorder.stop();
      await venue.close();
      settlement.close();
      await follower.stop();
    },
  };
}
