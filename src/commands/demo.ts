import type { LakeSession } from '../lake/session.js';
import { busiestMarketQuery } from '../query/markets.js';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadConfig, type Config } from '../config.js';
import { createLogger, type Logger } from '../log.js';
import { startServer } from '../server.js';
import { runIngest } from '../../ingest/run.js';
import { ingestSummaryText } from '../../ingest/issues.js';
import { GENERATOR, generate } from '../../sim/generate/index.js';
import { runUntilStopped } from './until-stopped.js';
import { startDemoLive } from './demo-live.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');

/**
 * The demo's generated history: small enough to build in seconds, spanning the Sept-2025 price_change shape change.
 * A few known capture faults (sim/generate/faults.ts, seeded: the same every build) give the tape's coverage
 * something to show: about one price_change in 2,000 lost (degraded days) and a 10-minute capture silence
 * (a disconnect: unverified until each token's next book). The truth is in demo-data/faults.json.
 */
const DEMO_SILENCE = '2025-09-15T12:00:00Z';
const DEMO_GENERATOR = {
  markets: 40,
  days: 14,
  seed: 20250915,
  busy: 2,
  options: true,
  start: '2025-09-08',
  faults: { dropRate: 0.0005, silences: [{ fromMs: Date.parse(DEMO_SILENCE), seconds: 600 }], duplicates: 0, crossed: 0 },
};

/**
 * The demo's own defaults under the environment's: its live input cuts and lands every 5 s and polls the catalogue
 * every minute, so a visitor does not wait a production minute (PMLAKE_RECORD_ROTATE_SECONDS=60) for the first live
 * candle, nor five (PMLAKE_CATALOGUE_SECONDS=300) for the second poll.
 */
const DEMO_LIVE_ENV = { PMLAKE_RECORD_ROTATE_SECONDS: '5', PMLAKE_FOLLOW_SECONDS: '5', PMLAKE_CATALOGUE_SECONDS: '60' };

/**
 * `make demo`: builds the demo lake (the real venue captures in test/fixtures/venue plus generated history),
 * keeps exports in the local store under PMLAKE_STATE unless PMLAKE_S3_ENDPOINT is set, creates a professional and a free
 * API key, turns on the local payment provider (its checkout page confirms without any payment: a demo
 * convenience that a plain `serve` never has unless PMLAKE_PAYMENT_PROVIDER says so), serves on $PORT and
 * prints how to call it. Re-running is cheap: the generator output is kept and
 * the ingest ledger skips inputs it has already landed.
 */
export async function demoCommand(_args: string[]): Promise<number> {
  void _args;
  const base = loadConfig({ ...DEMO_LIVE_ENV, ...process.env });
  const log = createLogger(base.logLevel);
  const out = process.stdout;

  await buildDemoLake(base, log, out);

  // The demo sells credits through the local test provider unless the operator chose one explicitly.
  const config: Config = process.env.PMLAKE_PAYMENT_PROVIDER
    ? base
    : Object.freeze({ ...base, payments: Object.freeze({ ...base.payments, provider: 'local' as const }) });
  // Exports: without PMLAKE_S3_ENDPOINT the server keeps them in its local store, behind its own signed links.

  const running = await startServer(config, log);
  const store = running.ctx.state;
  const proUser = await store.upsertUser('demo-pro@pmlake.local', 'professional');
  const freeUser = await store.upsertUser('demo-free@pmlake.local', 'free');
  const proKey = (await store.createApiKey({ userId: proUser.id, name: 'demo professional', prefix: config.keyPrefix })).plaintext;
  const freeKey = (await store.createApiKey({ userId: freeUser.id, name: 'demo free', prefix: config.keyPrefix })).plaintext;
  const market = await busiestMarket(running.ctx.lakeSession());

  out.write(`\npmlake listening on ${running.url}\n`);
  out.write(`  professional key: ${proKey}\n  free key:         ${freeKey}\n`);
  out.write(`  docs:             ${running.url}/docs\n`);
  out.write(`  charts:           ${running.url}/charts (type the professional key into the page)\n`);
  out.write(
    `  payments:         ${config.payments.provider}${config.payments.provider === 'local' ? ' (test provider: its checkout page credits without payment)' : ''}\n`,
  );
  if (market) {
    out.write(`  candles:          curl -s -H 'X-API-Key: ${proKey}' '${running.url}/v1/trades/ohlcv?market_id=${market}&timeframe=1h&limit=5'\n`);
    // The tape's coverage: per day and outcome, verified by the venue's own book messages or not.
    out.write(`  tape coverage:    curl -s -H 'X-API-Key: ${proKey}' '${running.url}/v1/markets/${market}/coverage'\n`);
    out.write(`  venue coverage:   curl -s -H 'X-API-Key: ${proKey}' '${running.url}/v1/coverage?date=${DEMO_SILENCE.slice(0, 10)}'\n`);
    const day = DEMO_SILENCE.slice(0, 10);
    out.write(
      `  replay:           curl -s -H 'X-API-Key: ${proKey}' '${running.url}/v1/replay/normalized?market_id=${market}&from=${day}T08:00:00Z&to=${day}T08:05:00Z&data_types=quote,trade,book_snapshot_5_1m'\n`,
    );
    out.write(
      `                    and the venue's own protocol at ${running.url.replace(/^http/, 'ws')}/v1/replay/ws/market?from=…&to=…&speed=60&api_key=… (${running.url}/docs)\n`,
    );
  }
  const live = await startDemoLive({ config, log, lake: running.ctx.lakeSession(), root: ROOT });
  if (live) {
    const rel = (d: string): string => `${path.relative(ROOT, d)}/`;
    out.write(
      `  live input:       a simulated venue (${live.venueUrl}, ${live.markets} markets: market channel, catalogue pages, JSON-RPC node)\n` +
        `                    → pmlake record → ${rel(live.captureDir)}, pmlake catalogue every ${live.catalogueSeconds} s → ${rel(live.catalogueDir)},\n` +
        `                      pmlake chain → ${rel(live.chainDir)} → ingest --follow every ${live.followSeconds} s\n`,
    );
    out.write(`  freshness:        curl -s '${running.url}/v1/status'   (each source's newest landed time and lag: tape, catalogue, chain)\n`);
    if (market) out.write(`  definitions:      curl -s -H 'X-API-Key: ${proKey}' '${running.url}/v1/markets/${market}/changes'\n`);
  }
  return runUntilStopped(async () => {
    await live?.close();
    await running.close();
  });
}

/**
 * The demo lake: the real venue captures plus the generated history (kept in demo-data/ once generated; the
 * ingest ledger skips what is already landed). Also `make cluster`'s lake (scripts/cluster.ts).
 */
export async function buildDemoLake(config: Pick<Config, 'lakeDir' | 'snapshotSeconds'>, log: Logger, out: NodeJS.WritableStream): Promise<void> {
  const dataDir = path.join(ROOT, 'demo-data');
  if (generatedBy(path.join(dataDir, 'manifest.json')) !== GENERATOR) {
    // Data of an older generator (or none) is generated again (demo-data/ is the demo's own directory).
    fs.rmSync(dataDir, { recursive: true, force: true });
    out.write(`generating demo history into ${dataDir} ...\n`);
    await generate({ ...DEMO_GENERATOR, out: dataDir });
  }
  out.write(`ingesting real venue captures and demo history into ${config.lakeDir} ...\n`);
  const report = await runIngest([path.join(ROOT, 'test', 'fixtures', 'venue'), dataDir], {
    lakeDir: config.lakeDir,
    snapshotSeconds: config.snapshotSeconds,
    log,
    progress: true,
  });
  out.write(ingestSummaryText('ingest', report));
}

function generatedBy(manifest: string): string | null {
  try {
    return String((JSON.parse(fs.readFileSync(manifest, 'utf8')) as { generator?: unknown }).generator);
  } catch {
    return null;
  }
}

/** The market with the most trades, so the printed curl line returns candles. */
export async function busiestMarket(lake: LakeSession): Promise<string | null> {
  const row = await lake.one(busiestMarketQuery(lake.sources));
  return row ? String(row.id) : null;
}
