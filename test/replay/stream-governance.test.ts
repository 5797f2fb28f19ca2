import fs from 'node:fs';
import http from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WebSocket } from 'ws';
import { PLANS } from '../../src/accounts/plans.js';
import { activateSubscriptionTx, expireSubscriptions } from '../../src/state/accounts.js';
import { insertPull, listPulls } from '../../src/state/pulls.js';
import { sql } from '../../src/state/sql.js';
import { buildReplayLake, DAY0, type ReplayLake } from './normalized-lake.js';
import { until } from './replay-util.js';

/**
 * The long-lived answers keep the plan's word, through real HTTP and WebSocket clients on a real server over a
 * generated lake: one fair-use reservation across every stream and download of a user in flight, revocation,
 * deletion and a plan change ending the streams they no longer allow, and at most PMLAKE_STREAMS_PER_USER
 * streams per user. Byte counts are the clients' own (what they received), checked against the allowance the
 * test set up, not against the server's counters.
 */
let L: ReplayLake;
let markets: string[] = [];
const KiB = 1024;
const MiB = 1024 * KiB;
const FROM = `${DAY0}T00:00:00Z`;
const TO = new Date(Date.parse(FROM) + 2 * 86_400_000).toISOString();

type User = { id: string; key: string; keyId: string };

async function user(email: string, opts: { subscribed?: boolean } = {}): Promise<User> {
  const store = L.srv.ctx.state;
  const u = await store.upsertUser(email, 'professional');
  if (opts.subscribed ?? true) {
    await store.tx((t) => activateSubscriptionTx(t, { userId: u.id, tier: 'professional', billingPeriod: 'monthly', fundedBy: 'grant', at: new Date() }));
  }
  const { row, plaintext } = await store.createApiKey({ userId: u.id, name: 'streams', prefix: L.srv.ctx.config.keyPrefix });
  return { id: u.id, key: plaintext, keyId: row.id };
}

/** Leaves exactly `left` bytes of the month's fair use: a completed download of the rest. */
async function leave(u: User, left: number): Promise<void> {
  const at = new Date().toISOString();
  await insertPull(L.srv.ctx.state, {
    id: `dl_spent_${u.id}`,
    user_id: u.id,
    key_id: null,
    kind: 'download',
    dataset: 'raw',
    description: 'earlier download',
    market_id: null,
    format: 'csv',
    file_name: null,
    timeframe: null,
    start_date: null,
    end_date: null,
    status: 'completed',
    reserved_bytes: 0,
    bytes: PLANS.professional.fair_use_bytes_month - left,
    rows: 1,
    reason: null,
    created_at: at,
    finished_at: at,
  });
}

const ndjsonPath = (types: string) => `/v1/replay/normalized?market_id=${markets.join(',')}&from=${FROM}&to=${TO}&data_types=${types}`;
const wsUrl = (p: string) => `${L.srv.url.replace('http', 'ws')}${p}`;

/** Reads a whole HTTP body (or as much as arrives before the connection ends): bytes and text. */
async function readAll(p: string, key: string): Promise<{ status: number; bytes: number; text: string; error: boolean; body: any }> {
  const res = await fetch(`${L.srv.url}${p}`, { headers: { 'x-api-key': key } });
  if (res.status !== 200) return { status: res.status, bytes: 0, text: '', error: false, body: await res.json() };
  const reader = res.body!.getReader();
  const parts: Buffer[] = [];
  let error = false;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      parts.push(Buffer.from(value));
    }
  } catch {
    error = true;
  }
  const all = Buffer.concat(parts);
  return { status: 200, bytes: all.length, text: all.toString(), error, body: null };
}

type WsResult = { bytes: number; code: number; reason: string; frames: number };

function wsRun(url: string, key: string, subscription?: unknown): { done: Promise<WsResult>; ws: WebSocket; frames: () => number } {
  const ws = new WebSocket(url, { headers: { 'x-api-key': key }, perMessageDeflate: false });
  let bytes = 0;
  let frames = 0;
  ws.on('message', (d) => {
    bytes += (d as Buffer).length;
    frames += 1;
  });
  ws.on('error', () => {});
  if (subscription !== undefined) ws.on('open', () => ws.send(JSON.stringify(subscription)));
  const done = new Promise<WsResult>((resolve) => ws.on('close', (code, reason) => resolve({ bytes, code, reason: String(reason), frames })));
  return { done, ws, frames: () => frames };
}

const lastLine = (text: string): any => JSON.parse(text.trimEnd().split('\n').at(-1)!);

beforeAll(async () => {
  L = await buildReplayLake();
  markets = (await L.rows(`SELECT id FROM read_parquet(${L.files('catalog/markets')}) ORDER BY id`)).map((r) => String(r.id));
}, 180_000);

afterAll(async () => {
  await L?.close();
});

describe('fair use across every stream in flight', () => {
  it('with X left, three NDJSON replays, two WebSocket replays and a download together get at most X, each ending with the fair-use answer', async () => {
    const u = await user('fair-use@example.com');
    const X = 3 * MiB;
    await leave(u, X);
    const types = 'book_change,book_snapshot_25_100ms';
    const nd = [0, 1, 2].map(() => readAll(ndjsonPath(types), u.key));
    const ws = [0, 1].map(
      () => wsRun(wsUrl(`/v1/replay/ws/normalized?market_id=${markets.join(',')}&from=${FROM}&to=${TO}&data_types=${types}&speed=0`), u.key).done,
    );
    const dl = readAll(
      `/v1/download/book_snapshot_interval?market_id=${markets[0]}&interval=1s&depth=50&start=${FROM}&end=${TO}&format=csv&limit=1000000`,
      u.key,
    );
    const [n, w, d] = await Promise.all([Promise.all(nd), Promise.all(ws), dl]);

    const total = n.reduce((a, r) => a + r.bytes, 0) + w.reduce((a, r) => a + r.bytes, 0) + d.bytes;
    // At most X plus one chunk per stream (the final NDJSON lines are a few hundred bytes each).
    expect(total).toBeLessThanOrEqual(X + 6 * 256 * KiB);
    // Not vacuous: the streams did serve most of what was left.
    expect(total).toBeGreaterThan(X / 2);
    // Each one ended with the fair-use answer: a final NDJSON line, close 4429, a 429 or a cut file.
    for (const r of n) {
      if (r.status === 200) expect(lastLine(r.text)).toMatchObject({ type: 'error', code: 'fair_use_cap' });
      else expect(r).toMatchObject({ status: 429, body: { detail: { code: 'fair_use_cap' } } });
    }
    for (const r of w) expect(r.code === 4429 || r.code === 429).toBe(true);
    expect(d.status === 429 || d.error).toBe(true);
    // The month's usage, as the meter recorded it, stays within the allowance.
    await until(async () => (await listPulls(L.srv.ctx.state, u.id, { limit: 50, offset: 0 })).every((p) => p.status !== 'pending'), 20_000);
    const pulls = await listPulls(L.srv.ctx.state, u.id, { limit: 50, offset: 0 });
    const used = pulls.filter((p) => p.status === 'completed').reduce((a, p) => a + (p.bytes ?? 0), 0);
    expect(used).toBeLessThanOrEqual(PLANS.professional.fair_use_bytes_month);
  });
});

describe('standing: revocation, deletion and a plan change end the streams they no longer allow', () => {
  it('revoking the key closes its WebSocket replay with 4401 and ends its NDJSON stream with a key_revoked line, within 1 s', async () => {
    const u = await user('revoke@example.com');
    const store = L.srv.ctx.state;
    const admin = (await store.createApiKey({ userId: u.id, name: 'admin', prefix: L.srv.ctx.config.keyPrefix })).plaintext;
    const tokens = (await L.rows(`SELECT DISTINCT asset_id FROM read_parquet(${L.files('l2')}) ORDER BY 1 LIMIT 4`)).map((r) => String(r.asset_id));
    // A market replay at recorded pace over two days: it would run two days.
    const market = wsRun(wsUrl(`/v1/replay/ws/market?from=${FROM}&to=${TO}&speed=1`), u.key, { assets_ids: tokens, type: 'market' });
    // An NDJSON stream whose client reads slowly: it stays open.
    const res = await fetch(`${L.srv.url}${ndjsonPath('book_change,book_snapshot_50_10ms')}`, { headers: { 'x-api-key': u.key } });
    expect(res.status).toBe(200);
    const reader = res.body!.getReader();
    let head = '';
    while (head.length < 64 * KiB) head += Buffer.from((await reader.read()).value ?? []).toString();
    await until(() => market.ws.readyState === WebSocket.OPEN && L.srv.ctx.streams.openOf(u.id) === 2);

    const del = await fetch(`${L.srv.url}/v1/user/keys/${u.keyId}`, { method: 'DELETE', headers: { 'x-api-key': admin } });
    expect(del.status).toBe(200);
    const revokedAt = performance.now();
    const closed = await market.done;
    const closeMs = performance.now() - revokedAt;
    expect(closed.code).toBe(4401);
    expect(closed.reason).toContain('key_revoked');
    let rest = '';
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      rest += Buffer.from(value).toString();
    }
    const endMs = performance.now() - revokedAt;
    expect(lastLine(head + rest)).toMatchObject({ type: 'error', code: 'key_revoked' });
    // The registry looks every 250 ms; a busy 2-core machine gets a margin, the note gives the measured times.
    expect(closeMs).toBeLessThan(2_000);
    expect(endMs).toBeLessThan(3_000);
    await until(() => L.srv.ctx.streams.openOf(u.id) === 0);
  });

  it('a lapsed subscription closes a raw-tape replay with 4402 (plan_changed); deleting the account ends every stream', async () => {
    const u = await user('lapse@example.com');
    const tokens = (await L.rows(`SELECT DISTINCT asset_id FROM read_parquet(${L.files('l2')}) ORDER BY 1 LIMIT 2`)).map((r) => String(r.asset_id));
    const market = wsRun(wsUrl(`/v1/replay/ws/market?from=${FROM}&to=${TO}&speed=1`), u.key, { assets_ids: tokens, type: 'market' });
    // OHLCV bars are in the Free plan too: the lapse leaves this one running.
    const bars = wsRun(wsUrl(`/v1/replay/ws/normalized?market_id=${markets[0]}&from=${FROM}&to=${TO}&data_types=trade_bar_1m&speed=1`), u.key);
    await until(() => L.srv.ctx.streams.openOf(u.id) === 2 && market.ws.readyState === WebSocket.OPEN && bars.ws.readyState === WebSocket.OPEN);
    await expireSubscriptions(L.srv.ctx.state, u.id);
    const closed = await market.done;
    expect(closed.code).toBe(4402);
    expect(closed.reason).toContain('plan_changed');
    await new Promise((r) => setTimeout(r, 600));
    expect(bars.ws.readyState).toBe(WebSocket.OPEN);

    // Deleted (as the confirmation does: keys revoked, the user marked): the remaining stream ends too.
    const at = new Date().toISOString();
    await L.srv.ctx.state.tx(async (t) => {
      await t.run(sql`UPDATE api_keys SET revoked_at = ${at} WHERE user_id = ${u.id}`);
      await t.run(sql`UPDATE users SET deleted_at = ${at} WHERE id = ${u.id}`);
    });
    const ended = await bars.done;
    expect(ended.code).toBe(4401);
    expect(ended.reason).toContain('account_deleted');
  });
});

describe('fair shares: PMLAKE_STREAMS_PER_USER streams per user', () => {
  it('the 9th concurrent stream of a user is 429 with Retry-After; another user still gets one; a freed slot is taken again', async () => {
    const hog = await user('hog@example.com');
    const other = await user('other@example.com');
    const perUser = L.srv.ctx.config.streamsPerUser;
    expect(perUser).toBe(8);
    const bars = (key: string) => wsRun(wsUrl(`/v1/replay/ws/normalized?market_id=${markets[0]}&from=${FROM}&to=${TO}&data_types=trade_bar_1m&speed=1`), key);
    const open = Array.from({ length: perUser }, () => bars(hog.key));
    await until(() => open.every((o) => o.ws.readyState === WebSocket.OPEN));
    // One more, as a WebSocket handshake and as an NDJSON stream: refused, with the detail and Retry-After.
    const ws9 = await new Promise<{ status: number; retry: string | undefined; body: any }>((resolve) => {
      const ws = new WebSocket(wsUrl(`/v1/replay/ws/normalized?market_id=${markets[0]}&from=${FROM}&to=${TO}&data_types=trade_bar_1m`), {
        headers: { 'x-api-key': hog.key },
      });
      ws.on('error', () => {});
      ws.on('unexpected-response', (_q, res) => {
        let body = '';
        res.on('data', (c: Buffer) => (body += String(c)));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, retry: res.headers['retry-after'] as string | undefined, body: JSON.parse(body) }));
      });
    });
    expect(ws9.status).toBe(429);
    expect(Number(ws9.retry)).toBeGreaterThan(0);
    expect(ws9.body.detail.code).toBe('too_many_streams');
    const nd9 = await fetch(`${L.srv.url}${ndjsonPath('trade_bar_1m')}`, { headers: { 'x-api-key': hog.key } });
    expect(nd9.status).toBe(429);
    expect(nd9.headers.get('retry-after')).not.toBeNull();
    expect(((await nd9.json()) as any).detail.code).toBe('too_many_streams');
    // The process has room: another user is served.
    const theirs = bars(other.key);
    await until(() => theirs.ws.readyState === WebSocket.OPEN);
    theirs.ws.close();
    // One of the hog's ends: its slot is free again.
    open[0]!.ws.close();
    await open[0]!.done;
    await until(() => L.srv.ctx.streams.openOf(hog.id) === perUser - 1);
    const again = bars(hog.key);
    await until(() => again.ws.readyState === WebSocket.OPEN);
    for (const o of [...open, again]) o.ws.close();
    await until(() => L.srv.ctx.streams.openOf(hog.id) === 0);
  });
});

describe('one entitlement per data kind, whichever route serves it', () => {
  it('a free key is refused interval books on the NDJSON and WebSocket replays as on their download (402); quotes and bars it gets', async () => {
    const types = 'book_snapshot_10_1s';
    const q = `market_id=${markets[0]}&from=${FROM}&to=${TO}`;
    const dl = await fetch(`${L.srv.url}/v1/download/book_snapshot_interval?market_id=${markets[0]}&interval=1s&depth=10&start=${FROM}&end=${TO}`, {
      headers: { 'x-api-key': L.freeKey },
    });
    expect(dl.status).toBe(402);
    await dl.arrayBuffer();
    const nd = await fetch(`${L.srv.url}/v1/replay/normalized?${q}&data_types=${types}`, { headers: { 'x-api-key': L.freeKey } });
    expect(nd.status).toBe(402);
    expect(((await nd.json()) as any).detail.code).toBe('upgrade_required');
    const ws = await new Promise<number>((resolve) => {
      const c = new WebSocket(wsUrl(`/v1/replay/ws/normalized?${q}&data_types=${types}`), { headers: { 'x-api-key': L.freeKey } });
      c.on('error', () => {});
      c.on('open', () => resolve(101));
      c.on('unexpected-response', (_q, res) => resolve(res.statusCode ?? 0));
    });
    expect(ws).toBe(402);
    const bars = await fetch(`${L.srv.url}/v1/replay/normalized?${q}&data_types=trade_bar_1h`, { headers: { 'x-api-key': L.freeKey } });
    expect(bars.status).toBe(200);
    await bars.arrayBuffer();
  });
});

/** The receive queue (bytes the kernel holds for the application) of this machine's socket from `localPort` to `remotePort`. */
function rxQueue(localPort: number, remotePort: number): number {
  let max = 0;
  for (const f of ['/proc/net/tcp', '/proc/net/tcp6']) {
    let text = '';
    try {
      text = fs.readFileSync(f, 'latin1');
    } catch {
      continue;
    }
    for (const line of text.split('\n').slice(1)) {
      const c = line.trim().split(/\s+/);
      if (c.length < 5) continue;
      const lp = parseInt(c[1]!.split(':').at(-1)!, 16);
      const rp = parseInt(c[2]!.split(':').at(-1)!, 16);
      if (lp === localPort && rp === remotePort) max = Math.max(max, parseInt(c[4]!.split(':')[1]!, 16));
    }
  }
  return max;
}

describe('a client that left is charged what reached it', () => {
  it('an NDJSON client that reads 1 MiB and stops: charged at least that, at most that plus its socket receive queue and 64 KiB', async () => {
    const u = await user('leaver@example.com');
    const url = new URL(`${L.srv.url}${ndjsonPath('book_change,book_snapshot_50_10ms')}`);
    const { read, queued } = await new Promise<{ read: number; queued: number }>((resolve, reject) => {
      const req = http.get(url, { headers: { 'x-api-key': u.key } }, (res) => {
        let read = 0;
        const onData = (c: Buffer): void => {
          read += c.length;
          if (read < MiB) return;
          // Stop reading; let the server's socket fill, then see what the kernel holds for us, and leave.
          res.off('data', onData);
          res.pause();
          setTimeout(() => {
            const s = req.socket!;
            const queued = rxQueue(s.localPort!, s.remotePort!);
            req.destroy();
            resolve({ read, queued });
          }, 1_500);
        };
        res.on('data', onData);
      });
      req.on('error', () => {});
      setTimeout(() => reject(new Error('no data')), 60_000).unref();
    });
    await until(async () => (await listPulls(L.srv.ctx.state, u.id, { limit: 5, offset: 0 })).every((p) => p.status !== 'pending'), 20_000);
    const [pull] = await listPulls(L.srv.ctx.state, u.id, { limit: 5, offset: 0 });
    // What Node's own buffers held for the reader is part of "read" at most by one chunk.
    expect(pull!.status).toBe('completed');
    expect(pull!.bytes!).toBeGreaterThanOrEqual(read - 256 * KiB);
    expect(pull!.bytes!).toBeLessThanOrEqual(read + queued + 64 * KiB);
  });

  it('a WebSocket client that never reads: charged at most its socket receive queue and 64 KiB, not what the server queued', async () => {
    const u = await user('sleeper@example.com');
    const ws = new WebSocket(wsUrl(`/v1/replay/ws/normalized?market_id=${markets.join(',')}&from=${FROM}&to=${TO}&data_types=book_snapshot_50_10ms&speed=0`), {
      headers: { 'x-api-key': u.key },
      perMessageDeflate: false,
    });
    ws.on('error', () => {});
    let received = 0;
    ws.on('message', (d) => (received += (d as Buffer).length));
    await new Promise<void>((r) => ws.on('open', () => r()));
    const sock = (ws as unknown as { _socket: import('node:net').Socket })._socket;
    sock.pause();
    const counters = (await import('../../src/http/replay/index.js')).replayServerOf(L.srv.ctx)!.counters;
    const sent0 = counters.bytesSent;
    // The stream starts (its first lake reads), fills the sockets, then stalls on the client that does not read.
    await until(() => counters.bytesSent - sent0 > 2 * MiB, 60_000);
    await new Promise((r) => setTimeout(r, 1_500));
    const queued = rxQueue(sock.localPort!, sock.remotePort!);
    const handed = counters.bytesSent - sent0;
    ws.terminate();
    await until(async () => (await listPulls(L.srv.ctx.state, u.id, { limit: 5, offset: 0 })).every((p) => p.status !== 'pending'), 20_000);
    const [pull] = await listPulls(L.srv.ctx.state, u.id, { limit: 5, offset: 0 });
    const charged = pull!.status === 'completed' ? pull!.bytes! : 0;
    expect(handed).toBeGreaterThan(1 * MiB);
    expect(charged).toBeLessThanOrEqual(received + queued + 64 * KiB);
  });
});
