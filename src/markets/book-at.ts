import { NotFound } from '../errors.js';
import type { LakeSession } from '../lake/session.js';
import type { Lake } from '../lake/sources.js';
import { isoFromMicros, type Json, type Row } from '../lake/values.js';
import { bookOnDayQuery, foldTape, MAX_RAW_TAPE_ROWS, seqReceiveMicros, snapshotAtQuery, tapeAfterQuery } from '../query/orderbook.js';
import { DAY_MICROS, dateOf } from '../query/common.js';
import type { ResolvedMarket, TokenRef } from './resolver.js';

/**
 * The order book of one outcome at any instant, for GET /v1/orderbook/snapshot: the lake's statements
 * (src/query/orderbook.ts) and the fold of their rows into sorted levels. It needs only a lake session.
 */

type Side = Map<string, { price: number; size: number }>;

/**
 * The book of one token at `at`: the newest stored snapshot at or before `at`, then the tape after it
 * folded in SQL to the last size per level (a `book` message on the tape replaces the whole book; size 0
 * removes a level). Only the touched levels travel to JavaScript.
 */
export async function bookAt(session: LakeSession, r: ResolvedMarket, token: TokenRef, at: bigint, depth: number): Promise<Row> {
  const lake = session.sources;
  const asset = token.token_id;
  const { snap, tape } = (await bookOnDay(session, lake, asset, at)) ?? (await bookAnyDay(session, lake, asset, at));
  const summary = tape.find((t) => t.side === null);
  const levels = tape.filter((t) => t.side !== null);
  const updates = Number(summary?.updates ?? 0);
  if (!snap && updates === 0) throw new NotFound(`No order book data for this market at or before ${isoFromMicros(at)}`);
  const reset = summary?.reset_seq !== null && summary?.reset_seq !== undefined;
  const bids: Side = new Map();
  const asks: Side = new Map();
  if (snap && !reset) {
    for (const l of (snap.bids as Row[] | null) ?? []) bids.set(String(l.price), { price: l.price as number, size: l.size as number });
    for (const l of (snap.asks as Row[] | null) ?? []) asks.set(String(l.price), { price: l.price as number, size: l.size as number });
  }
  for (const l of levels) {
    const book = l.side === 'bid' ? bids : asks;
    const price = l.price as number;
    const size = l.size as number;
    if (size === 0) book.delete(String(price));
    else book.set(String(price), { price, size });
  }
  const b = [...bids.values()].sort((x, y) => y.price - x.price);
  const a = [...asks.values()].sort((x, y) => x.price - y.price);
  const bestBid = b[0]?.price ?? null;
  const bestAsk = a[0]?.price ?? null;
  const lastTape = (summary?.last_ts as string | null | undefined) ?? null;
  const snapTs = (snap?.ts as string | undefined) ?? null;
  return {
    market_id: (snap?.condition_id as string | undefined) ?? (r.market.condition_id as string | null) ?? null,
    asset_id: asset,
    outcome: token.outcome_index,
    outcome_label: token.outcome_label,
    timestamp: isoFromMicros(at),
    book_timestamp: later(lastTape, snapTs),
    snapshot_timestamp: reset ? null : snapTs,
    updates_applied: updates,
    bids: b.slice(0, depth),
    asks: a.slice(0, depth),
    best_bid: bestBid,
    best_ask: bestAsk,
    mid: bestBid !== null && bestAsk !== null ? round((bestBid + bestAsk) / 2, 7) : null,
    spread: bestBid !== null && bestAsk !== null ? round(bestAsk - bestBid, 6) : null,
    bid_levels: b.length,
    ask_levels: a.length,
  };
}

/** A stored snapshot row and the folded tape after it (rows of tapeAfterQuery). */
type BookParts = { snap: Row | undefined; tape: Row[] };

/**
 * The common case in one statement (bookOnDayQuery): the day of `at` has a stored snapshot before `at` whose
 * seq was received that day, and a short tape after it, folded here into the rows tapeAfterQuery would return.
 * Undefined otherwise, and the caller takes the general path.
 */
async function bookOnDay(session: LakeSession, lake: Lake, asset: string, at: bigint): Promise<BookParts | undefined> {
  const rows = await session.rows(bookOnDayQuery(lake, asset, at, MAX_RAW_TAPE_ROWS));
  const found = rows.find((t) => t.kind === 's');
  if (!found) return undefined;
  const levels = (v: Json | undefined): Json => (typeof v === 'string' ? (JSON.parse(v) as Json) : null);
  const snap: Row = { ...found, bids: levels(found.bids_json), asks: levels(found.asks_json) };
  const snapSeq = BigInt(snap.seq as string | number);
  if (dateOf(seqReceiveMicros(snapSeq)) !== dateOf(at)) return undefined;
  const raw = rows.filter((t) => t.kind === 't');
  if (raw.length >= MAX_RAW_TAPE_ROWS) return undefined;
  const f = foldTape(
    raw.map((t) => ({
      side: t.side as string | null,
      price: t.price as number | null,
      size: t.size as number | null,
      seq: BigInt(t.seq as string | number),
      level_idx: Number(t.level_idx),
      is_snapshot: t.is_snapshot === true,
      recv_us: Number(t.recv_us),
    })),
  );
  const summary: Row = {
    side: null,
    reset_seq: f.resetSeq === null ? null : f.resetSeq.toString(),
    last_ts: f.lastUs === null ? null : isoFromMicros(BigInt(f.lastUs)),
    updates: f.updates,
  };
  return { snap, tape: [...f.levels, summary] };
}

/**
 * The general path: the newest snapshot in the two days before `at`'s day too, then in all of the lake (a book
 * quiet for longer), and the tape after it from the partition its seq was received in.
 */
async function bookAnyDay(session: LakeSession, lake: Lake, asset: string, at: bigint): Promise<BookParts> {
  const snap =
    (await session.one(snapshotAtQuery(lake, asset, at, dateOf(at - 2n * DAY_MICROS)))) ?? (await session.one(snapshotAtQuery(lake, asset, at, undefined)));
  const tape = await session.rows(tapeAfterQuery(lake, asset, snap ? BigInt(snap.seq as string | number) : null, at));
  return { snap, tape };
}

/**
 * The later of two ISO instants as the runner writes them. Not a text comparison: `…:00Z` sorts after
 * `…:00.250Z` as text although it is earlier.
 */
export function later(a: string | null, b: string | null): string | null {
  if (a === null || b === null) return a ?? b;
  return isoMicros(a) >= isoMicros(b) ? a : b;
}

/** Microseconds of `YYYY-MM-DDTHH:MM:SS[.fff[fff]]Z`. */
function isoMicros(iso: string): number {
  const frac = /\.(\d{1,6})Z$/.exec(iso)?.[1] ?? '';
  return Date.parse(`${iso.slice(0, 19)}Z`) * 1000 + Number(frac.padEnd(6, '0') || '0');
}

function round(x: number, d: number): number {
  const f = 10 ** d;
  return Math.round(x * f) / f;
}
