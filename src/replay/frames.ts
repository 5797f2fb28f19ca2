import type { LakeSession } from '../lake/session.js';
import { replayFramesQuery } from '../query/replay-frames.js';

/**
 * The recorded frames of a window, in receive order (recv_ts, then seq), read from the lake's `raw` data set in
 * pages: bounded memory whatever the window. A page is a time slice [lo, hi) read after a cursor with a LIMIT,
 * so one statement never sorts more than a slice of the window nor returns more than a page.
 */

export type RawFrame = { recvUs: bigint; seq: bigint; text: string };

/** What a reader counts: frames read from the lake and pages (statements) run. */
export type ReadCounters = { framesRead: number; pages: number };

export type FrameReadOptions = {
  /** [from, to) in epoch microseconds. */
  from: bigint;
  to: bigint;
  /** Markets whose frames to read (null: all); re-read before each page, so a subscription change applies at once. */
  conditionIds: () => readonly string[] | null;
  /** Also `new_market` frames of any market. */
  announcements: () => boolean;
  /** Start after this frame (a restart after a subscription change). */
  after?: { recvUs: bigint; seq: bigint } | null;
  signal?: AbortSignal;
  pageRows?: number;
  counters?: ReadCounters;
};

const FIRST_SLICE_US = 60_000_000n;
const MIN_SLICE_US = 1_000n;
const MAX_SLICE_US = 86_400_000_000n;
/** A page aims at this many bytes of frames (its row limit follows the frames' size), within these rows. */
const PAGE_BYTES = 8 << 20;
const MIN_PAGE_ROWS = 100;
const MAX_PAGE_ROWS = 50_000;

/**
 * Each statement decodes whole row groups, so its cost barely depends on how many rows it returns: the slice is
 * sized from the density just seen to fill one page, and the page's row limit from the frames' size to hold
 * about PAGE_BYTES.
 */
export async function* recordedFrames(session: LakeSession, o: FrameReadOptions): AsyncGenerator<RawFrame> {
  let limit = o.pageRows ?? 1000;
  let after = o.after ?? null;
  let lo = after ? after.recvUs : o.from;
  let slice = FIRST_SLICE_US;
  while (lo < o.to && !o.signal?.aborted) {
    const hi = lo + slice < o.to ? lo + slice : o.to;
    const rows = await session.rows(
      replayFramesQuery(session.sources, {
        sliceStart: lo,
        sliceEnd: hi,
        after,
        conditionIds: o.conditionIds(),
        announcements: o.announcements(),
        limit,
      }),
    );
    if (o.counters) {
      o.counters.pages++;
      o.counters.framesRead += rows.length;
    }
    const full = rows.length >= limit;
    let bytes = 0;
    for (const r of rows) {
      const f: RawFrame = { recvUs: BigInt(r.recv_us as number | string), seq: BigInt(r.seq as number | string), text: r.frame as string };
      bytes += f.text.length;
      after = { recvUs: f.recvUs, seq: f.seq };
      yield f;
      if (o.signal?.aborted) return;
    }
    const pageRows = limit;
    if (rows.length > 0 && o.pageRows === undefined) limit = clamp(Math.round(PAGE_BYTES / (bytes / rows.length)), MIN_PAGE_ROWS, MAX_PAGE_ROWS);
    if (full) {
      // More in this slice: continue after the last frame.
      lo = after!.recvUs;
      continue;
    }
    // The slice is exhausted: the next one starts at its end, sized to fill a page at the density just seen.
    const span = hi - lo;
    lo = hi;
    after = null;
    const aim = rows.length === 0 ? span * 8n : (span * BigInt(pageRows)) / BigInt(rows.length);
    slice = aim < MIN_SLICE_US ? MIN_SLICE_US : aim > MAX_SLICE_US ? MAX_SLICE_US : aim > span * 8n ? span * 8n : aim;
  }
}

function clamp(n: number, min: number, max: number): number {
  return Math.min(max, Math.max(min, n));
}

/** What a connection receives: its subscribed assets, and whether it asked for the custom-feature messages. */
export type Interest = { assets: ReadonlySet<string>; custom: boolean };

type Msg = Record<string, unknown>;

/** Messages the venue sends only to connections that set `custom_feature_enabled`. */
const CUSTOM_ONLY = new Set(['best_bid_ask', 'new_market', 'market_resolved']);

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
