import { csvMessages, jsonElements, type Msg } from './oracle.js';

/**
 * Independent replay of a venue websocket capture for the tape-integrity checks (issue 15), in plain
 * TypeScript: JSON.parse, Maps of price → size, BigInt micro-units. It imports nothing from ingest/ and is
 * written from the venue facts (shared/fixtures/venue/SOURCES.md) and the lake contract (lake/README.md:
 * receive time and seq; /work/notes/integrity-design.md: checkpoints), never from the ingest code.
 *
 * Rules applied per token, in arrival order:
 * - `book` replaces the token's book (bids and asks; a level of size 0 is no level).
 * - `price_change` (old shape `changes[]` for `asset_id`, new shape `price_changes[]` each with its own
 *   `asset_id`) sets the level's new total; size 0 removes it. BUY → bid, SELL → ask.
 * - A `book` checkpoint is a `book` message of a token with an earlier level message (book or price_change):
 *   ok when the message's levels equal the replayed book just before it; its stretch starts at the token's
 *   previous book, else at its first message (integrity-design.md). A `book` that is the token's first message
 *   has nothing to compare with and is no checkpoint. (Agreed with core's ingest/integrity/tracker.ts: a token
 *   whose first messages are price_changes on an unknown book fails its first book — the base was missed.)
 * - A trade reaches the tape only as the traded token's next `book` (the venue sends `book` "when there is a
 *   trade that affects the book"; no price_change carries the level it took). With `{ trades: true }` each
 *   `last_trade_price` takes its size off the maker's level (taker BUY → the ask at that price, SELL → the bid;
 *   ≤ 0 removes it) before the next book is compared; without it the comparison is the strict one.
 * - A `top` checkpoint is, per new-shape price_change message and token with an earlier level message, the entry's
 *   best_bid/best_ask (the venue's touch after the message: every entry of one token in one message carries
 *   the same touch) compared with the replayed touch after applying all of the message's entries. An empty
 *   side is the venue's "0" bid / "1" ask.
 */

export type TapeMessage = { msg: Msg; recvMs: number; seq: bigint; frame: number };

export type Checkpoint = {
  asset_id: string;
  seq: bigint;
  recvMs: number;
  kind: 'book' | 'top';
  ok: boolean;
  /** book: receive time of the token's previous book (the stretch (sinceMs, recvMs] it verifies). */
  sinceMs?: number;
  /** book: seq of the token's previous book. */
  sinceSeq?: bigint;
  /** book: levels that differ (price on a side present in one book only, or with another size). */
  differing?: number;
  /** book: those levels, bids then asks, as micro-unit price and the two sizes (absent = 0). */
  levels?: { side: 'bid' | 'ask'; price: bigint; expected: bigint; replayed: bigint }[];
};

export type Counts = { passed: number; failed: number };
export type Integrity = { book: Counts; top: Counts; checkpoints: Checkpoint[]; firstBooks: number };

const num = (x: unknown): number | null => {
  if (x === null || x === undefined || x === '') return null;
  const n = Number(x);
  return Number.isFinite(n) ? n : null;
};

/** Elements of a JSON capture, each with the wrapper's receive time when a capturing program recorded one. */
function elementsOf(file: string): { msgs: Msg[]; wrapMs: number | null }[] {
  return jsonElements(file).map((el) => {
    if (Array.isArray(el)) return { msgs: el as Msg[], wrapMs: null };
    const o = el as Record<string, unknown>;
    if (o.message && o.timestamp) return { msgs: [o.message as Msg], wrapMs: num(o.timestamp) };
    return { msgs: [o as Msg], wrapMs: null };
  });
}

/**
 * Messages of a capture with receive time and seq (lake/README.md): receive time = the wrapper's timestamp,
 * else the newest venue timestamp in the frame, as a running maximum in file order; seq = recv_ms·10^6 + k,
 * k = the message's rank among the file's messages with the same receive millisecond.
 */
export function tapeMessages(file: string): TapeMessage[] {
  const frames = file.endsWith('.csv') ? csvFrames(file) : elementsOf(file);
  const basis = frames.map((f) => {
    if (f.wrapMs !== null) return f.wrapMs;
    const ts = f.msgs.map((m) => num(m.timestamp)).filter((t): t is number => t !== null);
    return ts.length ? Math.max(...ts) : null;
  });
  const known = basis.filter((b): b is number => b !== null);
  if (!known.length) return [];
  // Frames before the first timed one take the file's earliest time.
  let run = Math.min(...known);
  let lastMs = -1;
  let k = 0;
  const out: TapeMessage[] = [];
  frames.forEach((f, i) => {
    const b = basis[i];
    if (b !== null && b !== undefined && b > run) run = b;
    if (run !== lastMs) {
      lastMs = run;
      k = 0;
    }
    for (const msg of f.msgs) out.push({ msg, recvMs: run, seq: BigInt(run) * 1_000_000n + BigInt(k++), frame: i });
  });
  return out;
}

/** The DB-export CSV: one message per row, in the table's id (arrival) order. */
function csvFrames(file: string): { msgs: Msg[]; wrapMs: null }[] {
  return csvMessages(file).map((m) => ({ msgs: [m], wrapMs: null }));
}

/** Decimal text → integer micro-units (6 decimals, as the lake stores prices and sizes). */
export function micro(s: unknown): bigint {
  const t = String(s).trim();
  const neg = t.startsWith('-');
  const [i = '0', f = ''] = (neg ? t.slice(1) : t).split('.');
  const v = BigInt(i || '0') * 1_000_000n + BigInt((f + '000000').slice(0, 6));
  return neg ? -v : v;
}

type Side = Map<bigint, bigint>;
/** A token's replayed book; `ms`/`seq` of the `book` message it was last replaced by (carried across calls). */
export type OracleBook = { bids: Side; asks: Side; ms?: number; seq?: bigint };
type Level = { price: unknown; size: unknown };
type Entry = Level & { side: unknown; asset_id?: unknown; best_bid?: unknown; best_ask?: unknown };

function setLevel(side: Side, price: unknown, size: unknown): void {
  const s = micro(size);
  if (s === 0n) side.delete(micro(price));
  else side.set(micro(price), s);
}

function bookOf(m: Msg): OracleBook {
  const b: OracleBook = { bids: new Map(), asks: new Map() };
  for (const l of (m.bids as Level[] | undefined) ?? []) setLevel(b.bids, l.price, l.size);
  for (const l of (m.asks as Level[] | undefined) ?? []) setLevel(b.asks, l.price, l.size);
  return b;
}

/** Levels where the venue's book `exp` and the replay `rep` differ. */
function differingLevels(exp: OracleBook, rep: OracleBook): NonNullable<Checkpoint['levels']> {
  const out: NonNullable<Checkpoint['levels']> = [];
  for (const side of ['bid', 'ask'] as const) {
    const x = side === 'bid' ? exp.bids : exp.asks;
    const y = side === 'bid' ? rep.bids : rep.asks;
    const prices = new Set([...x.keys(), ...y.keys()]);
    for (const p of prices) if ((x.get(p) ?? 0n) !== (y.get(p) ?? 0n)) out.push({ side, price: p, expected: x.get(p) ?? 0n, replayed: y.get(p) ?? 0n });
  }
  return out;
}

/** Best bid and best ask in micro-units; an empty side is 0 (bid) or 1 (ask), as the venue prints it. */
export function touch(b: OracleBook): [bigint, bigint] {
  let bb = 0n;
  let ba = 1_000_000n;
  for (const p of b.bids.keys()) if (p > bb) bb = p;
  for (const p of b.asks.keys()) if (p < ba) ba = p;
  return [bb, ba];
}

/** Price-change entries of a message, each with its token (old shape: the message's token). */
export function entriesOf(m: Msg): (Entry & { asset_id: string })[] {
  if (Array.isArray(m.price_changes)) return (m.price_changes as Entry[]).map((e) => ({ ...e, asset_id: String(e.asset_id) }));
  return ((m.changes as Entry[] | undefined) ?? []).map((e) => ({ ...e, asset_id: String(m.asset_id) }));
}

/**
 * Replays messages in arrival order and returns every checkpoint. `books` carries the replayed book of every
 * token with a level message so far (from earlier tape too); it is updated in place.
 */
export function replayIntegrity(messages: TapeMessage[], books: Map<string, OracleBook> = new Map(), opts: { trades?: boolean } = {}): Integrity {
  const res: Integrity = { book: { passed: 0, failed: 0 }, top: { passed: 0, failed: 0 }, checkpoints: [], firstBooks: 0 };
  for (const { msg: m, recvMs, seq } of messages) {
    if (m.event_type === 'book') {
      const t = String(m.asset_id);
      const next = bookOf(m);
      const prev = books.get(t);
      if (prev) {
        const levels = differingLevels(next, prev);
        const d = levels.length;
        res.checkpoints.push({
          asset_id: t,
          seq,
          recvMs,
          kind: 'book',
          ok: d === 0,
          sinceMs: prev.ms,
          sinceSeq: prev.seq,
          differing: d,
          levels,
        });
        res.book[d === 0 ? 'passed' : 'failed']++;
      } else res.firstBooks++;
      books.set(t, { ...next, ms: recvMs, seq });
    } else if (opts.trades && m.event_type === 'last_trade_price') {
      const b = books.get(String(m.asset_id));
      if (!b) continue;
      const side = String(m.side).toUpperCase() === 'BUY' ? b.asks : b.bids;
      const p = micro(m.price);
      const left = (side.get(p) ?? 0n) - micro(m.size);
      if (left > 0n) side.set(p, left);
      else side.delete(p);
    } else if (m.event_type === 'price_change') {
      const entries = entriesOf(m);
      const had = new Set(entries.map((e) => e.asset_id).filter((t) => books.has(t)));
      for (const e of entries) {
        let b = books.get(e.asset_id);
        // A token's first message: its stretch starts here (design: since_ts = the token's first message).
        if (!b) books.set(e.asset_id, (b = { bids: new Map(), asks: new Map(), ms: recvMs, seq }));
        const side = String(e.side).toUpperCase();
        setLevel(side === 'BUY' ? b.bids : b.asks, e.price, e.size);
      }
      if (!Array.isArray(m.price_changes)) continue;
      const last = new Map<string, Entry>();
      for (const e of entries) last.set(e.asset_id, e);
      for (const [t, e] of last) {
        if (!had.has(t)) continue;
        const b = books.get(t)!;
        const [bb, ba] = touch(b);
        const ok = micro(e.best_bid) === bb && micro(e.best_ask) === ba;
        res.checkpoints.push({ asset_id: t, seq, recvMs, kind: 'top', ok });
        res.top[ok ? 'passed' : 'failed']++;
      }
    }
  }
  return res;
}

/** The integrity checks of one capture file ingested alone into an empty lake (trades applied). */
export function fileIntegrity(file: string): Integrity {
  return replayIntegrity(tapeMessages(file), new Map(), { trades: true });
}
