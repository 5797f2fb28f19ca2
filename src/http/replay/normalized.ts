import { z } from 'zod';
import type { WebSocket } from 'ws';
import type { LiveStream } from '../../accounts/streams.js';
import type { LakeSession } from '../../lake/session.js';
import { isoFromMicros } from '../../lake/values.js';
import type { MarketResolver } from '../../markets/resolver.js';
import { normalizedMessages, resolveReplayAssets } from '../../replay/normalized.js';
import type { NormalizedMessage } from '../../replay/normalized-types.js';
import { delayCap } from '../orderbook/delay.js';
import { checkNormalizedWindow, NormalizedWindow, planKeys } from '../replay-normalized.js';
import type { ReplayGateSpec } from './gate.js';
import { serveReplayStream, type ReplayStreamEnd, type ReplayStreamItem } from './stream.js';

/**
 * GET /v1/replay/ws/normalized?from=&to=&assets=|market_id=&data_types=&speed=: the normalized and computed streams
 * of GET /v1/replay/normalized (src/replay/normalized.ts) as WebSocket text frames, one message each, paced by the
 * messages' times like the venue replay (speed 1 recorded pace, 60 sixty times faster, 0 as fast as the client
 * reads). The stream names its tokens in the URL (no subscription message): it starts at the upgrade and closes
 * 1000 at `to`. Gate, metering and close codes are the market replay's (docs/api.md, "Replay").
 */
export const NormalizedReplayQuery = NormalizedWindow.extend({
  speed: z.coerce.number().min(0).max(1_000_000).default(0).describe('1 = recorded pace, 60 = sixty times faster, 0 = as fast as the client reads (default)'),
}).superRefine(checkNormalizedWindow);

export type NormalizedReplayQuery = z.infer<typeof NormalizedReplayQuery>;

export function normalizedReplayGate(deps: { session: () => LakeSession; markets: MarketResolver }): ReplayGateSpec<typeof NormalizedReplayQuery> {
  return {
    query: NormalizedReplayQuery,
    // The first type's plan data set is billed; every other type's must be covered too (authorize).
    dataset: (q) => planKeys(q.data_types)[0] ?? 'orderbook',
    datasets: (q) => (planKeys(q.data_types).length > 0 ? planKeys(q.data_types) : ['orderbook']),
    async authorize(q, principal, ctx) {
      // Unknown tokens are a 404 before the upgrade, not a close after it.
      await resolveReplayAssets(deps.session(), deps.markets, { assets: q.assets, marketIds: q.market_id });
      for (const k of planKeys(q.data_types).slice(1)) await ctx.meter.authorize(principal, { kind: 'download', dataset: k });
    },
    describe: (q) => ({
      description: `replay ws normalized ${q.data_types.map((t) => t.name).join(',')} from ${isoFromMicros(q.from)} to ${isoFromMicros(q.to)}`,
      start: isoFromMicros(q.from),
      end: isoFromMicros(q.to),
    }),
  };
}

/** A message's instant for pacing: its receive time on the tape, else its own time. */
function itemOf(m: NormalizedMessage): ReplayStreamItem {
  const at = 'recv_ts' in m && typeof m.recv_ts === 'string' ? m.recv_ts : m.ts;
  return { recvMs: Date.parse(at), text: JSON.stringify(m) };
}

async function* items(source: AsyncIterable<NormalizedMessage>): AsyncGenerator<ReplayStreamItem> {
  for await (const m of source) yield itemOf(m);
}

export async function runNormalizedReplay(
  ws: WebSocket,
  q: NormalizedReplayQuery,
  deps: {
    session: LakeSession;
    markets: MarketResolver;
    principal: Parameters<typeof delayCap>[0];
    live: LiveStream;
    onSent: (bytes: number) => void;
  },
): Promise<ReplayStreamEnd> {
  const assets = await resolveReplayAssets(deps.session, deps.markets, { assets: q.assets, marketIds: q.market_id });
  // A delayed plan sees books and quotes no later than its delay, as on GET /v1/replay/normalized.
  const cap = delayCap(deps.principal);
  const to = cap !== null && q.to > cap ? cap : q.to;
  const abort = new AbortController();
  const source = normalizedMessages(deps.session, { from: q.from, to, assets, dataTypes: q.data_types, signal: abort.signal });
  return serveReplayStream(ws, items(source), {
    speed: q.speed,
    originMs: Number(q.from / 1000n),
    abort,
    live: deps.live,
    onSent: deps.onSent,
  });
}
