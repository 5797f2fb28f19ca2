import { ClobMarketClient } from 'polymarket-websocket-client';
import { WebSocket } from 'ws';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningServer } from '../../src/server.js';
import { d6, replay as replayBooks, type Msg } from '../ingest/oracle.js';
import { tempDir } from '../helpers/server.js';
import { assetsOf, fixtureFrames, fixtureReplayServer, proUser } from './replay-util.js';

/**
 * A client of the venue's market channel pmlake did not write (npm `polymarket-websocket-client`, its URL set by
 * its `url` option), connected to the replay unchanged. It uses the platform's WebSocket (Node 22 has one; on
 * older Node the `ws` class stands in, same interface). It drops frames that are JSON arrays (on the venue too),
 * so it sees the replay's rebuilt books (one message a frame) and the single-message frames.
 */
const tmp = tempDir('pmlake-replay-3p-');
let srv: RunningServer;
let key: string;
const frames = fixtureFrames();
const DAY_TO = Date.parse('2025-03-03T00:00:00Z');
const day = frames.filter((f) => f.recvMs < DAY_TO);
const assets = [...new Set(day.flatMap((f) => f.msgs.flatMap(assetsOf)))];

beforeAll(async () => {
  const g = globalThis as { WebSocket?: unknown };
  g.WebSocket ??= WebSocket;
  ({ srv } = await fixtureReplayServer(tmp.dir));
  ({ key } = await proUser(srv, 'third@example.com'));
}, 60_000);

afterAll(async () => {
  await srv?.close();
  tmp.cleanup();
});

describe('a third-party venue client on the replay', () => {
  it('receives the books at `from` (equal to a plain replay) and the recorded trade prints', async () => {
    const arrays = day.filter((f) => f.text.trimStart().startsWith('['));
    const from = arrays[20]!.recvMs;
    const url = `${srv.url.replace('http', 'ws')}/v1/replay/ws/market?from=${new Date(from).toISOString()}&to=${new Date(DAY_TO).toISOString()}&speed=0&api_key=${key}`;
    const client = new ClobMarketClient({ url, autoReconnect: false });
    const books: Msg[] = [];
    const trades: Msg[] = [];
    client.onBook((b: unknown) => books.push(b as Msg));
    client.onLastTradePrice((t: unknown) => trades.push(t as Msg));
    client.subscribe(assets);
    const closed = new Promise<{ code: number }>((resolve) => client.on('disconnected', (e: { code: number }) => resolve(e)));
    await client.connect();
    expect((await closed).code).toBe(1000);

    const want = replayBooks(day.filter((f) => f.recvMs < from).flatMap((f) => f.msgs));
    expect(books.length).toBeGreaterThan(3);
    expect(new Set(books.map((b) => b.asset_id))).toEqual(new Set([...want.keys()].filter((a) => assets.includes(a))));
    const side = (levels: unknown): Map<string, string> => new Map((levels as { price: string; size: string }[]).map((l) => [d6(l.price), d6(l.size)]));
    for (const b of books) {
      expect(b.hash).toBe('pmlake-rebuilt');
      expect(side(b.bids)).toEqual(want.get(String(b.asset_id))!.bids);
      expect(side(b.asks)).toEqual(want.get(String(b.asset_id))!.asks);
    }
    const prints = day.filter((f) => f.recvMs >= from && !f.text.trimStart().startsWith('[')).flatMap((f) => f.msgs);
    expect(trades.length).toBeGreaterThan(10);
    expect(trades).toEqual(prints.filter((m) => m.event_type === 'last_trade_price'));
  });
});
