import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PLANS } from '../../src/accounts/plans.js';
import type { RunningServer } from '../../src/server.js';
import { insertPull, listPulls } from '../../src/state/pulls.js';
import { d6, replay as replayBooks, type Msg } from '../ingest/oracle.js';
import { tempDir } from '../helpers/server.js';
import { replayServerOf } from '../../src/http/replay/index.js';
import { assetsOf, connect, fixtureFrames, fixtureReplayServer, proUser, refusal, until } from './replay-util.js';

/**
 * Replay is metered like a download: the bytes sent are recorded once, a refused replay costs nothing, and the
 * plan's fair use left bounds the window. Also: a subscription added mid-stream gets its book where the replay is.
 */
const tmp = tempDir('pmlake-replay-meter-');
let srv: RunningServer;
let ws: string;
const frames = fixtureFrames();
const DAY_FROM = Date.parse('2025-03-02T00:00:00Z');
const DAY_TO = Date.parse('2025-03-03T00:00:00Z');
const dayFrames = frames.filter((f) => f.recvMs >= DAY_FROM && f.recvMs < DAY_TO);
const dayAssets = [...new Set(dayFrames.flatMap((f) => f.msgs.flatMap(assetsOf)))];
const iso = (ms: number): string => new Date(ms).toISOString();
const url = (from: number, to: number, speed = 0): string => `${ws}?from=${iso(from)}&to=${iso(to)}&speed=${speed}`;

/** Fair use already spent: a completed download of `bytes`. */
async function spend(userId: string, bytes: number): Promise<void> {
  const at = new Date().toISOString();
  await insertPull(srv.ctx.state, {
    id: `dl_spent_${userId}`,
    user_id: userId,
    key_id: null,
    kind: 'download',
    dataset: 'raw',
    description: 'earlier download',
    market_id: null,
    format: 'json',
    file_name: null,
    timeframe: null,
    start_date: null,
    end_date: null,
    status: 'completed',
    reserved_bytes: 0,
    bytes,
    rows: 1,
    reason: null,
    created_at: at,
    finished_at: at,
  });
}

beforeAll(async () => {
  ({ srv, ws } = await fixtureReplayServer(tmp.dir));
}, 60_000);

afterAll(async () => {
  await srv?.close();
  tmp.cleanup();
});

describe('replay metering', () => {
  it('a replay is recorded once with the bytes sent; refused subscriptions cost nothing', async () => {
    const u = await proUser(srv, 'meter@example.com');
    const c = connect(url(DAY_FROM, DAY_TO), { key: u.key, subscription: { assets_ids: dayAssets, type: 'market', custom_feature_enabled: true } });
    expect((await c.close).code).toBe(1000);
    const sent = c.texts.reduce((s, t) => s + Buffer.byteLength(t), 0);
    const bad = connect(url(DAY_FROM, DAY_TO), { key: u.key, subscription: { assets_ids: ['99999999999999999999999999999999999'], type: 'market' } });
    expect((await bad.close).code).toBe(4404);
    const malformed = connect(url(DAY_FROM, DAY_TO), { key: u.key, subscription: 'subscribe me' });
    expect((await malformed.close).code).toBe(4400);
    await until(async () => (await listPulls(srv.ctx.state, u.id, { limit: 10, offset: 0 })).every((p) => p.status !== 'pending'));
    const pulls = await listPulls(srv.ctx.state, u.id, { limit: 10, offset: 0 });
    expect(pulls.length).toBe(3);
    const done = pulls.filter((p) => p.status === 'completed');
    expect(done.length).toBe(1);
    expect(done[0]!.bytes).toBe(sent);
    expect(done[0]!.rows).toBe(dayFrames.length);
    expect(done[0]!.dataset).toBe('raw');
    expect(pulls.filter((p) => p.status === 'failed').length).toBe(2);
  });

  it('a client that leaves before subscribing frees its replay at once and costs nothing', async () => {
    const u = await proUser(srv, 'early@example.com');
    const counters = replayServerOf(srv.ctx)!.counters;
    const accepted = counters.accepted;
    const c = connect(url(DAY_FROM, DAY_TO), { key: u.key });
    await until(() => counters.accepted === accepted + 1);
    c.ws.close();
    await until(() => counters.open === 0);
    await until(async () => (await listPulls(srv.ctx.state, u.id, { limit: 10, offset: 0 })).every((p) => p.status !== 'pending'));
    expect((await listPulls(srv.ctx.state, u.id, { limit: 10, offset: 0 })).map((p) => p.status)).toEqual(['failed']);
  });

  it('a window beyond the fair use left is cut at it (4429) and charged what was sent; none left: 429 before the upgrade', async () => {
    const allowance = PLANS.professional.fair_use_bytes_month;
    const u = await proUser(srv, 'nearly@example.com');
    // Room for the first two frames of the day and a little more, not for the third.
    const room = Buffer.byteLength(dayFrames[0]!.text) + Buffer.byteLength(dayFrames[1]!.text) + 10;
    await spend(u.id, allowance - room);
    const c = connect(url(DAY_FROM, DAY_TO), { key: u.key, subscription: { assets_ids: dayAssets, type: 'market', custom_feature_enabled: true } });
    const closed = await c.close;
    expect(closed.code).toBe(4429);
    const sent = c.texts.reduce((s, t) => s + Buffer.byteLength(t), 0);
    expect(c.texts).toEqual(dayFrames.slice(0, 2).map((f) => f.text));
    await until(async () => (await listPulls(srv.ctx.state, u.id, { limit: 10, offset: 0 })).every((p) => p.status !== 'pending'));
    const replayed = (await listPulls(srv.ctx.state, u.id, { limit: 10, offset: 0 })).filter((p) => p.description.startsWith('replay'));
    expect(replayed.map((p) => [p.status, p.bytes])).toEqual([['completed', sent]]);

    const spent = await proUser(srv, 'spent@example.com');
    await spend(spent.id, allowance);
    const r = await refusal(`${url(DAY_FROM, DAY_TO)}&api_key=${spent.key}`);
    expect(r.status).toBe(429);
    expect(JSON.stringify(r.body.detail)).toContain('fair_use_cap');
  });

  it('at speed 1, frames due more than 24.8 days after `from` wait for their time instead of going at once', async () => {
    const late = frames.filter((f) => f.recvMs >= Date.parse('2026-08-14T00:00:00Z'));
    expect(late.length).toBeGreaterThan(0);
    const assets = [...new Set(late.flatMap((f) => f.msgs.flatMap(assetsOf)))];
    const from = Date.parse('2026-07-01T00:00:00Z');
    const warnings: string[] = [];
    const onWarning = (w: Error): void => void warnings.push(w.name);
    process.on('warning', onWarning);
    const u = await proUser(srv, 'long-wait@example.com');
    const c = connect(url(from, Date.parse('2026-08-15T00:00:00Z'), 1), { key: u.key, subscription: { assets_ids: assets, type: 'market' } });
    await until(() => c.ws.readyState === c.ws.OPEN);
    await new Promise((r) => setTimeout(r, 3_000));
    process.off('warning', onWarning);
    // Only what is due at `from` (the opening books) may have arrived; none of the frames recorded 44 days later.
    const recorded = new Set(late.map((f) => f.text));
    expect(c.texts.filter((t) => recorded.has(t))).toEqual([]);
    expect(warnings.filter((w) => w === 'TimeoutOverflowWarning')).toEqual([]);
    c.ws.close();
    await c.close;
  });

  it('an asset subscribed mid-stream first gets its book where the replay stands', async () => {
    const u = await proUser(srv, 'midstream@example.com');
    const arrays = dayFrames.filter((f) => f.text.trimStart().startsWith('['));
    const [a, b] = dayAssets;
    const c = connect(url(arrays[0]!.recvMs, arrays.at(-1)!.recvMs + 1, 20), { key: u.key, subscription: { assets_ids: [a], type: 'market' } });
    await until(() => c.texts.length > 0);
    c.ws.send(JSON.stringify({ assets_ids: [b], operation: 'subscribe' }));
    expect((await c.close).code).toBe(1000);
    const i = c.texts.findIndex((t) => t.includes('pmlake-rebuilt') && t.includes(b!));
    expect(i).toBeGreaterThan(0);
    const book = JSON.parse(c.texts[i]!) as Msg;
    // The replay stood between the frame before the book and the one after it (exclusive): its book is a plain
    // replay of the messages up to one of the recorded instants there.
    // A received frame (maybe cut to the subscribed assets) is the recorded frame holding its first message.
    const recorded = (text: string): number => {
      const doc = JSON.parse(text) as Msg | Msg[];
      const first = JSON.stringify(Array.isArray(doc) ? doc[0] : doc);
      return dayFrames.find((f) => f.msgs.some((m) => JSON.stringify(m) === first))!.recvMs;
    };
    const lastBefore = { recvMs: recorded(c.texts[i - 1]!) };
    const next = c.texts[i + 1];
    const nextAt = next === undefined ? Infinity : recorded(next);
    const side = (levels: { price: string; size: string }[]): Map<string, string> => new Map(levels.map((l) => [d6(l.price), d6(l.size)]));
    const candidates = [...new Set(dayFrames.map((f) => f.recvMs))].filter((t) => t >= lastBefore.recvMs && t < nextAt);
    const matches = candidates.filter((t) => {
      const want = replayBooks(dayFrames.filter((f) => f.recvMs <= t).flatMap((f) => f.msgs)).get(b!);
      if (!want) return false;
      const got = { bids: side(book.bids as { price: string; size: string }[]), asks: side(book.asks as { price: string; size: string }[]) };
      return (
        JSON.stringify([...got.bids].sort()) === JSON.stringify([...want.bids].sort()) &&
        JSON.stringify([...got.asks].sort()) === JSON.stringify([...want.asks].sort())
      );
    });
    expect(matches.length).toBeGreaterThan(0);
    // After the book, b's own messages follow.
    expect(c.texts.slice(i + 1).some((t) => t.includes(b!))).toBe(true);
  });
});
