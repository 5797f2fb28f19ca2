import { z } from 'zod';
import type { Route } from './route.js';
import { NotFound } from '../errors.js';
import { isoFromMicros, lakeSources, runJsonArray, runOne, runQuery, type Json, type Lake, type Row } from '../lake/runner.js';
import { sendJsonText } from './respond.js';
import { bookOnDayQuery, foldTape, MAX_RAW_TAPE_ROWS, seqReceiveMicros, snapshotAtQuery, tapeAfterQuery, topOfBookPageQuery } from '../query/orderbook.js';
import { DAY_MICROS, dateOf } from '../query/common.js';
import { planOf } from '../accounts/plans.js';
import { selectTokens, type ResolvedMarket, type TokenRef } from '../markets/resolver.js';
import { checkWindow, isoDateTime, marketIdParam, outcomeParam, queryInt } from './params.js';
import type { AppContext } from './context.js';
import type { Principal } from '../accounts/principal.js';

const Level = z.object({ price: z.number(), size: z.number() });

export const BookResponse = z
  .object({
    market_id: z.string().nullable().describe('The market condition id (0x…)'),
    asset_id: z.string().describe('The outcome token id'),
    outcome: z.number().int(),
    outcome_label: z.string().nullable(),
    timestamp: z.string().describe('The instant asked for'),
    book_timestamp: z.string().nullable().describe('Receive time of the last message the book reflects'),
    snapshot_timestamp: z.string().nullable().describe('The stored snapshot the replay started from (null: started from a book message on the tape)'),
    updates_applied: z.number().int().describe('Level updates replayed on top of that snapshot'),
    bids: z.array(Level).describe('Best (highest) price first'),
    asks: z.array(Level).describe('Best (lowest) price first'),
    best_bid: z.number().nullable(),
    best_ask: z.number().nullable(),
    mid: z.number().nullable(),
    spread: z.number().nullable(),
    bid_levels: z.number().int().describe('Levels on the book (before depth is applied)'),
    ask_levels: z.number().int(),
  })
  .meta({ id: 'OrderBookSnapshot' });

export const TopOfBookResponse = z
  .object({
    market_id: z.string().nullable().describe('The market condition id (0x…)'),
    asset_id: z.string(),
    timestamp: z.string(),
    seq: z.string().describe('Arrival sequence number (receive ms × 1e6 + rank), as text: it exceeds 2^53'),
    best_bid: z.number().nullable(),
    best_bid_size: z.number().nullable(),
    best_ask: z.number().nullable(),
    best_ask_size: z.number().nullable(),
    mid: z.number().nullable(),
    spread: z.number().nullable(),
  })
  .meta({ id: 'TopOfBookRow' });

const SnapshotQuery = z.object({
  market_id: marketIdParam,
  outcome: outcomeParam.default(0).describe('Outcome index; ignored when market_id is a token id'),
  at: isoDateTime.optional().describe('The instant (default: now). Any instant, not only stored snapshot times'),
  depth: queryInt({ min: 1, max: 1000, default: 50, description: 'Levels per side' }),
});

const TopQuery = z
  .object({
    market_id: marketIdParam,
    outcome: outcomeParam.default(0),
    start: isoDateTime.optional().describe('Inclusive'),
    end: isoDateTime.optional().describe('Exclusive'),
    limit: queryInt({ min: 1, max: 10_000, default: 1000 }),
    offset: queryInt({ min: 0, max: 1_000_000, default: 0 }),
  })
  .superRefine((v, ctx) => checkWindow(v, ctx));

type Side = Map<string, { price: number; size: number }>;

/**
 * The book of one token at `at`: the newest stored snapshot at or before `at`, then the tape after it
 * folded in SQL to the last size per level (a `book` message on the tape replaces the whole book; size 0
 * removes a level). Only the touched levels travel to JavaScript.
 */
export async function bookAt(ctx: AppContext, r: ResolvedMarket, token: TokenRef, at: bigint, depth: number): Promise<Row> {
  const lake = lakeSources(ctx.config.lakeDir);
  const asset = token.token_id;
  const { snap, tape } = (await bookOnDay(ctx, lake, asset, at)) ?? (await bookAnyDay(ctx, lake, asset, at));
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
async function bookOnDay(ctx: AppContext, lake: Lake, asset: string, at: bigint): Promise<BookParts | undefined> {
  const rows = await runQuery(ctx.db, bookOnDayQuery(lake, asset, at, MAX_RAW_TAPE_ROWS));
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
async function bookAnyDay(ctx: AppContext, lake: Lake, asset: string, at: bigint): Promise<BookParts> {
  const snap =
    (await runOne(ctx.db, snapshotAtQuery(lake, asset, at, dateOf(at - 2n * DAY_MICROS)))) ??
    (await runOne(ctx.db, snapshotAtQuery(lake, asset, at, undefined)));
  const tape = await runQuery(ctx.db, tapeAfterQuery(lake, asset, snap ? BigInt(snap.seq as string | number) : null, at));
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

function nowMicros(): bigint {
  return BigInt(Date.now()) * 1000n;
}

export const orderbookRoutes: Route[] = [
  {
    method: 'get',
    path: '/v1/orderbook/snapshot',
    cost: 'query',
    auth: 'key',
    tag: 'orderbook',
    summary: 'The order book of one outcome at any instant (stored snapshot + tape replay), best price first',
    query: SnapshotQuery,
    response: BookResponse,
    handler: async (req, res, ctx) => {
      const q = res.locals.query as z.infer<typeof SnapshotQuery>;
      const r = await ctx.markets.resolve(q.market_id);
      const [token] = selectTokens(r, q.outcome);
      if (!token) throw new NotFound('Market has no outcome tokens');
      // The book's best bid/ask is the top of book: a delayed plan sees the book no later than its delay.
      const cap = delayCap(req.principal);
      const wanted = q.at ?? nowMicros();
      const book = await bookAt(ctx, r, token, cap !== null && wanted > cap ? cap : wanted, q.depth);
      res.locals.rows = 1;
      return book;
    },
  },
  {
    method: 'get',
    path: '/v1/orderbook/top_of_book',
    cost: 'query',
    auth: 'key',
    tag: 'orderbook',
    summary: 'Every change of best bid/ask of one outcome in a window, oldest first',
    query: TopQuery,
    response: z.array(TopOfBookResponse),
    handler: async (req, res, ctx) => {
      const q = res.locals.query as z.infer<typeof TopQuery>;
      const r = await ctx.markets.resolve(q.market_id);
      const tokens = selectTokens(r, q.outcome).map((t) => t.token_id);
      let end = q.end;
      const cap = delayCap(req.principal);
      if (cap !== null && (end === undefined || end > cap)) end = cap;
      const out = await runJsonArray(
        ctx.db,
        topOfBookPageQuery(lakeSources(ctx.config.lakeDir), tokens, { start: q.start, end }, { limit: q.limit, offset: q.offset }),
        { timestamps: ['timestamp'], text: ['seq'] },
      );
      return sendJsonText(res, out);
    },
  },
];

/** Free plans see top of book only with a delay (src/accounts/plans.ts): the latest instant they may see. */
function delayCap(principal: Principal | undefined): bigint | null {
  const delay = principal ? planOf(principal.plan).top_of_book_delay_minutes : 0;
  return delay > 0 ? nowMicros() - BigInt(delay) * 60_000_000n : null;
}
