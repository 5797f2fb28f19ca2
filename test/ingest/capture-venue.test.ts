import path from 'node:path';
import { afterAll, expect, it } from 'vitest';
import { WebSocket } from 'ws';
import { runIngest } from '../../ingest/run.js';
import { SimulatedVenue, syntheticMarkets } from '../../sim/simulate/venue.js';
import { lakeRows, tempDir } from './oracle.js';
import { files } from '../helpers/lake-files.js';
import { captureText, rawRows, writeFile, type FrameLine, type Line } from './capture-util.js';

const tmp = tempDir('pmlake-capture-venue-');
afterAll(() => tmp.cleanup());

async function until(what: string, cond: () => boolean, ms = 20_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

const isFrame = (l: Line): l is FrameLine => !('event' in l);
const sees = (body: Line[], ...parts: string[]): boolean => body.some((l) => isFrame(l) && parts.every((p) => l.frame.includes(p)));

type Msg = { event_type?: string; bids?: unknown[]; asks?: unknown[]; price_changes?: unknown[] };

/** Level updates an ingest should land from the frames: a book's levels (an empty one a marker), price_change entries. */
function levels(frames: string[]): number {
  let n = 0;
  for (const f of frames) {
    for (const m of [JSON.parse(f) as Msg | Msg[]].flat()) {
      if (m.event_type === 'book') n += Math.max(1, (m.bids?.length ?? 0) + (m.asks?.length ?? 0));
      if (m.event_type === 'price_change') n += m.price_changes?.length ?? 0;
    }
  }
  return n;
}

it('frames of the simulated venue over its real protocol, written as a capture file, land byte for byte', async () => {
  const venue = await SimulatedVenue.start({ markets: syntheticMarkets(3, 4), rate: 3000, seed: 4 });
  const ws = new WebSocket(venue.url);
  const body: Line[] = [];
  try {
    await new Promise<void>((resolve, reject) => {
      ws.once('open', () => resolve());
      ws.once('error', reject);
    });
    ws.on('message', (d, binary) => {
      if (!binary) body.push({ recv_ms: Date.now(), conn: 0, frame: d.toString() });
    });
    const t0 = Date.now();
    const assets = syntheticMarkets(3, 4).flatMap((m) => m.tokens);
    ws.send(JSON.stringify({ assets_ids: assets, type: 'market', custom_feature_enabled: true }));
    body.push({ recv_ms: t0, event: 'subscribe', conn: 0, assets });
    await until('frames', () => body.length > 300);
    // A market created mid-stream: announced, subscribed, traded, resolved.
    const m = venue.addMarket();
    await until('new_market', () => sees(body, '"new_market"'));
    body.push({ recv_ms: Date.now(), event: 'subscribe', conn: 0, assets: m.tokens });
    ws.send(JSON.stringify({ assets_ids: m.tokens, operation: 'subscribe', custom_feature_enabled: true }));
    await until('its books', () => sees(body, m.tokens[0], '"book"'));
    venue.resolveMarket(m.conditionId, 1);
    await until('market_resolved', () => sees(body, '"market_resolved"'));
    ws.close();
    await until('closed', () => ws.readyState === WebSocket.CLOSED);

    const dir = path.join(tmp.dir, 'rec');
    writeFile(dir, 'market-x-sim-00000000.capture.jsonl', captureText('sim', 's1', [{ conn: 0, assets: [] }], body, t0));
    const lake = path.join(tmp.dir, 'lake');
    const r = await runIngest([dir], { lakeDir: lake });
    expect(r.issues).toEqual([]);
    expect(r.counts.msg_new_market).toBe(1);
    expect(r.counts.msg_market_resolved).toBe(1);
    const frames = body.filter(isFrame);
    expect(await rawRows(lake)).toEqual(frames.map((f) => [f.recv_ms, f.frame]));
    const l2 = await lakeRows(`SELECT count(*) AS n FROM read_parquet(${files(lake, 'l2')})`);
    expect(Number(l2[0]!.n)).toBe(levels(frames.map((f) => f.frame)));
  } finally {
    ws.terminate();
    await venue.close();
  }
});
