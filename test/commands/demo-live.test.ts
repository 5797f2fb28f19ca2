import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generate } from '../../sim/generate/index.js';
import { runIngest } from '../../ingest/run.js';
import { startDemoLive, type DemoLive } from '../../src/commands/demo-live.js';
import { createLogger } from '../../src/log.js';
import type { RunningServer } from '../../src/server.js';
import { startTestServer, tempDir, testConfig } from '../helpers/server.js';

/**
 * `make demo`'s live input: over a served lake of generated history, the simulated venue trades the lake's live
 * markets, serves their catalogue and settles their trades on its chain; the recorder, the catalogue poller and the
 * chain indexer write their files and the follower lands them, so the served version moves on: its tape time, the
 * live markets' data_to and their newest 1m candle, trades from the chain, each source in /v1/status, a polled
 * definition per live market — read from the running server.
 */
describe('demo live input', () => {
  const tmp = tempDir('pmlake-demo-live-');
  let srv: RunningServer;
  let live: DemoLive | null = null;
  const started = Date.now();

  beforeAll(async () => {
    const lakeDir = path.join(tmp.dir, 'lake');
    const gen = path.join(tmp.dir, 'gen');
    await generate({ markets: 12, days: 2, seed: 11, out: gen, workers: 0, rate: 0.3 });
    await runIngest([gen], { lakeDir, threads: 2 });
    // The demo's own cadence (src/commands/demo.ts DEMO_LIVE_ENV is 5 s); shorter here.
    const config = testConfig({
      PMLAKE_LAKE: lakeDir,
      PMLAKE_STATE: path.join(tmp.dir, 'state'),
      PMLAKE_RECORD_ROTATE_SECONDS: '2',
      PMLAKE_FOLLOW_SECONDS: '2',
      PMLAKE_CATALOGUE_SECONDS: '3',
    });
    srv = await startTestServer(config);
    live = await startDemoLive({ config, log: createLogger('silent'), lake: srv.ctx.lakeSession(), root: tmp.dir });
  }, 120_000);

  afterAll(async () => {
    await live?.close();
    await srv?.close();
    tmp.cleanup();
  });

  it('lands the simulated venue into the served lake: the tape time, data_to and the newest candle move', async () => {
    expect(live).not.toBeNull();
    const status = async (): Promise<{ sources?: { name: string; newest_landed_at: string | null; lag_seconds: number | null }[] }> =>
      (await fetch(`${srv.url}/v1/status`)).json() as Promise<{ sources?: { name: string; newest_landed_at: string | null; lag_seconds: number | null }[] }>;
    const tapeAt = async (): Promise<number> => {
      const tape = (await status()).sources?.find((s) => s.name === 'tape');
      return tape?.newest_landed_at ? Date.parse(tape.newest_landed_at) : 0;
    };
    // The generated history ends before this test started; the live tape lands after it.
    const deadline = Date.now() + 90_000;
    let first = 0;
    while (Date.now() < deadline && first < started) {
      await new Promise((r) => setTimeout(r, 500));
      first = await tapeAt();
    }
    expect(first).toBeGreaterThanOrEqual(started);
    let second = first;
    while (Date.now() < deadline && second <= first) {
      await new Promise((r) => setTimeout(r, 500));
      second = await tapeAt();
    }
    expect(second).toBeGreaterThan(first);

    // The chain's fills are the live trades; the catalogue's polls are the live markets' definitions.
    while (Date.now() < deadline) {
      const names = ((await status()).sources ?? []).filter((s) => s.newest_landed_at !== null && Date.parse(s.newest_landed_at) >= started - 5000);
      if (names.length === 3) break;
      await new Promise((r) => setTimeout(r, 500));
    }
    const sources = (await status()).sources ?? [];
    expect(sources.map((s) => s.name)).toEqual(['tape', 'catalogue', 'chain']);
    for (const s of sources) expect(Date.parse(s.newest_landed_at ?? ''), s.name).toBeGreaterThanOrEqual(started - 5000);
    // The live markets' catalogue rows and candles (from the chain's fills) reach into the live period.
    const lake = srv.ctx.lakeSession();
    const rows = await lake.rows({
      sql: `SELECT max(data_to) AS data_to FROM ${lake.sources.from('markets')} WHERE NOT coalesce(closed, false)`,
      params: {},
    });
    expect(new Date(String(rows[0]!.data_to)).getTime()).toBeGreaterThanOrEqual(started - 1000);
    const candles = await lake.rows({ sql: `SELECT max(bucket) AS b FROM ${lake.sources.from('candles_1m')}`, params: {} });
    expect(new Date(String(candles[0]!.b)).getTime()).toBeGreaterThanOrEqual(Math.floor(started / 60_000) * 60_000);

    const now = srv.ctx.lakeSession();
    const trades = await now.rows({
      sql: `SELECT count(*) AS n, count(DISTINCT token_id) AS tokens FROM ${now.sources.from('trades')} WHERE ts >= make_timestamp($t::BIGINT * 1000)`,
      params: { t: started - 5000 },
    });
    expect(Number(trades[0]!.n)).toBeGreaterThan(0);
    const defs = await now.rows({ sql: `SELECT count(DISTINCT condition_id) AS n FROM ${now.sources.from('market_definitions')}`, params: {} });
    expect(Number(defs[0]!.n)).toBe(live!.markets);
  }, 150_000);
});
