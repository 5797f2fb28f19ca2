import fs from 'node:fs';
import path from 'node:path';
import { WebSocket } from 'ws';
import { runIngest } from '../../ingest/run.js';
import type { RunningServer } from '../../src/server.js';
import { activateSubscriptionTx } from '../../src/state/accounts.js';
import { startTestServer, testConfig } from '../helpers/server.js';
import type { Msg } from '../ingest/oracle.js';

/**
 * The replay tests' independent side: the fixture captures read in plain TypeScript (each frame's exact text
 * sliced from its file, its receive time by the lake's documented rule), and a real `ws` client.
 */

export const FIX = path.resolve('test/fixtures/venue/ws');
export const ARRAYS = path.join(FIX, '2025-03-02_book_price_change_v1.json');
export const WRAPPED = path.join(FIX, '2025-03-02_last_trade_price_wrapped.json');
export const LINES = path.join(FIX, '2026-08-14_frames_price_change_v2.jsonl');
export const FIXTURES = [ARRAYS, WRAPPED, LINES];

export type FixFrame = { recvMs: number; text: string; msgs: Msg[]; order: number };

/** The texts of a JSON document's top-level array elements, byte for byte (strings and nesting respected). */
export function topLevelElements(doc: string): string[] {
  const out: string[] = [];
  let depth = 0;
  let start = -1;
  let inString = false;
  for (let i = 0; i < doc.length; i++) {
    const ch = doc[i]!;
    if (inString) {
      if (ch === '\\') i++;
      else if (ch === '"') inString = false;
      continue;
    }
    if (ch === '"') {
      inString = true;
      if (depth === 1 && start < 0) start = i;
    } else if (ch === '[' || ch === '{') {
      if (depth === 1 && start < 0) start = i;
      depth++;
    } else if (ch === ']' || ch === '}') {
      depth--;
      if (depth === 1 && start >= 0) {
        out.push(doc.slice(start, i + 1));
        start = -1;
      }
    }
  }
  return out;
}

const newest = (msgs: Msg[]): number => Math.max(...msgs.map((m) => Number(m.timestamp)));

/**
 * Every frame of the three fixtures, in receive order. Receive time (lake/README.md): a wrapper's timestamp, else
 * the newest venue timestamp of the frame made non-decreasing in file order.
 */
export function fixtureFrames(): FixFrame[] {
  const frames: FixFrame[] = [];
  let order = 0;
  let run = 0;
  for (const text of topLevelElements(fs.readFileSync(ARRAYS, 'utf8'))) {
    const msgs = JSON.parse(text) as Msg[];
    run = Math.max(run, newest(msgs));
    frames.push({ recvMs: run, text, msgs, order: order++ });
  }
  for (const w of JSON.parse(fs.readFileSync(WRAPPED, 'utf8')) as { timestamp: string; message: Msg }[]) {
    frames.push({ recvMs: Number(w.timestamp), text: JSON.stringify(w.message), msgs: [w.message], order: order++ });
  }
  run = 0;
  for (const line of fs
    .readFileSync(LINES, 'utf8')
    .split('\n')
    .filter((l) => l.trim())) {
    const m = JSON.parse(line) as Msg;
    run = Math.max(run, newest([m]));
    frames.push({ recvMs: run, text: line, msgs: [m], order: order++ });
  }
  return frames.sort((a, b) => a.recvMs - b.recvMs || a.order - b.order);
}

/** The assets a message concerns (its asset_id, or each new-shape price_change entry's). */
export function assetsOf(m: Msg): string[] {
  if (Array.isArray(m.price_changes)) return (m.price_changes as Msg[]).map((e) => String(e.asset_id));
  return typeof m.asset_id === 'string' ? [m.asset_id] : [];
}

export type Received = { texts: string[]; at: number[]; close: Promise<{ code: number; reason: string }>; ws: WebSocket };

/** A real client: connects, sends `subscription` once open, records every text frame (and when it arrived). */
export function connect(url: string, opts: { key?: string; header?: boolean; subscription?: unknown } = {}): Received {
  const headers: Record<string, string> = opts.key && opts.header ? { 'x-api-key': opts.key } : {};
  const u = opts.key && !opts.header ? `${url}${url.includes('?') ? '&' : '?'}api_key=${encodeURIComponent(opts.key)}` : url;
  const ws = new WebSocket(u, { headers, perMessageDeflate: false });
  const texts: string[] = [];
  const at: number[] = [];
  ws.on('message', (d, isBinary) => {
    if (isBinary) return;
    at.push(performance.now());
    texts.push(String(d));
  });
  ws.on('error', () => {});
  if (opts.subscription !== undefined)
    ws.on('open', () => ws.send(typeof opts.subscription === 'string' ? opts.subscription : JSON.stringify(opts.subscription)));
  const close = new Promise<{ code: number; reason: string }>((resolve) => ws.on('close', (code, reason) => resolve({ code, reason: String(reason) })));
  return { texts, at, close, ws };
}

/** A handshake refused before the upgrade: its HTTP status and JSON body. */
export function refusal(url: string, headers: Record<string, string> = {}): Promise<{ status: number; body: { detail: unknown } }> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, { headers });
    ws.on('open', () => reject(new Error('upgraded')));
    ws.on('error', () => {});
    ws.on('unexpected-response', (_req, res) => {
      let body = '';
      res.on('data', (c: Buffer) => (body += String(c)));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: JSON.parse(body) as { detail: unknown } }));
    });
  });
}

/** Polls `cond` until it holds or the deadline passes. */
export async function until(cond: () => boolean | Promise<boolean>, ms = 10_000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > end) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** A server over a lake of the fixture captures (ingested into `dir`), and its market replay's ws URL. */
export async function fixtureReplayServer(dir: string, env: Record<string, string> = {}): Promise<{ srv: RunningServer; ws: string }> {
  const lake = path.join(dir, 'lake');
  const report = await runIngest(FIXTURES, { lakeDir: lake, threads: 2 });
  if (report.failed !== 0) throw new Error(`fixture ingest failed: ${JSON.stringify(report.issues)}`);
  const srv = await startTestServer(testConfig({ PMLAKE_LAKE: lake, PMLAKE_STATE: path.join(dir, 'state'), ...env }));
  return { srv, ws: `${srv.url.replace('http', 'ws')}/v1/replay/ws/market` };
}

/** A user on an active professional subscription (the raw tape covered) and a fresh API key of theirs. */
export async function proUser(srv: RunningServer, email: string): Promise<{ id: string; key: string }> {
  const store = srv.ctx.state;
  const user = await store.upsertUser(email, 'professional');
  await store.tx((t) => activateSubscriptionTx(t, { userId: user.id, tier: 'professional', billingPeriod: 'monthly', fundedBy: 'grant', at: new Date() }));
  return { id: user.id, key: (await store.createApiKey({ userId: user.id, name: 't', prefix: srv.ctx.config.keyPrefix })).plaintext };
}
