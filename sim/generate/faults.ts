import fs from 'node:fs';
import path from 'node:path';
import { Rng } from './prng.js';
import { DAY_MS, isoDate, type FaultOptions } from './plan.js';

/**
 * Capture faults injected into a generated websocket tape on request, so tests and bench lakes
 * have known gaps. The days are generated clean first; this pass then rewrites each day's ws/DATE.jsonl:
 * - `dropRate`: each price_change line is lost with this probability (a new-shape message spans both
 *   tokens of its market, so both lose it);
 * - `silences`: the capture records nothing for `seconds` from `fromMs` (every line in the window is lost);
 * - `duplicates`: per day, that many price_change lines are written twice in a row (the same frame twice);
 * - `crossed`: per day, that many bogus price_change messages are inserted right after a price_change: a
 *   bid for one token at its (captured) best ask, so the replayed book is locked (best bid ≥ best ask).
 * Draws come from their own seeded stream per day ("faults:<day>"), so the clean lines are the same with any
 * fault options; without fault options nothing here runs and every file is as generated.
 *
 * The generated venue is continuous (day.ts: each day ends by moving its books to the next day's opening ones,
 * and a trade's `book` shows the trade only), so on the clean tape every book equals the replay before it and
 * every failing checkpoint is an injected fault's.
 *
 * The truth (`faults.json`) is computed here by replaying both tapes per token: the clean one (the venue's
 * book) and the faulty one (what a subscriber captured). Replay rules are the venue's: `book` replaces the
 * book, a price_change level's size is the new total (0 removes), and a trade reaches the tape only as the
 * traded token's next `book`, so a `last_trade_price` takes its size off the maker's level (taker BUY → the
 * ask at that price, SELL → the bid) before that book is compared.
 */
export type { FaultOptions };

export const NO_FAULTS: FaultOptions = { dropRate: 0, silences: [], duplicates: 0, crossed: 0 };

export function hasFaults(f: FaultOptions | undefined): f is FaultOptions {
  return !!f && (f.dropRate > 0 || f.silences.length > 0 || f.duplicates > 0 || f.crossed > 0);
}

type Book = { bids: Map<number, number>; asks: Map<number, number> };
type Entry = { asset_id: string; price: string; size: string; side: string; best_bid?: string; best_ask?: string };
type Msg = {
  event_type: string;
  asset_id?: string;
  market?: string;
  timestamp: string;
  bids?: { price: string; size: string }[];
  asks?: { price: string; size: string }[];
  changes?: Entry[];
  price_changes?: Entry[];
  price?: string;
  size?: string;
  side?: string;
};

const milli = (p: string): number => Math.round(Number(p) * 1000);
const cents = (s: string): number => Math.round(Number(s) * 100);
const MILLI_STR = (m: number): string => (m === 0 ? '0' : m === 1000 ? '1' : `0.${String(m).padStart(3, '0')}`.replace(/0+$/, ''));

function tokensOf(m: Msg): string[] {
  if (m.price_changes) return [...new Set(m.price_changes.map((e) => e.asset_id))];
  return m.asset_id ? [m.asset_id] : [];
}

function entriesOf(m: Msg): Entry[] {
  if (m.price_changes) return m.price_changes;
  return (m.changes ?? []).map((c) => ({ ...c, asset_id: m.asset_id! }));
}

/** Applies one message to a replay; returns the tokens whose book was replaced (book messages). */
function apply(books: Map<string, Book>, m: Msg): void {
  if (m.event_type === 'book') {
    books.set(m.asset_id!, bookOf(m));
  } else if (m.event_type === 'price_change') {
    for (const e of entriesOf(m)) {
      let b = books.get(e.asset_id);
      if (!b) books.set(e.asset_id, (b = { bids: new Map(), asks: new Map() }));
      const side = e.side === 'BUY' ? b.bids : b.asks;
      if (cents(e.size) === 0) side.delete(milli(e.price));
      else side.set(milli(e.price), cents(e.size));
    }
  } else if (m.event_type === 'last_trade_price') {
    const b = books.get(m.asset_id!);
    if (!b) return;
    const side = m.side === 'BUY' ? b.asks : b.bids;
    const p = milli(m.price!);
    const left = (side.get(p) ?? 0) - cents(m.size!);
    if (left > 0) side.set(p, left);
    else side.delete(p);
  }
}

function push<T>(map: Map<string, T[]>, key: string, v: T): void {
  const a = map.get(key);
  if (a) a.push(v);
  else map.set(key, [v]);
}

function bookOf(m: Msg): Book {
  return {
    bids: new Map((m.bids ?? []).map((l) => [milli(l.price), cents(l.size)])),
    asks: new Map((m.asks ?? []).map((l) => [milli(l.price), cents(l.size)])),
  };
}

function sameBook(a: Book | undefined, b: Book): boolean {
  if (!a) return false;
  for (const [x, y] of [
    [a.bids, b.bids],
    [a.asks, b.asks],
  ] as const) {
    if (x.size !== y.size) return false;
    for (const [p, s] of x) if (y.get(p) !== s) return false;
  }
  return true;
}

function touch(b: Book): [number, number] {
  let bb = 0;
  let ba = 1000;
  for (const p of b.bids.keys()) if (p > bb) bb = p;
  for (const p of b.asks.keys()) if (p < ba) ba = p;
  return [bb, ba];
}

export type Fault =
  | {
      id: number;
      kind: 'drop';
      date: string;
      recv_ms: number;
      tokens: string[];
      /** The failing book checkpoints closing its stretch, per token (line of the written day file). */
      detected_by: { asset_id: string; line: number; recv_ms: number }[];
      /** Passing ones: a later update of the same level overwrote the loss, so the book was right again. */
      healed_by: { asset_id: string; line: number; recv_ms: number }[];
    }
  | {
      id: number;
      kind: 'silence';
      date: string;
      from_ms: number;
      to_ms: number;
      seconds: number;
      lines_lost: number;
      last_before_ms: number;
      first_after_ms: number;
    }
  | { id: number; kind: 'duplicate'; date: string; recv_ms: number; line: number; tokens: string[] }
  | { id: number; kind: 'crossed'; date: string; recv_ms: number; line: number; asset_id: string; price: string };

/** A `book` checkpoint of the faulty tape: a book of a token whose book was known. */
export type TruthCheckpoint = {
  date: string;
  asset_id: string;
  line: number;
  recv_ms: number;
  since_ms: number;
  ok: boolean;
  /** Why it fails: the injected faults in its stretch (ids). */
  causes: number[];
};

export type TruthTop = { date: string; asset_id: string; line: number; recv_ms: number };

export type TruthCoverage = {
  date: string;
  asset_id: string;
  status: 'verified' | 'degraded' | 'unverified' | 'missing';
  seconds_verified: number;
  seconds_degraded: number;
  seconds_unverified: number;
  checkpoints_passed: number;
  checkpoints_failed: number;
  messages: number;
  first_recv_ms: number | null;
  last_recv_ms: number | null;
};

export type Truth = {
  generator: 'pmlake-generate/faults/1';
  options: FaultOptions;
  faults: Fault[];
  /** Every failing book checkpoint (passing ones are every other book of a known token). */
  failed_checkpoints: TruthCheckpoint[];
  checkpoints: { passed: number; failed: number };
  /** New-shape price_change entries whose best bid/ask differ from the captured replay. */
  top_mismatches: TruthTop[];
  /** Replayed book locked or crossed after a message (the moment it becomes so). */
  crossed_books: TruthTop[];
  coverage: TruthCoverage[];
};

type TokenDay = { messages: number; first: number; last: number; passed: number; failed: number };

/**
 * Rewrites the day files in `wsFiles` (day order) with the faults and writes `<out>/faults.json`.
 * Runs on the main thread after every day was generated: the replays carry books across days.
 */
export function injectFaults(out: string, seed: number, wsFiles: string[], dayStarts: number[], f: FaultOptions): Truth {
  const clean = new Map<string, Book>();
  const captured = new Map<string, Book>();
  const faults: Fault[] = [];
  const byId = new Map<number, Fault>();
  const failed: TruthCheckpoint[] = [];
  const tops: TruthTop[] = [];
  const crossedBooks: TruthTop[] = [];
  const counts = { passed: 0, failed: 0 };
  const lastBook = new Map<string, number>(); // recv ms of the token's last book (its stretch start)
  const lastMsgDay = new Map<string, string>();
  const open = new Map<string, number[]>(); // token → fault ids since its last book
  const days = new Map<string, Map<string, TokenDay>>(); // token → date → stats
  const stretches = new Map<string, [number, number, boolean][]>(); // (since, ts] of every book checkpoint, ok
  const breaks = new Map<string, number[]>(); // receive times of top mismatches and crossed books
  const lastMsg = new Map<string, number>();
  let nextId = 0;

  wsFiles.forEach((file, day) => {
    const full = path.join(out, file);
    const date = isoDate(dayStarts[day]!);
    const lines = fs.readFileSync(full, 'utf8').split('\n');
    if (lines[lines.length - 1] === '') lines.pop();
    const msgs = lines.map((l) => JSON.parse(l) as Msg);
    const rng = new Rng(seed, `faults:${day}`);

    // 1. Silences: every line whose venue time falls in the window is lost.
    const lost = new Array<boolean>(lines.length).fill(false);
    for (const s of f.silences) {
      const to = s.fromMs + s.seconds * 1000;
      if (to <= dayStarts[day]! || s.fromMs >= dayStarts[day]! + DAY_MS) continue;
      let n = 0;
      let before = -1;
      let after = -1;
      msgs.forEach((m, i) => {
        const t = Number(m.timestamp);
        if (t >= s.fromMs && t < to) {
          lost[i] = true;
          n++;
        } else if (t < s.fromMs) before = Math.max(before, t);
        else if (after < 0) after = t;
      });
      faults.push({
        id: nextId++,
        kind: 'silence',
        date,
        from_ms: s.fromMs,
        to_ms: to,
        seconds: s.seconds,
        lines_lost: n,
        last_before_ms: before,
        first_after_ms: after,
      });
    }
    // 2. Drops, 3. anchors for duplicates and crossed updates, all from the day's own stream.
    const drop = new Array<number>(lines.length).fill(-1);
    const pcIdx: number[] = [];
    msgs.forEach((m, i) => {
      if (lost[i] || m.event_type !== 'price_change') return;
      if (f.dropRate > 0 && rng.float() < f.dropRate) drop[i] = nextId++;
      else pcIdx.push(i);
    });
    const pickDistinct = (n: number, taken: Set<number>): number[] => {
      const free = pcIdx.filter((i) => !taken.has(i));
      const out: number[] = [];
      for (let k = 0; k < n && free.length > 0; k++) out.push(...free.splice(rng.int(free.length), 1));
      return out.sort((a, b) => a - b);
    };
    const dupAt = new Set(pickDistinct(f.duplicates, new Set()));
    const crossAt = new Set(pickDistinct(f.crossed, dupAt));

    // 4. Write the captured tape, replaying both tapes and recording the truth as it goes.
    const outLines: string[] = [];
    let recv = 0;
    let dayStr = '';
    let dayEnd = -1; // receive days change rarely: isoDate once per day, not per message
    const note = (m: Msg, line: number, dup = false): void => {
      recv = Math.max(recv, Number(m.timestamp));
      if (recv >= dayEnd) {
        dayStr = isoDate(recv);
        dayEnd = Date.parse(`${dayStr}T00:00:00Z`) + DAY_MS;
      }
      const d = dayStr;
      // Coverage counts the messages that carry levels (book, price_change), a duplicated frame once.
      if (m.event_type === 'book' || m.event_type === 'price_change') {
        for (const t of tokensOf(m)) {
          let byDay = days.get(t);
          if (!byDay) days.set(t, (byDay = new Map()));
          let s = byDay.get(d);
          if (!s) byDay.set(d, (s = { messages: 0, first: recv, last: recv, passed: 0, failed: 0 }));
          if (!dup) s.messages++;
          s.last = recv;
          lastMsg.set(t, recv);
        }
      }
      // Book checkpoint: the book against the captured replay just before it.
      if (m.event_type === 'book') {
        const t = m.asset_id!;
        const incoming = bookOf(m);
        if (lastBook.has(t)) {
          const ok = sameBook(captured.get(t), incoming);
          const list = stretches.get(t) ?? [];
          list.push([lastBook.get(t)!, recv, ok]);
          stretches.set(t, list);
          const s = days.get(t)!.get(d)!;
          if (ok) {
            counts.passed++;
            s.passed++;
          } else {
            counts.failed++;
            s.failed++;
            failed.push({ date: d, asset_id: t, line, recv_ms: recv, since_ms: lastBook.get(t)!, ok, causes: [...(open.get(t) ?? [])] });
          }
          for (const id of open.get(t) ?? []) {
            const fault = byId.get(id);
            if (fault?.kind === 'drop') fault[ok ? 'healed_by' : 'detected_by'].push({ asset_id: t, line, recv_ms: recv });
          }
        }
        open.delete(t);
        lastBook.set(t, recv);
      }
      const pc = m.event_type === 'price_change';
      const before = pc ? new Map(tokensOf(m).map((t) => [t, captured.get(t) ? touch(captured.get(t)!) : null])) : null;
      apply(captured, m);
      if (m.event_type === 'price_change') {
        for (const t of tokensOf(m)) {
          const b = captured.get(t);
          if (!b || !lastBook.has(t)) continue;
          const [bb, ba] = touch(b);
          const was = before!.get(t);
          if (bb >= ba && b.bids.size > 0 && b.asks.size > 0 && !(was && was[0] >= was[1])) {
            crossedBooks.push({ date: d, asset_id: t, line, recv_ms: recv });
            push(breaks, t, recv);
          }
        }
      }
      if (m.price_changes) {
        const last = new Map<string, Entry>();
        for (const e of m.price_changes) last.set(e.asset_id, e);
        for (const [t, e] of last) {
          const b = captured.get(t);
          if (!b || !lastBook.has(t)) continue;
          const [bb, ba] = touch(b);
          if (milli(e.best_bid ?? '0') !== bb || milli(e.best_ask ?? '1') !== ba) {
            tops.push({ date: d, asset_id: t, line, recv_ms: recv });
            push(breaks, t, recv);
          }
        }
      }
      for (const t of tokensOf(m)) lastMsgDay.set(t, d);
    };

    const silenceOf = (i: number): number => {
      const t = Number(msgs[i]!.timestamp);
      const s = faults.find((x) => x.kind === 'silence' && x.date === date && t >= x.from_ms && t < x.to_ms);
      return s ? s.id : -1;
    };
    msgs.forEach((m, i) => {
      if (lost[i]) {
        apply(clean, m);
        // A lost book or price_change leaves the token's book in doubt until its next checkpoint.
        if (m.event_type === 'book' || m.event_type === 'price_change') {
          const id = silenceOf(i);
          for (const t of tokensOf(m)) if (!(open.get(t) ?? []).includes(id)) push(open, t, id);
        }
        return;
      }
      if (drop[i] >= 0) {
        apply(clean, m);
        const ts = Number(m.timestamp);
        const fault: Fault = { id: drop[i]!, kind: 'drop', date, recv_ms: Math.max(recv, ts), tokens: tokensOf(m), detected_by: [], healed_by: [] };
        faults.push(fault);
        byId.set(fault.id, fault);
        for (const t of tokensOf(m)) push(open, t, drop[i]!);
        return;
      }
      outLines.push(lines[i]!);
      note(m, outLines.length);
      apply(clean, m);
      if (dupAt.has(i)) {
        outLines.push(lines[i]!);
        faults.push({ id: nextId++, kind: 'duplicate', date, recv_ms: recv, line: outLines.length, tokens: tokensOf(m) });
        note(m, outLines.length, true);
      }
      if (crossAt.has(i)) {
        const t = tokensOf(m).find((x) => {
          const b = captured.get(x);
          return b && lastBook.has(x) && b.bids.size > 0 && b.asks.size > 0;
        });
        if (t) {
          const [, ba] = touch(captured.get(t)!);
          const price = MILLI_STR(ba);
          const hash = rng.hex(40);
          // Keys in the venue's order for each shape (see day.ts); the touch it claims is its own (locked) one.
          const bogus: Record<string, unknown> = m.price_changes
            ? {
                market: m.market,
                price_changes: [{ asset_id: t, price, size: '1', side: 'BUY', hash, best_bid: price, best_ask: price }],
                timestamp: m.timestamp,
                event_type: 'price_change',
              }
            : { asset_id: t, changes: [{ price, side: 'BUY', size: '1' }], event_type: 'price_change', hash, market: m.market, timestamp: m.timestamp };
          const text = JSON.stringify(bogus);
          outLines.push(text);
          const id = nextId++;
          faults.push({ id, kind: 'crossed', date, recv_ms: recv, line: outLines.length, asset_id: t, price });
          push(open, t, id);
          note(JSON.parse(text) as Msg, outLines.length);
        }
      }
    });
    fs.writeFileSync(full, outLines.length ? `${outLines.join('\n')}\n` : '');
  });

  // Coverage per token and day, from stretches: (since, ts] of each book checkpoint — verified, or degraded
  // when it failed or holds a top mismatch / crossed book — and the open tail after the token's last book
  // (unverified). A day is missing without a message (between the token's first and last day), degraded with
  // degraded seconds or a failed checkpoint, unverified with unverified seconds or none verified, else verified.
  const coverage: TruthCoverage[] = [];
  for (const [t, byDay] of [...days].sort((a, b) => (a[0] < b[0] ? -1 : 1))) {
    const dates = [...byDay.keys()].sort();
    const brk = breaks.get(t) ?? [];
    const parts: [number, number, 'v' | 'g' | 'u'][] = (stretches.get(t) ?? []).map(([a, b, ok]) => [
      a,
      b,
      ok && !brk.some((x) => x > a && x <= b) ? 'v' : 'g',
    ]);
    if (lastMsg.get(t)! > lastBook.get(t)!) parts.push([lastBook.get(t)!, lastMsg.get(t)!, 'u']);
    for (let ms = Date.parse(`${dates[0]}T00:00:00Z`); isoDate(ms) <= dates[dates.length - 1]!; ms += DAY_MS) {
      const d = isoDate(ms);
      const s = byDay.get(d);
      const secs = { v: 0, g: 0, u: 0 };
      for (const [a, b, k] of parts) secs[k] += Math.max(0, Math.min(b, ms + DAY_MS) - Math.max(a, ms));
      const seconds = { seconds_verified: secs.v / 1000, seconds_degraded: secs.g / 1000, seconds_unverified: secs.u / 1000 };
      if (!s) {
        coverage.push({
          date: d,
          asset_id: t,
          status: 'missing',
          ...seconds,
          checkpoints_passed: 0,
          checkpoints_failed: 0,
          messages: 0,
          first_recv_ms: null,
          last_recv_ms: null,
        });
        continue;
      }
      const status = secs.g > 0 || s.failed > 0 ? 'degraded' : secs.u > 0 || secs.v === 0 ? 'unverified' : 'verified';
      coverage.push({
        date: d,
        asset_id: t,
        status,
        ...seconds,
        checkpoints_passed: s.passed,
        checkpoints_failed: s.failed,
        messages: s.messages,
        first_recv_ms: s.first,
        last_recv_ms: s.last,
      });
    }
  }
  const truth: Truth = {
    generator: 'pmlake-generate/faults/1',
    options: f,
    faults: faults.sort((a, b) => a.id - b.id),
    failed_checkpoints: failed,
    checkpoints: counts,
    top_mismatches: tops,
    crossed_books: crossedBooks,
    coverage,
  };
  fs.writeFileSync(path.join(out, 'faults.json'), `${JSON.stringify(truth, null, 1)}\n`);
  return truth;
}
