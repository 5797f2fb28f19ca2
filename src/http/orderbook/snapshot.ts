import { z } from 'zod';
import { defineRoute, type Route, type RouteInput } from '../route.js';
import type { RequestContext } from '../context.js';
import { NotFound } from '../../errors.js';
import { selectTokens } from '../../markets/resolver.js';
import { isoDateTime, marketIdParam, outcomeParam, parseIsoMicros, queryInt } from '../params.js';
import { bookAt } from '../../markets/book-at.js';
import { delayCap, nowMicros } from './delay.js';
import { verifiedAt } from '../../markets/book-verified.js';

/** GET /v1/orderbook/snapshot: the book of one outcome at any instant (src/markets/book-at.ts). */

const Level = z.object({ price: z.number(), size: z.number() });

export const BookResponse = z
  .object({
    market_id: z.string().nullable().describe('The market condition id (0x…)'),
    asset_id: z.string().describe('The outcome token id'),
    outcome: z.number().int(),
    outcome_label: z.string().nullable(),
    timestamp: z
      .string()
      .meta({ format: 'date-time', description: 'The instant asked for (`at`); without `at`, the time of the latest book (book_timestamp)' }),
    book_timestamp: z.string().meta({ format: 'date-time' }).nullable().describe('Receive time of the last message the book reflects'),
    snapshot_timestamp: z
      .string()
      .meta({ format: 'date-time' })
      .nullable()
      .describe('The stored snapshot the replay started from (null: started from a book message on the tape)'),
    updates_applied: z.number().int().describe('Level updates replayed on top of that snapshot'),
    bids: z.array(Level).describe('Best (highest) price first'),
    asks: z.array(Level).describe('Best (lowest) price first'),
    best_bid: z.number().nullable(),
    best_ask: z.number().nullable(),
    mid: z.number().nullable(),
    spread: z.number().nullable(),
    latest: z
      .boolean()
      .describe('True when no `at` was given: the latest book available (to a delayed plan, the latest it may see), stamped with its own time'),
    bid_levels: z.number().int().describe('Levels on the book (before depth is applied)'),
    ask_levels: z.number().int(),
    verified: z
      .boolean()
      .describe(
        "The book at this instant lies in a stretch the venue's next full `book` message proved (it equalled the replayed book); false when that check failed or none has closed the stretch yet",
      ),
    checkpoint_timestamp: z
      .string()
      .meta({ format: 'date-time' })
      .nullable()
      .describe('Receive time of the `book` checkpoint closing that stretch, passed or failed (null: none yet)'),
  })
  .meta({ id: 'OrderBookSnapshot' });

const SnapshotQuery = z.object({
  market_id: marketIdParam,
  outcome: outcomeParam.default(0).describe('Outcome index (any outcome the market has); ignored when market_id is a token id'),
  at: isoDateTime.optional().describe('The instant; omitted, the latest book available. Any instant, not only stored snapshot times'),
  depth: queryInt({ min: 1, max: 1000, default: 50, description: 'Levels per side' }),
});

export const orderbookSnapshotRoutes: Route[] = [
  defineRoute({
    method: 'get',
    path: '/v1/orderbook/snapshot',
    cost: 'query',
    auth: 'key',
    tag: 'orderbook',
    summary: 'The order book of one outcome at any instant (stored snapshot + tape replay), best price first',
    query: SnapshotQuery,
    response: BookResponse,
    handler: getOrderbookSnapshot,
  }),
];

async function getOrderbookSnapshot({ query: q, req, res }: RouteInput<{ query: typeof SnapshotQuery }>, ctx: RequestContext) {
  const r = await ctx.markets.resolve(ctx.lake, q.market_id);
  const [token] = selectTokens(r, q.outcome);
  if (!token) throw new NotFound('Market has no outcome tokens');
  // The book's best bid/ask is the top of book: a delayed plan sees the book no later than its delay.
  const cap = delayCap(req.principal);
  const wanted = q.at ?? nowMicros();
  const at = cap !== null && wanted > cap ? cap : wanted;
  if (q.at === undefined) {
    // The latest book is stamped with its own time, days old as it may be, not with the request's; the
    // verification is of that instant too.
    const book = await bookAt(ctx.lake, r, token, at, q.depth);
    const stamp = (book.book_timestamp as string | null) ?? (book.timestamp as string);
    const v = await verifiedAt(ctx.lake, token.token_id, parseIsoMicros(stamp)!);
    res.locals.rows = 1;
    return { ...book, timestamp: stamp, latest: true, verified: v.verified, checkpoint_timestamp: v.checkpoint };
  }
  const [book, v] = await Promise.all([bookAt(ctx.lake, r, token, at, q.depth), verifiedAt(ctx.lake, token.token_id, at)]);
  res.locals.rows = 1;
  return { ...book, latest: false, verified: v.verified, checkpoint_timestamp: v.checkpoint };
}
