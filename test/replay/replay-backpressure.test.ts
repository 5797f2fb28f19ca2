import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runIngest } from '../../ingest/run.js';
import { replayServerOf } from '../../src/http/replay/index.js';
import type { RunningServer } from '../../src/server.js';
import { activateSubscriptionTx } from '../../src/state/accounts.js';
import { listPulls } from '../../src/state/pulls.js';
import { startTestServer, tempDir, testConfig } from '../helpers/server.js';
import { connect, until } from './replay-util.js';

/**
 * A tape far larger than the sockets' buffers (tens of MB of frames for one asset), and clients that do not read
 * or leave: the server stops reading the lake while the client is behind, and stops the read when it goes.
 */
const tmp = tempDir('pmlake-replay-bp-');
let srv: RunningServer;
let key: string;
let userId: string;
const ASSET = '7'.repeat(77);
const MARKET = `0x${'ab'.repeat(32)}`;
const T0 = Date.parse('2025-06-01T00:00:00Z');
const FRAMES = 4000;
const PAD = 'x'.repeat(10_000);

beforeAll(async () => {
  const file = path.join(tmp.dir, 'big.jsonl');
  const lines = [
    `{"market":"${MARKET}","asset_id":"${ASSET}","timestamp":"${T0}","hash":"h0","bids":[{"price":"0.4","size":"10"}],"asks":[{"price":"0.6","size":"10"}],"event_type":"book"}`,
  ];
  // Large frames that land only in raw: tick size changes carrying a long extra field.
  for (let i = 1; i <= FRAMES; i++) {
    lines.push(
      `{"asset_id":"${ASSET}","event_type":"tick_size_change","market":"${MARKET}","new_tick_size":"0.01","old_tick_size":"0.01","timestamp":"${T0 + i}","pad":"${PAD}"}`,
    );
  }
  fs.writeFileSync(file, `${lines.join('\n')}\n`);
  const lake = path.join(tmp.dir, 'lake');
  expect((await runIngest([file], { lakeDir: lake, threads: 2 })).failed).toBe(0);
  fs.rmSync(file);
  srv = await startTestServer(testConfig({ PMLAKE_LAKE: lake, PMLAKE_STATE: path.join(tmp.dir, 'state') }));
  const store = srv.ctx.state;
  const user = await store.upsertUser('bp@example.com', 'professional');
  userId = user.id;
  await store.tx((t) => activateSubscriptionTx(t, { userId: user.id, tier: 'professional', billingPeriod: 'monthly', fundedBy: 'grant', at: new Date() }));
  key = (await store.createApiKey({ userId: user.id, name: 't', prefix: srv.ctx.config.keyPrefix })).plaintext;
}, 120_000);

afterAll(async () => {
  await srv?.close();
  tmp.cleanup();
});

const url = (): string =>
  `${srv.url.replace('http', 'ws')}/v1/replay/ws/market?from=${new Date(T0).toISOString()}&to=${new Date(T0 + 60_000).toISOString()}&speed=0`;

/** Waits until a counter stops moving (unchanged over several polls). */
async function settled(read: () => number): Promise<number> {
  let last = -1;
  let same = 0;
  await until(() => {
    const v = read();
    same = v === last ? same + 1 : 0;
    last = v;
    return same >= 10;
  }, 30_000);
  return last;
}

describe('replay back-pressure', () => {
  it('a fast client gets every frame', async () => {
    const c = connect(url(), { key, subscription: { assets_ids: [ASSET], type: 'market' } });
    expect((await c.close).code).toBe(1000);
    expect(c.texts.length).toBe(FRAMES + 1);
    expect(c.texts.at(-1)).toContain(`"timestamp":"${T0 + FRAMES}"`);
  });

  it('a client that never reads: the server stops reading the lake; when it leaves the read stops and it pays for what was sent', async () => {
    const r = replayServerOf(srv.ctx)!.counters;
    const read0 = r.framesRead;
    const sent0 = r.framesSent;
    const left0 = r.left;
    const c = connect(url(), { key, subscription: { assets_ids: [ASSET], type: 'market' } });
    await until(() => c.ws.readyState === c.ws.OPEN);
    // The client stops reading its socket: the kernel buffers fill, then the server's sends stop completing.
    c.ws.pause();
    // The replay has begun (its first frames take a lake read), then its sends stop completing.
    await until(() => r.framesSent > sent0, 30_000);
    const sent = (await settled(() => r.framesSent)) - sent0;
    expect(sent).toBeGreaterThan(0);
    const read = r.framesRead - read0;
    expect(sent).toBeLessThan(FRAMES);
    // Held back by the socket: read no further than the page in hand.
    expect(read).toBeLessThan(FRAMES + 1);
    expect(read - sent).toBeLessThanOrEqual(1000 + 200);
    c.ws.terminate();
    await until(() => r.left === left0 + 1 && r.open === 0);
    const readAtEnd = r.framesRead - read0;
    expect(readAtEnd).toBeLessThan(FRAMES + 1);
    await until(async () => (await listPulls(srv.ctx.state, userId, { limit: 10, offset: 0 })).every((p) => p.status !== 'pending'));
    const pulls = await listPulls(srv.ctx.state, userId, { limit: 10, offset: 0 });
    expect(pulls.length).toBe(2);
    expect(pulls.every((p) => p.status === 'completed' && (p.bytes ?? 0) > 0)).toBe(true);
  });
});
