import type { LakeSession } from '../lake/session.js';
import type { ReplayFileRead } from '../query/replay-frames.js';
import { frameFor, recordedFrames, wholeEventTypes, type Interest, type ReadCounters } from './frames.js';
import { openingBookFrames, type KnownAsset } from './opening-books.js';

/**
 * The replay of the venue's market channel for one connection: the books of its assets at the start, then the
 * recorded frames of its assets in receive order, each as the venue would have sent it (./frames.ts frameFor).
 * The subscription may change while it runs (the venue's subscribe/unsubscribe operations): the lake is read
 * again from the last frame sent with the new set, and newly subscribed assets first get their book there.
 */
export type ReplayItem = { recvMs: number; text: string };

export class MarketSubscription {
  private readonly known = new Map<string, KnownAsset>();
  private pending: KnownAsset[] = [];
  private cached: { version: number; interest: Interest; cids: string[]; whole: string[] } | null = null;
  /** Grows with every change; the replay compares it to notice one. */
  version = 0;
  custom = false;

  get size(): number {
    return this.known.size;
  }

  has(assetId: string): boolean {
    return this.known.has(assetId);
  }

  /** Adds assets; with `dump` (the venue's `initial_dump`, on unless false) their books are sent first. */
  add(assets: readonly KnownAsset[], dump: boolean): void {
    const fresh = assets.filter((a) => !this.known.has(a.assetId));
    if (fresh.length === 0) return;
    for (const a of fresh) this.known.set(a.assetId, a);
    if (dump) this.pending.push(...fresh);
    this.version++;
  }

  remove(assetIds: readonly string[]): void {
    let n = 0;
    for (const id of assetIds) if (this.known.delete(id)) n++;
    this.pending = this.pending.filter((a) => this.known.has(a.assetId));
    if (n > 0) this.version++;
  }

  /** Books still to send (each once). */
  takeBooks(): KnownAsset[] {
    const due = this.pending;
    this.pending = [];
    return due;
  }

  interest(): Interest {
    return this.current().interest;
  }

  conditionIds(): string[] {
    return this.current().cids;
  }

  /** What the lake read may flag as received whole: the markets every outcome token of which is subscribed. */
  whole(): ReplayFileRead['whole'] {
    const c = this.current();
    return c.whole.length > 0 ? { conditionIds: c.whole, eventTypes: wholeEventTypes(this.custom) } : null;
  }

  private current(): { version: number; interest: Interest; cids: string[]; whole: string[] } {
    if (this.cached?.version !== this.version) {
      const assets = new Set(this.known.keys());
      const byCid = new Map<string, KnownAsset>();
      for (const a of this.known.values()) byCid.set(a.conditionId, a);
      const cids = [...byCid.keys()];
      const whole = [...byCid.values()]
        .filter((a) => a.market.tokens.length > 0 && a.market.tokens.every((t) => assets.has(t.token_id)))
        .map((a) => a.conditionId);
      this.cached = { version: this.version, interest: { assets, custom: this.custom }, cids, whole };
    }
    return this.cached;
  }
}

export type MarketReplayOptions = {
  /** [from, to) in epoch microseconds. */
  from: bigint;
  to: bigint;
  sub: MarketSubscription;
  signal: AbortSignal;
  /**
   * Hand frames on one at a time, the subscription checked after each: a paced replay (speed > 0) spends
   * recorded minutes on a batch, and a change must take effect at the next frame. At full speed a batch (up to
   * 256 frames) goes at once, so a change takes effect after it, as frames in flight do on the live channel.
   */
  perFrame?: boolean;
  counters?: ReadCounters;
};

/** The replay's frames in batches (one lake batch at a time): the socket side takes a batch with one await. */
export async function* marketReplay(session: LakeSession, o: MarketReplayOptions): AsyncGenerator<ReplayItem[]> {
  const { sub } = o;
  let cursor: { recvUs: bigint; seq: bigint } | null = null;
  for (;;) {
    const seen = sub.version;
    const due = sub.takeBooks();
    let changed = false;
    const frames = recordedFrames(session, {
      from: o.from,
      to: o.to,
      after: cursor,
      conditionIds: () => sub.conditionIds(),
      announcements: () => sub.custom,
      whole: () => sub.whole(),
      signal: o.signal,
      ...(o.counters ? { counters: o.counters } : {}),
    });
    // The first frames are read while the books are rebuilt: both are lake statements, and the time to the first
    // frame is what a client waits before anything.
    const first = frames.next();
    first.catch(() => undefined);
    try {
      if (due.length > 0) {
        // At the start the book just before `from`; later, the book after the last frame sent.
        const at = cursor ? cursor.recvUs + 1n : o.from;
        const books = await openingBookFrames(session, due, at);
        if (o.signal.aborted) return;
        const recvMs = msOf(cursor ? cursor.recvUs : o.from);
        if (books.length > 0) yield books.map((text) => ({ recvMs, text }));
      }
      read: for (let r = await first; !r.done; r = await frames.next()) {
        // A frame read under the old subscription is read again under the new one, from the last frame handed on.
        if (sub.version !== seen) {
          changed = true;
          break;
        }
        const interest = sub.interest();
        const out: ReplayItem[] = [];
        for (const f of r.value) {
          const text = f.whole ? f.text : frameFor(f.text, interest);
          if (text === null) continue;
          if (!o.perFrame) {
            out.push({ recvMs: msOf(f.recvUs), text });
            continue;
          }
          cursor = { recvUs: f.recvUs, seq: f.seq };
          yield [{ recvMs: msOf(f.recvUs), text }];
          if (sub.version !== seen) {
            changed = true;
            break read;
          }
        }
        // The batch is handed on whole: the read resumes after its last frame, sent or cut away.
        const last = r.value[r.value.length - 1];
        if (last) cursor = { recvUs: last.recvUs, seq: last.seq };
        if (out.length > 0) yield out;
        if (sub.version !== seen) {
          changed = true;
          break;
        }
      }
    } finally {
      // Ends the read's statements when the loop stops early (a change, the client gone).
      await frames.return(undefined);
    }
    if (!changed || o.signal.aborted) return;
  }
}

function msOf(us: bigint): number {
  return Number(us / 1000n);
}
