import type { LakeSession } from '../lake/session.js';
import { dateOf } from '../query/common.js';
import type { ReplayFileRead } from '../query/replay-frames.js';
import { fileSegments, indexRunBatches, mergeRuns, runBatches, type RawFrame, type ReadCounters } from './raw-runs.js';

export type { RawFrame, ReadCounters } from './raw-runs.js';

export type FrameReadOptions = {
  /** [from, to) in epoch microseconds. */
  from: bigint;
  to: bigint;
  /** Markets whose frames to read (null: all), read when the reads start: a change restarts them (./market.ts). */
  conditionIds: () => readonly string[] | null;
  /** Also `new_market` frames of any market. */
  announcements: () => boolean;
  /** Which frames the connection receives whole (src/query/replay-frames.ts `whole`), read with conditionIds. */
  whole?: () => ReplayFileRead['whole'];
  /** Start after this frame (a restart after a subscription change). */
  after?: { recvUs: bigint; seq: bigint } | null;
  signal?: AbortSignal;
  counters?: ReadCounters;
};

/**
 * The recorded frames of a window, in receive order (recv_ts, then seq), in batches, read from the lake's `raw`
 * data set, or from its market index for a read narrowed to markets, by one streaming statement per run of files
 * (./raw-runs.ts) — no sort of the window, no pages. Memory is one DuckDB chunk and one batch per run, whatever
 * the window (plus, for an index read of several markets, DuckDB's sort of one day of their frames, within its
 * memory limit): the next chunk is pulled only when the consumer asks for the batch after the ones in hand, so a
 * consumer that stops stops the reads, and ending early ends the statements.
 */
export async function* recordedFrames(session: LakeSession, o: FrameReadOptions): AsyncGenerator<RawFrame[]> {
  const after = o.after ?? null;
  const start = after && after.recvUs > o.from ? after.recvUs : o.from;
  if (start >= o.to || o.signal?.aborted) return;
  const read: ReplayFileRead = {
    start: o.from,
    end: o.to,
    after,
    conditionIds: o.conditionIds(),
    announcements: o.announcements(),
    whole: o.whole?.() ?? null,
  };
  const markets = read.conditionIds;
  // The market index serves reads narrowed to markets; a custom-feature connection also gets every market's
  // `new_market` announcements, which only time-ordered raw holds together.
  const byMarket = markets !== null && markets.length > 0 && !read.announcements;
  // Segments cover successive days, so they are read one after the other, each opened only once the one before
  // is done.
  for (const seg of fileSegments(session, dateOf(start), dateOf(o.to - 1n), byMarket)) {
    const runs = seg.runs.map((files) =>
      seg.dataset === 'raw_by_market' && markets
        ? indexRunBatches(session, files, { ...read, conditionIds: markets }, o.counters)
        : runBatches(session, files, read, o.counters),
    );
    if (runs.length === 0) continue;
    for await (const batch of runs.length === 1 ? runs[0]! : mergeRuns(runs)) {
      if (o.signal?.aborted) return;
      yield batch;
    }
  }
}

/** What a connection receives: its subscribed assets, and whether it asked for the custom-feature messages. */
export type Interest = { assets: ReadonlySet<string>; custom: boolean };

type Msg = Record<string, unknown>;

/** Messages the venue sends only to connections that set `custom_feature_enabled`. */
const CUSTOM_ONLY = new Set(['best_bid_ask', 'new_market', 'market_resolved']);

/** Message types every connection receives for its subscribed assets (frameFor's rule, by asset). */
const PER_ASSET = ['book', 'price_change', 'last_trade_price', 'tick_size_change'];

/**
 * The message types that, in a frame of only fully subscribed markets, frameFor keeps whole: so a frame whose
 * types are all of these is sent as recorded without being parsed (the read's `whole` flag).
 */
export function wholeEventTypes(custom: boolean): string[] {
  return custom ? [...PER_ASSET, ...CUSTOM_ONLY] : PER_ASSET;
}

/**
 * A recorded frame as the venue would have sent it to this connection, or null when nothing of it concerns the
 * connection. The rule, per message of the frame (a JSON array of messages, or one message):
 *  - a message with `asset_id` is kept when that asset is subscribed;
 *  - a new-shape `price_change` (`price_changes[]`, one entry per asset) keeps only the subscribed entries, and
 *    goes when none is left;
 *  - `market_resolved` (`assets_ids`) is kept when one of its assets is subscribed; `new_market` always (the
 *    venue announces new markets to every custom-feature connection);
 *  - `best_bid_ask`, `new_market` and `market_resolved` only for a custom-feature connection;
 *  - anything else (no asset, not JSON) is not sent.
 * A frame whose messages are all kept is returned byte for byte as recorded; otherwise the kept messages are
 * written again as compact JSON (an array frame stays an array), their keys in the recorded order.
 */
export function frameFor(text: string, interest: Interest): string | null {
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch {
    return null;
  }
  const isArray = Array.isArray(doc);
  const msgs = (isArray ? (doc as unknown[]) : [doc]) as unknown[];
  const kept: Msg[] = [];
  let changed = false;
  for (const m of msgs) {
    const k = messageFor(m, interest);
    if (k !== m) changed = true;
    if (k) kept.push(k);
  }
  if (!changed) return text;
  if (kept.length === 0) return null;
  return JSON.stringify(isArray ? kept : kept[0]);
}

/** The message itself when kept whole, a copy with fewer `price_changes` entries, or null. */
function messageFor(m: unknown, interest: Interest): Msg | null {
  if (typeof m !== 'object' || m === null || Array.isArray(m)) return null;
  const msg = m as Msg;
  const type = msg.event_type;
  if (typeof type === 'string' && CUSTOM_ONLY.has(type) && !interest.custom) return null;
  if (type === 'new_market') return msg;
  if (Array.isArray(msg.price_changes)) {
    const entries = msg.price_changes as unknown[];
    const mine = entries.filter((e) => typeof e === 'object' && e !== null && interest.assets.has(String((e as Msg).asset_id)));
    if (mine.length === entries.length) return msg;
    return mine.length === 0 ? null : { ...msg, price_changes: mine };
  }
  if (typeof msg.asset_id === 'string') return interest.assets.has(msg.asset_id) ? msg : null;
  if (Array.isArray(msg.assets_ids)) return msg.assets_ids.some((a) => typeof a === 'string' && interest.assets.has(a)) ? msg : null;
  return null;
}
