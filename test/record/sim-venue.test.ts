import fs from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { SimulatedVenue, syntheticMarkets } from '../../sim/simulate/venue.js';
import { Recorder } from '../../src/record/recorder.js';
import { allLines, quietLog, readCaptures, tempDir, waitFor, type CaptureLine } from '../helpers/capture-files.js';

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

/** Connection 0's frames, one list per socket: a `disconnect` line starts the next socket's list. */
function framesBySocket(lines: CaptureLine[]): string[][] {
  const out: string[][] = [[]];
  for (const l of lines) {
    if (l.event === 'disconnect' && l.conn === 0) out.push([]);
    else if (l.frame !== undefined && l.conn === 0) out.at(-1)!.push(l.frame);
  }
  return out;
}

/** Every complete line written so far, the open file's included (read while the recorder runs). */
function linesSoFar(dir: string): CaptureLine[] {
  try {
    return readAll(dir);
  } catch {
    return []; // a file renamed between the listing and the read: the next poll sees it
  }
}

function readAll(dir: string): CaptureLine[] {
  const names = fs.readdirSync(dir).filter((n) => n.endsWith('.capture.jsonl'));
  const closed = names.filter((n) => n.startsWith('market-')).sort();
  const texts = [...closed, ...names.filter((n) => n.startsWith('.open-'))].map((n) => fs.readFileSync(path.join(dir, n), 'utf8'));
  return texts.flatMap((t) =>
    t
      .slice(0, t.lastIndexOf('\n') + 1)
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as CaptureLine),
  );
}

describe('pmlake record against the simulated venue', () => {
  it('records what the venue sends byte for byte, follows a new market, and survives the venue dropping every socket', async () => {
    const markets = syntheticMarkets(20, 11);
    const venue = await SimulatedVenue.start({ markets, rate: 3000, keepSent: true, seed: 3 });
    cleanups.push(() => venue.close());
    const assets = markets.flatMap((m) => m.tokens);
    const dir = tempDir('record-sim');
    const recorder = await Recorder.start({
      url: venue.url,
      outDir: dir,
      recorderId: 'sim',
      rotateSeconds: 1,
      discoverAssets: async () => assets,
      log: quietLog,
    });
    let stopped = false;
    cleanups.push(async () => {
      if (!stopped) await recorder.stop();
    });
    await waitFor('frames flowing', () => recorder.stats().frames > 300);
    const added = venue.addMarket();
    await waitFor('the new market subscribed', () => venue.stats().subscribedAssets === assets.length + 2);
    await waitFor('the new market trading', () => venue.sent().some((f) => f.conn === 1 && f.text.includes(added.tokens[0]) && !f.text.includes('new_market')));
    venue.dropAll();
    await waitFor('a second socket', () => venue.sent().some((f) => f.conn === 2));
    // Everything the second socket was sent by now, and then some, reaches the files before the stop.
    const target = venue.sent().filter((f) => f.conn === 2).length + 200;
    await waitFor('the second socket recorded', () => venue.sent().filter((f) => f.conn === 2).length >= target);
    const upTo = venue.sent().filter((f) => f.conn === 2).length;
    await waitFor('written', () => (framesBySocket(linesSoFar(dir))[1]?.length ?? 0) >= upTo);
    stopped = true;
    await recorder.stop();

    const lines = allLines(readCaptures(dir));
    const [first, second, ...rest] = framesBySocket(lines);
    expect(rest).toEqual([]);
    const sent1 = venue
      .sent()
      .filter((f) => f.conn === 1)
      .map((f) => f.text);
    const sent2 = venue
      .sent()
      .filter((f) => f.conn === 2)
      .map((f) => f.text);
    // Each socket's frames are what the venue sent it, in order: all of it up to the drop (bytes the drop cut
    // in flight are the venue's loss), and the second socket's up to the stop.
    expect(first).toEqual(sent1.slice(0, first!.length));
    expect(second).toEqual(sent2.slice(0, second!.length));
    expect(second!.length).toBeGreaterThanOrEqual(upTo);
    // The new market: announced, subscribed right after, its book among the first socket's frames.
    const announce = lines.findIndex((l) => l.frame?.includes('"new_market"'));
    const sub = lines.findIndex((l) => l.event === 'subscribe' && l.assets!.includes(added.tokens[0]));
    expect(announce).toBeGreaterThanOrEqual(0);
    expect(sub).toBeGreaterThan(announce);
    // The drop: one outage for every asset of the connection, resubscribed with fresh books.
    const outages = lines.filter((l) => l.event === 'outage');
    expect(outages).toHaveLength(1);
    expect([...outages[0]!.assets!].sort()).toEqual([...assets, ...added.tokens].sort());
    const books = JSON.parse(second![0]!) as { event_type: string; asset_id: string }[];
    expect(books.every((b) => b.event_type === 'book')).toBe(true);
    expect(new Set(books.map((b) => b.asset_id)).size).toBe(assets.length + 2);
  });

  it('keeps under the venue 500-asset limit: 600 tokens over two connections, none refused', async () => {
    const markets = syntheticMarkets(300, 12);
    const venue = await SimulatedVenue.start({ markets, rate: 2000, keepSent: true, seed: 4 });
    cleanups.push(() => venue.close());
    const assets = markets.flatMap((m) => m.tokens);
    const dir = tempDir('record-sim-shard');
    const recorder = await Recorder.start({ url: venue.url, outDir: dir, recorderId: 'sim', rotateSeconds: 60, assets, log: quietLog });
    cleanups.push(() => recorder.stop());
    await waitFor('every asset subscribed', () => venue.stats().subscribedAssets === 600);
    expect(venue.stats().connections).toBe(2);
    await waitFor('frames on both connections', () => new Set(venue.sent().map((f) => f.conn)).size === 2 && recorder.stats().frames > 100);
    expect(venue.sent().filter((f) => f.text === 'INVALID OPERATION')).toEqual([]);
    expect(recorder.stats()).toMatchObject({ connections: 2, assets: 600 });
  });
});
