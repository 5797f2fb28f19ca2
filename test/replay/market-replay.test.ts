import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runIngest } from '../../ingest/run.js';
import type { RunningServer } from '../../src/server.js';
import { activateSubscriptionTx } from '../../src/state/accounts.js';
import { replayServerOf } from '../../src/http/replay/index.js';
import { d6, replay as replayBooks, type Msg } from '../ingest/oracle.js';
import { createTestKey, startTestServer, tempDir, testConfig } from '../helpers/server.js';
import { assetsOf, connect, fixtureFrames, FIXTURES, refusal, until, type FixFrame } from './replay-util.js';

/**
 * GET /v1/replay/ws/market over a real lake ingested from the real venue captures, on a real port, with a real
 * `ws` client; every expectation is computed from the fixture files in plain TypeScript (./replay-util.ts).
 */
const tmp = tempDir('pmlake-replay-');
let srv: RunningServer;
let key: string;
let freeKey: string;
let readOnlyKey: string;
let ws: string;
const frames = fixtureFrames();
const DAY_FROM = Date.parse('2025-03-02T00:00:00Z');
const DAY_TO = Date.parse('2025-03-03T00:00:00Z');
const dayFrames = frames.filter((f) => f.recvMs >= DAY_FROM && f.recvMs < DAY_TO);
const dayAssets = [...new Set(dayFrames.flatMap((f) => f.msgs.flatMap(assetsOf)))];

beforeAll(async () => {
  const lake = path.join(tmp.dir, 'lake');
  const report = await runIngest(FIXTURES, { lakeDir: lake, threads: 2 });
  expect(report.failed).toBe(0);
  srv = await startTestServer(testConfig({ PMLAKE_LAKE: lake, PMLAKE_STATE: path.join(tmp.dir, 'state') }));
  const store = srv.ctx.state;
  const user = await store.upsertUser('replay@example.com', 'professional');
  await store.tx((t) => activateSubscriptionTx(t, { userId: user.id, tier: 'professional', billingPeriod: 'monthly', fundedBy: 'grant', at: new Date() }));
  key = (await store.createApiKey({ userId: user.id, name: 't', prefix: srv.ctx.config.keyPrefix })).plaintext;
  readOnlyKey = (await store.createApiKey({ userId: user.id, name: 'r', prefix: srv.ctx.config.keyPrefix, scopes: ['read'] })).plaintext;
  freeKey = await createTestKey(srv, { email: 'free@example.com', plan: 'free' });
  ws = `${srv.url.replace('http', 'ws')}/v1/replay/ws/market`;
}, 60_000);

afterAll(async () => {
  await srv?.close();
  tmp.cleanup();
});

const iso = (ms: number): string => new Date(ms).toISOString();
const url = (from: number, to: number, speed = 0): string => `${ws}?from=${iso(from)}&to=${iso(to)}&speed=${speed}`;

/** The frame as the venue would have sent it to a connection of these assets (independent of src/replay/). */
function expectedFor(f: FixFrame, assets: Set<string>, custom: boolean): unknown {
  const kept: Msg[] = [];
  for (const m of f.msgs) {
    if (!custom && m.event_type === 'best_bid_ask') continue;
    if (Array.isArray(m.price_changes)) {
      const mine = (m.price_changes as Msg[]).filter((e) => assets.has(String(e.asset_id)));
      if (mine.length) kept.push({ ...m, price_changes: mine });
    } else if (assets.has(String(m.asset_id))) kept.push(m);
  }
  if (kept.length === 0) return undefined;
  return f.text.trimStart().startsWith('[') ? kept : kept[0];
}

/** The replay of a stretch of frames to these assets, closed 1000 and equal to the venue rule computed here. */
async function replayStretch(lines: FixFrame[], assets: Set<string>, custom: boolean): Promise<ReturnType<typeof connect>> {
  const want = lines.map((f) => expectedFor(f, assets, custom)).filter((x) => x !== undefined);
  const c = connect(url(lines[0]!.recvMs - 1000, lines.at(-1)!.recvMs + 1), {
    key,
    subscription: { assets_ids: [...assets], type: 'market', custom_feature_enabled: custom },
  });
  expect((await c.close).code).toBe(1000);
  expect(c.texts.map((t) => JSON.parse(t) as unknown)).toEqual(want);
  return c;
}

describe('replay of the market channel', () => {
  it('all assets of the day: the captures’ frames in receive order, byte for byte, then close 1000', async () => {
    const c = connect(url(DAY_FROM, DAY_TO), { key, subscription: { assets_ids: dayAssets, type: 'market', custom_feature_enabled: true } });
    const closed = await c.close;
    expect(closed.code).toBe(1000);
    expect(c.texts.length).toBe(dayFrames.length);
    expect(c.texts).toEqual(dayFrames.map((f) => f.text));
  });

  it('one asset: exactly that asset’s messages, frames holding others cut to it', async () => {
    const counts = new Map<string, number>();
    for (const f of dayFrames) for (const a of new Set(f.msgs.flatMap(assetsOf))) counts.set(a, (counts.get(a) ?? 0) + 1);
    // The asset in the most frames, one that shares frames with other assets.
    const asset = [...counts.entries()].sort((a, b) => b[1] - a[1])[0]![0];
    const want = dayFrames.map((f) => expectedFor(f, new Set([asset]), true)).filter((x) => x !== undefined);
    const c = connect(url(DAY_FROM, DAY_TO), { key, header: true, subscription: { assets_ids: [asset], type: 'market' } });
    expect((await c.close).code).toBe(1000);
    expect(want.length).toBeGreaterThan(1);
    expect(c.texts.map((t) => JSON.parse(t) as unknown)).toEqual(want);
    // A frame entirely of the asset is the recorded text itself.
    const whole = dayFrames.filter((f) => f.msgs.every((m) => assetsOf(m).every((a) => a === asset)) && f.msgs.some((m) => assetsOf(m).includes(asset)));
    expect(whole.length).toBeGreaterThan(0);
    for (const f of whole) expect(c.texts).toContain(f.text);
    // Some frames held other assets' messages too: those arrive cut, not as recorded.
    expect(c.texts.length - whole.length).toBeGreaterThan(0);
  });

  it('new-shape price_change: only the subscribed entry; best_bid_ask only with the custom feature', async () => {
    const lines = frames.filter((f) => f.recvMs >= Date.parse('2026-08-14T00:00:00Z'));
    const pc = lines.find((f) => f.msgs[0]!.event_type === 'price_change')!;
    const asset = String((pc.msgs[0]!.price_changes as Msg[])[1]!.asset_id);
    const bba = String(lines.find((f) => f.msgs[0]!.event_type === 'best_bid_ask')!.msgs[0]!.asset_id);
    const assets = new Set([asset, bba]);
    for (const custom of [false, true]) {
      const c = await replayStretch(lines, assets, custom);
      const msgs = c.texts.map((t) => JSON.parse(t) as Msg);
      expect(msgs.map((m) => m.event_type).includes('best_bid_ask')).toBe(custom);
      // The price_change spans two assets; the connection gets its one entry.
      const change = msgs.find((m) => m.event_type === 'price_change')!;
      expect((change.price_changes as Msg[]).map((e) => e.asset_id)).toEqual([asset]);
    }
  });

  it('every token of the markets subscribed: frames of only those markets go as recorded, best_bid_ask only with the custom feature', async () => {
    // Whole markets: the lake read flags their frames as received whole (no parse); the expectation is the same rule.
    const lines = frames.filter((f) => f.recvMs >= Date.parse('2026-08-14T00:00:00Z'));
    const assets = new Set(lines.flatMap((f) => f.msgs.flatMap(assetsOf)));
    for (const custom of [false, true]) {
      const c = await replayStretch(lines, assets, custom);
      // A frame none of whose messages is dropped is the recorded text itself.
      const kept = lines.filter((f) => custom || f.msgs.every((m) => m.event_type !== 'best_bid_ask'));
      expect(kept.length).toBeGreaterThan(0);
      expect(c.texts.filter((t) => kept.some((f) => f.text === t)).length).toBe(kept.length);
      expect(c.texts.some((t) => (JSON.parse(t) as Msg).event_type === 'best_bid_ask')).toBe(custom);
    }
  });

  it('`from` inside the tape: first the books at `from` (rebuilt, marked), equal to a plain replay of the messages before it', async () => {
    const arrays = dayFrames.filter((f) => f.text.trimStart().startsWith('['));
    const from = arrays[20]!.recvMs;
    const before = dayFrames.filter((f) => f.recvMs < from).flatMap((f) => f.msgs);
    const books = replayBooks(before);
    const c = connect(url(from, DAY_TO), { key, subscription: { assets_ids: dayAssets, type: 'market', custom_feature_enabled: true } });
    expect((await c.close).code).toBe(1000);
    // One frame per book, each a single `book` message, before the first recorded frame.
    const nBooks = c.texts.findIndex((t) => !t.includes('pmlake-rebuilt'));
    const first = c.texts.slice(0, nBooks).map((t) => JSON.parse(t) as Msg);
    expect(first.length).toBeGreaterThan(3);
    expect(first.every((b) => b.event_type === 'book' && b.hash === 'pmlake-rebuilt' && b.timestamp === String(from))).toBe(true);
    expect(new Set(first.map((b) => b.asset_id))).toEqual(new Set([...books.keys()].filter((a) => dayAssets.includes(a))));
    for (const b of first) {
      const want = books.get(String(b.asset_id))!;
      const side = (levels: { price: string; size: string }[]): Map<string, string> => new Map(levels.map((l) => [d6(l.price), d6(l.size)]));
      expect(side(b.bids as { price: string; size: string }[])).toEqual(want.bids);
      expect(side(b.asks as { price: string; size: string }[])).toEqual(want.asks);
      // The venue's order: bids ascending, asks descending (best last).
      const bp = (b.bids as { price: string }[]).map((l) => Number(l.price));
      const ap = (b.asks as { price: string }[]).map((l) => Number(l.price));
      expect(bp).toEqual([...bp].sort((x, y) => x - y));
      expect(ap).toEqual([...ap].sort((x, y) => y - x));
    }
    expect(c.texts.slice(nBooks)).toEqual(dayFrames.filter((f) => f.recvMs >= from).map((f) => f.text));
  });

  it('PING is answered PONG; a client that leaves stops its replay and is charged once for what it got', async () => {
    const replay = replayServerOf(srv.ctx)!;
    const left = replay.counters.left;
    // speed 1 from an hour before the tape: the first frame is an hour away, so the socket idles in the pacer.
    const c = connect(url(DAY_FROM + 8 * 3600_000, DAY_TO, 1), { key, subscription: { assets_ids: dayAssets, type: 'market' } });
    await until(() => c.ws.readyState === c.ws.OPEN);
    c.ws.send('PING');
    await until(() => c.texts.includes('PONG'));
    c.ws.close();
    await until(() => replay.counters.left === left + 1 && replay.counters.open === 0);
  });

  it('speed 60 sends the same frames as speed 0, none before its recorded gap / 60', async () => {
    const lines = frames.filter((f) => f.recvMs >= Date.parse('2026-08-14T00:00:00Z'));
    const from = lines[0]!.recvMs - 600;
    const to = lines.at(-1)!.recvMs + 1;
    const sub = { assets_ids: [...new Set(lines.flatMap((f) => f.msgs.flatMap(assetsOf)))], type: 'market', custom_feature_enabled: true };
    const fast = connect(url(from, to, 0), { key, subscription: sub });
    expect((await fast.close).code).toBe(1000);
    const t0 = performance.now();
    const paced = connect(url(from, to, 60), { key, subscription: sub });
    expect((await paced.close).code).toBe(1000);
    expect(paced.texts).toEqual(fast.texts);
    expect(paced.texts).toEqual(lines.map((f) => f.text));
    // The server starts pacing after the subscription arrived, which is after t0.
    lines.forEach((f, i) => expect(paced.at[i]! - t0).toBeGreaterThanOrEqual((f.recvMs - from) / 60 - 1));
  });
});

describe('refusals before the upgrade (HTTP, JSON detail) and close codes after it', () => {
  const q = (): string => `from=${iso(DAY_FROM)}&to=${iso(DAY_TO)}&speed=0`;

  it('from after to: 422 naming from', async () => {
    const r = await refusal(`${ws}?from=${iso(DAY_TO)}&to=${iso(DAY_FROM)}&api_key=${key}`);
    expect(r.status).toBe(422);
    expect(JSON.stringify(r.body.detail)).toContain('from');
  });

  it('a bad speed or a missing window: 422', async () => {
    expect((await refusal(`${ws}?${q()}&speed=-1&api_key=${key}`)).status).toBe(422);
    expect((await refusal(`${ws}?to=${iso(DAY_TO)}&api_key=${key}`)).status).toBe(422);
  });

  it('no key, a wrong key: 401; a key without the download scope: 403; the Free plan: 402 (no raw tape)', async () => {
    expect((await refusal(`${ws}?${q()}`)).status).toBe(401);
    expect((await refusal(`${ws}?${q()}`, { 'x-api-key': 'pm_wrong' })).status).toBe(401);
    expect((await refusal(`${ws}?${q()}&api_key=${readOnlyKey}`)).status).toBe(403);
    const free = await refusal(`${ws}?${q()}&api_key=${freeKey}`);
    expect(free.status).toBe(402);
    expect(JSON.stringify(free.body.detail)).toContain('upgrade_required');
  });

  it('an unknown path stays 404', async () => {
    expect((await refusal(`${srv.url.replace('http', 'ws')}/v1/replay/ws/nothing?api_key=${key}`)).status).toBe(404);
  });

  it('an unknown asset: close 4404 naming it; a malformed subscription: the venue’s INVALID OPERATION, then 4400', async () => {
    const c = connect(`${ws}?${q()}`, { key, subscription: { assets_ids: ['123456789012345678901234567890123'], type: 'market' } });
    const closed = await c.close;
    expect(closed.code).toBe(4404);
    expect(closed.reason).toContain('unknown asset');
    const m = connect(`${ws}?${q()}`, { key, subscription: '{"assets_ids": 7}' });
    const mc = await m.close;
    expect(m.texts).toEqual(['INVALID OPERATION']);
    expect(mc.code).toBe(4400);
  });
});
