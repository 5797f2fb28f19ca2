import fs from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { Recorder } from '../../src/record/recorder.js';
import { allLines, CLOSED_NAME, periodOfName, quietLog, readCaptures, tempDir, waitFor } from '../helpers/capture-files.js';
import { MiniVenue } from '../helpers/mini-venue.js';

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function setup(opts: {
  assets?: string[];
  discover?: () => Promise<string[]>;
  rotateSeconds?: number;
  max?: number;
  refreshSeconds?: number;
  pingSeconds?: number;
}) {
  const venue = await MiniVenue.start();
  cleanups.push(() => venue.close());
  const dir = tempDir('record');
  const recorder = await Recorder.start({
    url: venue.url,
    outDir: dir,
    recorderId: 'rec-a',
    rotateSeconds: opts.rotateSeconds ?? 60,
    ...(opts.assets ? { assets: opts.assets } : {}),
    ...(opts.discover ? { discoverAssets: opts.discover } : {}),
    refreshSeconds: opts.refreshSeconds ?? 600,
    maxAssetsPerConnection: opts.max ?? 500,
    pingSeconds: opts.pingSeconds ?? 10,
    log: quietLog,
  });
  let stopped = false;
  const stop = async () => {
    if (!stopped) await recorder.stop();
    stopped = true;
  };
  cleanups.push(stop);
  return { venue, dir, recorder, stop };
}

/** The frame texts of one connection, in file order. */
function framesOf(lines: ReturnType<typeof allLines>, conn: number): string[] {
  return lines.filter((l) => l.frame !== undefined && l.conn === conn).map((l) => l.frame!);
}

describe('pmlake record against a venue on a loopback socket', () => {
  it('writes every frame byte for byte, in order, with receive times, into files rotated at period boundaries', async () => {
    const assets = ['11', '22', '33'];
    const { venue, dir, recorder, stop } = await setup({ assets, rotateSeconds: 1, pingSeconds: 0.5 });
    await waitFor('the subscription', () => venue.open().length === 1 && venue.open()[0]!.assets.size === 3);
    const socket = venue.open()[0]!;
    expect(JSON.parse(socket.received[0]!)).toEqual({ assets_ids: assets, type: 'market', custom_feature_enabled: true });
    // Frames over more than two rotation periods, including one with non-ASCII text and escapes.
    const until = Date.now() + 2600;
    while (Date.now() < until) {
      venue.tick();
      await new Promise((r) => setTimeout(r, 15));
    }
    venue.send(socket, '{"event_type":"note","text":"Zürich ☂ \\u00e9 \\"q\\" tab\\t"}');
    venue.send(socket, 'not json at all');
    await waitFor('every frame received', () => recorder.stats().frames === socket.sent.length);
    await waitFor('PINGs', () => venue.pings >= 2);
    await stop();

    const files = readCaptures(dir);
    expect(fs.readdirSync(dir).filter((n) => n.startsWith('.open-'))).toEqual([]);
    expect(files.length).toBeGreaterThanOrEqual(3);
    const lines = allLines(files);
    // Byte for byte and in order: the frames of conn 0 are exactly the texts the venue sent (PONG not among them).
    expect(framesOf(lines, 0)).toEqual(socket.sent);
    expect(lines.some((l) => l.frame === 'PONG')).toBe(false);
    // Receive times never go back, and no frame was received before the venue sent it (one clock, one machine).
    for (let i = 1; i < lines.length; i++) expect(lines[i]!.recv_ms).toBeGreaterThanOrEqual(lines[i - 1]!.recv_ms);
    const frames = lines.filter((l) => l.frame !== undefined);
    frames.forEach((l, i) => expect(l.recv_ms).toBeGreaterThanOrEqual(socket.sentAt[i]!));
    const subscribed = lines.find((l) => l.event === 'subscribe')!;
    expect(subscribed).toMatchObject({ conn: 0, assets });
    const session = files[0]!.lines[0]!.session!;
    let prevPeriod = 0;
    for (const f of files) {
      const m = CLOSED_NAME.exec(f.name);
      expect(m?.[2]).toBe('rec-a');
      expect(m?.[3]).toBe(session.slice(0, 8));
      const period = periodOfName(f.name);
      expect(period % 1000).toBe(0);
      expect(period).toBeGreaterThan(prevPeriod);
      prevPeriod = period;
      const [start, ...rest] = f.lines;
      expect(start).toMatchObject({ event: 'start', format: 1, recorder: 'rec-a', session, url: venue.url });
      // Every line of a file lies in its period (the last file ends with the stop line, also inside its period).
      for (const l of f.lines) expect(Math.floor(l.recv_ms / 1000) * 1000).toBe(period);
      // A file opened once the connection was subscribed names its assets right after `start`.
      if (start!.recv_ms > subscribed.recv_ms) expect(rest[0]).toEqual({ recv_ms: start!.recv_ms, event: 'assets', conn: 0, assets });
    }
    expect(lines.at(-1)).toMatchObject({ event: 'stop' });
  });

  it('shards more than 500 assets over connections, fills the last one first, and records every connection', async () => {
    const first = Array.from({ length: 1203 }, (_, i) => String(100000 + i));
    const more = Array.from({ length: 300 }, (_, i) => String(200000 + i));
    let catalogue = first;
    const { venue, dir, recorder, stop } = await setup({ discover: async () => catalogue, refreshSeconds: 0.3 });
    await waitFor('three sockets subscribed', () => venue.open().length === 3 && venue.open().every((s) => s.assets.size > 0));
    expect(venue.sockets.map((s) => s.assets.size)).toEqual([500, 500, 203]);
    catalogue = [...first, ...more];
    await waitFor('the refreshed catalogue subscribed', () => venue.open().length === 4 && venue.sockets[3]!.assets.size === 3);
    // The last connection took 297 more with a later subscription; the rest opened a fourth.
    expect(JSON.parse(venue.sockets[2]!.received.find((t) => t.includes('"operation"'))!)).toEqual({ assets_ids: more.slice(0, 297), operation: 'subscribe' });
    expect(venue.sockets.map((s) => s.assets.size)).toEqual([500, 500, 500, 3]);
    const union = venue.sockets.flatMap((s) => [...s.assets]);
    expect(new Set(union).size).toBe(1503);
    venue.tick();
    const sent = venue.sockets.reduce((n, s) => n + s.sent.length, 0);
    await waitFor('every frame received', () => recorder.stats().frames === sent);
    expect(recorder.stats()).toMatchObject({ connections: 4, assets: 1503 });
    await stop();
    const lines = allLines(readCaptures(dir));
    // Each socket's texts are one connection's frames, in order (the socket's first asset names its connection).
    for (const s of venue.sockets) {
      const sub = lines.find((l) => l.event === 'subscribe' && l.assets!.includes([...s.assets][0]!));
      expect(framesOf(lines, sub!.conn!)).toEqual(s.sent);
    }
  });

  it('reconnects a dropped socket, resubscribes, gets fresh books, and writes an outage for exactly its assets', async () => {
    const { venue, dir, recorder, stop } = await setup({ assets: ['a1', 'a2', 'b1'], max: 2 });
    await waitFor('two sockets', () => venue.open().length === 2 && venue.open().every((s) => s.assets.size > 0));
    venue.tick();
    await waitFor('frames', () => recorder.stats().frames === 2 + 3);
    const lost = venue.sockets.find((s) => s.assets.has('a1'))!;
    venue.drop(lost.id);
    await waitFor('a third socket subscribed', () => venue.sockets.length === 3 && venue.sockets[2]!.assets.size === 2);
    const fresh = venue.sockets[2]!;
    expect(JSON.parse(fresh.received[0]!)).toEqual({ assets_ids: ['a1', 'a2'], type: 'market', custom_feature_enabled: true });
    venue.tick();
    const sent = venue.sockets.reduce((n, s) => n + s.sent.length, 0);
    await waitFor('every frame received', () => recorder.stats().frames === sent);
    await stop();
    const lines = allLines(readCaptures(dir));
    const disconnect = lines.findIndex((l) => l.event === 'disconnect');
    expect(lines[disconnect]).toMatchObject({ conn: 0 });
    const outages = lines.filter((l) => l.event === 'outage');
    expect(outages).toHaveLength(1);
    const outage = outages[0]!;
    expect(outage.assets).toEqual(['a1', 'a2']);
    const lastBefore = lines
      .slice(0, disconnect)
      .filter((l) => l.conn === 0 && l.frame !== undefined)
      .at(-1)!;
    const resub = lines.slice(disconnect).find((l) => l.event === 'subscribe' && l.conn === 0)!;
    expect(outage.from_ms).toBe(lastBefore.recv_ms);
    expect(outage.to_ms).toBe(resub.recv_ms);
    // The fresh socket's first frame is its books, recorded on the same connection after the outage.
    const after = lines.slice(lines.indexOf(outage)).filter((l) => l.conn === 0 && l.frame !== undefined);
    expect(after.map((l) => l.frame)).toEqual(fresh.sent);
    expect(JSON.parse(after[0]!.frame!).map((b: { event_type: string; asset_id: string }) => [b.event_type, b.asset_id])).toEqual([
      ['book', 'a1'],
      ['book', 'a2'],
    ]);
    expect(framesOf(lines, 0)).toEqual([...lost.sent, ...fresh.sent]);
  });

  it('treats a socket with no PONG for three ping periods as dead and reconnects', async () => {
    const { venue, dir, stop } = await setup({ assets: ['s1'], pingSeconds: 0.2 });
    venue.answerPings = false;
    await waitFor('a second socket after the silent one', () => venue.sockets.length >= 2 && venue.sockets[1]!.assets.size === 1);
    expect(venue.sockets[0]!.pings).toBeGreaterThanOrEqual(2);
    await stop();
    const lines = allLines(readCaptures(dir));
    expect(lines.find((l) => l.event === 'disconnect')).toMatchObject({ conn: 0, code: 1006, reason: 'no PONG for 0.6 s' });
    expect(lines.filter((l) => l.event === 'outage').map((l) => l.assets)).toEqual([['s1']]);
  });

  it('subscribes to a market announced by new_market at once and records it from its first message', async () => {
    const { venue, dir, recorder, stop } = await setup({ discover: async () => ['c1', 'c2'] });
    await waitFor('subscription', () => venue.open().length === 1 && venue.open()[0]!.assets.size === 2);
    // A token the venue cannot have (not a uint256) is not subscribed to.
    const announced = venue.announce(['9001', '9002', 'x'.repeat(300)], 'Will it snow in Zürich? ☃');
    await waitFor('the announced tokens subscribed', () => venue.open()[0]!.assets.size === 4);
    venue.tick();
    const s = venue.open()[0]!;
    await waitFor('every frame received', () => recorder.stats().frames === s.sent.length);
    await stop();
    const lines = allLines(readCaptures(dir));
    expect(framesOf(lines, 0)).toEqual(s.sent);
    expect(framesOf(lines, 0)).toContain(announced);
    // In the order things happened: the announcement, then its subscription.
    expect(lines.findIndex((l) => l.frame === announced)).toBeLessThan(lines.findIndex((l) => l.event === 'subscribe' && l.assets!.includes('9001')));
    expect(lines.filter((l) => l.event === 'subscribe').map((l) => l.assets)).toEqual([
      ['c1', 'c2'],
      ['9001', '9002'],
    ]);
    // Everything the venue sent about n1 (its book first) is in the file.
    const n1 = venue.sentFor('9001').map((x) => x.text);
    expect(JSON.parse(n1[1]!)[0]).toMatchObject({ event_type: 'book', asset_id: '9001' });
    for (const t of n1) expect(framesOf(lines, 0)).toContain(t);
  });

  it('with an empty catalogue listens on one connection and records the markets the venue announces', async () => {
    const { venue, dir, recorder, stop } = await setup({ discover: async () => [] });
    await waitFor('an empty subscription', () => venue.open().length === 1 && venue.open()[0]!.received.length === 1);
    expect(JSON.parse(venue.open()[0]!.received[0]!)).toEqual({ assets_ids: [], type: 'market', custom_feature_enabled: true });
    venue.announce(['8001', '8002'], 'first market');
    await waitFor('the announced tokens subscribed', () => venue.open()[0]!.assets.size === 2);
    venue.tick();
    const s = venue.open()[0]!;
    await waitFor('every frame received', () => recorder.stats().frames === s.sent.length);
    await stop();
    const lines = allLines(readCaptures(dir));
    expect(framesOf(lines, 0)).toEqual(s.sent);
    expect(lines.filter((l) => l.event === 'subscribe').map((l) => l.assets)).toEqual([[], ['8001', '8002']]);
  });

  it('retries an unreachable venue with backoff, without crashing, and records once it is up', async () => {
    const probe = await MiniVenue.start();
    const port = Number(new URL(probe.url).port);
    await probe.close();
    const dir = tempDir('record-down');
    const recorder = await Recorder.start({ url: `ws://127.0.0.1:${port}`, outDir: dir, recorderId: 'r', rotateSeconds: 60, assets: ['u1'], log: quietLog });
    cleanups.push(() => recorder.stop());
    const t0 = Date.now();
    await waitFor('three attempts', () => recorder.stats().reconnects >= 3);
    const elapsed = Date.now() - t0;
    // Without backoff a refused loopback connect retries hundreds of times a second.
    expect(recorder.stats().reconnects).toBeLessThan(4 + elapsed / 100);
    const venue = await MiniVenue.start(port);
    cleanups.push(() => venue.close());
    await waitFor('subscribed once the venue is up', () => venue.open().length === 1 && venue.open()[0]!.assets.size === 1, 40_000);
  });
});
