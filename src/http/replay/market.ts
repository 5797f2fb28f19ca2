import { z } from 'zod';
import type { WebSocket } from 'ws';
import type { LiveStream } from '../../accounts/streams.js';
import type { LakeSession } from '../../lake/session.js';
import type { MarketResolver } from '../../markets/resolver.js';
import type { ReadCounters } from '../../replay/frames.js';
import { marketReplay, MarketSubscription } from '../../replay/market.js';
import { knownAsset, LOOKUPS_IN_FLIGHT, type KnownAsset } from '../../replay/opening-books.js';
import { mapLimit } from '../../map-limit.js';
import { INVALID_OPERATION, parseClientMessage } from '../../replay/venue-protocol.js';
import { isoFromMicros } from '../../lake/values.js';
import { instantParam } from '../params.js';
import type { ReplayGateSpec } from './gate.js';
import { close, CLOSE, serveReplayStream, type ReplayStreamEnd } from './stream.js';

/**
 * GET /v1/replay/ws/market?from=&to=&speed=: the venue's market channel replayed from the lake. After the
 * upgrade the client speaks to it as to the venue: its subscription (`{"assets_ids":[…],"type":"market"}`), later
 * subscribe/unsubscribe operations, text PING (answered PONG). The stream: the books at `from` (rebuilt, see
 * src/replay/opening-books.ts), then the recorded frames of the subscribed assets, paced by `speed`, closed with
 * 1000 at `to`.
 */
export const MarketReplayQuery = z
  .object({
    from: instantParam.describe('Start of the replay window (inclusive): ISO 8601 or epoch seconds/milliseconds'),
    to: instantParam.describe('End of the replay window (exclusive)'),
    speed: z.coerce.number().min(0).max(1_000_000).default(1).describe('1 = recorded pace, 60 = sixty times faster, 0 = as fast as the client reads'),
  })
  .superRefine((v, ctx) => {
    if (v.from > v.to) ctx.addIssue({ code: 'custom', path: ['from'], message: 'from must not be after to', input: undefined });
  });

export type MarketReplayQuery = z.infer<typeof MarketReplayQuery>;

export const marketReplayGate: ReplayGateSpec<typeof MarketReplayQuery> = {
  query: MarketReplayQuery,
  dataset: 'raw',
  describe: (q) => ({
    description: `replay ws market from ${isoFromMicros(q.from)} to ${isoFromMicros(q.to)} at speed ${q.speed}`,
    start: isoFromMicros(q.from),
    end: isoFromMicros(q.to),
  }),
};

/** The venue's limit of assets on one connection. */
const MAX_ASSETS = 500;
/** How long a connection may stay without its subscription. */
const SUBSCRIBE_WITHIN_MS = 30_000;

export type MarketReplayDeps = {
  session: LakeSession;
  markets: MarketResolver;
  counters: ReadCounters;
  live: LiveStream;
  onSent: (bytes: number) => void;
};

/** Runs one replay connection to its end: what was sent, and why it ended (`refused`: closed before any frame). */
export async function runMarketReplay(ws: WebSocket, q: MarketReplayQuery, deps: MarketReplayDeps): Promise<ReplayStreamEnd | { reason: 'refused' }> {
  const sub = new MarketSubscription();
  const abort = new AbortController();
  // Messages are handled one after another: a subscription resolves its assets in the lake before the next.
  let chain: Promise<void> = Promise.resolve();
  let started: (() => void) | null = null;
  let refused = false;
  const initial = new Promise<void>((resolve) => (started = resolve));
  const refuse = (code: number, reason: string): void => {
    refused = true;
    close(ws, code, reason);
    abort.abort();
    started?.();
  };

  const resolveAll = async (ids: readonly string[]): Promise<KnownAsset[] | null> => {
    const unique = [...new Set(ids)];
    const out = await mapLimit(unique, LOOKUPS_IN_FLIGHT, (id) => knownAsset(deps.session, deps.markets, id));
    const unknown = out.findIndex((a) => a === null);
    if (unknown >= 0) {
      refuse(CLOSE.unknownAsset, `unknown asset: ${unique[unknown]!.slice(0, 100)}`);
      return null;
    }
    return out as KnownAsset[];
  };

  const onText = async (text: string): Promise<void> => {
    if (abort.signal.aborted) return;
    const msg = parseClientMessage(text);
    if (msg.kind === 'ping') return void ws.send('PONG');
    const first = started !== null;
    if (msg.kind === 'invalid' || (msg.kind === 'initial' && !first)) {
      // The venue's own answer; before the subscription the replay has nothing to play, so it also closes.
      ws.send(INVALID_OPERATION);
      if (first) refuse(CLOSE.malformed, 'malformed subscription: expected {"assets_ids":[...],"type":"market"}');
      return;
    }
    if (msg.kind === 'update' && !msg.subscribe) return sub.remove(msg.assets);
    if (sub.size + msg.assets.filter((a) => !sub.has(a)).length > MAX_ASSETS) {
      return refuse(CLOSE.tooManyAssets, `more than ${MAX_ASSETS} assets on one connection`);
    }
    const assets = await resolveAll(msg.assets);
    if (!assets) return;
    if (msg.kind === 'initial') sub.custom = msg.custom;
    sub.add(assets, msg.initialDump);
    const go = started;
    started = null;
    go?.();
  };

  ws.on('message', (data, isBinary) => {
    if (isBinary) return;
    const text = Buffer.isBuffer(data) ? data.toString() : Buffer.concat(Array.isArray(data) ? data : [Buffer.from(data)]).toString();
    chain = chain.then(() => onText(text)).catch(() => refuse(CLOSE.error, 'subscription failed'));
  });
  // A client that leaves before subscribing ends the wait at once.
  ws.once('close', () => {
    abort.abort();
    started?.();
  });
  const timer = setTimeout(() => refuse(CLOSE.noSubscription, `no subscription within ${SUBSCRIBE_WITHIN_MS / 1000} s`), SUBSCRIBE_WITHIN_MS);
  await initial;
  clearTimeout(timer);
  if (refused || abort.signal.aborted) return { reason: 'refused' };

  const source = marketReplay(deps.session, { from: q.from, to: q.to, sub, signal: abort.signal, counters: deps.counters, perFrame: q.speed > 0 });
  const end = await serveReplayStream(ws, source, {
    speed: q.speed,
    originMs: Number(q.from / 1000n),
    abort,
    live: deps.live,
    onSent: deps.onSent,
  });
  return end;
}
