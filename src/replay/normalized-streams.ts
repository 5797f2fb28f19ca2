import type { Query } from '../lake/duckdb.js';
import type { LakeSession } from '../lake/session.js';
import { isoFromMicros, type Row } from '../lake/values.js';
import { chainTradesPageQuery, incidentsPageQuery, l2PageQuery, quotesPageQuery, venueTradesPageQuery, type PageWindow } from '../query/replay.js';
import type { Keyed } from './merge.js';
import {
  DISCONNECT_KINDS,
  type BookChangeMessage,
  type DisconnectMessage,
  type QuoteMessage,
  type ReplayAsset,
  type TradeMessage,
} from './normalized-types.js';

/**
 * One time-ordered stream per token and data set, read page by page (src/query/replay.ts), each item keyed for
 * the merge (./merge.ts). Ranks order the types at one instant: a disconnect first, then the tape (level changes
 * and trade prints in arrival order), the quote its message produced, chain fills, then the computed types, which
 * show the state after everything at their instant.
 */
export const RANK = { disconnect: 0, tape: 1, quote: 2, chain: 3, snapshot: 4, bar: 5 } as const;

export type StreamContext = { session: LakeSession; window: PageWindow; pageRows: number; signal?: AbortSignal | undefined };

/** Rows of successive pages: the next page starts after the last row of this one; a short page is the last. */
export async function* pagedRows(c: StreamContext, build: (after: Row | null) => Query): AsyncGenerator<Row> {
  let after: Row | null = null;
  for (;;) {
    if (c.signal?.aborted) return;
    const rows = await c.session.rows(build(after));
    for (const r of rows) yield r;
    if (rows.length < c.pageRows) return;
    after = rows[rows.length - 1]!;
  }
}

export const big = (v: unknown): bigint => BigInt(String(v));
const num = (v: unknown): number | null => (v === null || v === undefined ? null : Number(v));

/** The fields every message of a token starts with. */
export function head(a: ReplayAsset, type: string, us: bigint) {
  return {
    type,
    asset_id: a.asset_id,
    outcome: a.outcome,
    outcome_index: a.outcome_index,
    market_id: a.market_id,
    condition_id: a.condition_id,
    ts: isoFromMicros(us),
  };
}

/** The raw l2 rows of a token in arrival order (also the book replay's input, ./book-snapshots.ts). */
export function l2Rows(c: StreamContext, asset: string): AsyncGenerator<Row> {
  return pagedRows(c, (after) => l2PageQuery(c.session.sources, asset, c.window, after && { seq: big(after.seq), idx: Number(after.level_idx) }, c.pageRows));
}

export async function* bookChanges(c: StreamContext, a: ReplayAsset): AsyncGenerator<Keyed<BookChangeMessage>> {
  for await (const r of l2Rows(c, a.asset_id)) {
    const recv = big(r.recv_us);
    const value: BookChangeMessage = {
      ...head(a, 'book_change', big(r.ts_us)),
      recv_ts: isoFromMicros(recv),
      side: (r.side as 'bid' | 'ask' | null) ?? null,
      price: num(r.price),
      size: num(r.size),
      is_snapshot: r.is_snapshot === true,
    };
    yield { us: recv, rank: RANK.tape, seq: big(r.seq), sub: Number(r.level_idx), value };
  }
}

export async function* venueTrades(c: StreamContext, a: ReplayAsset): AsyncGenerator<Keyed<TradeMessage>> {
  const rows = pagedRows(c, (after) =>
    venueTradesPageQuery(
      c.session.sources,
      a.asset_id,
      c.window,
      after && { seq: big(after.seq), ts_us: big(after.ts_us), price: String(after.price_text), size: String(after.size_text), side: String(after.side_text) },
      c.pageRows,
    ),
  );
  for await (const r of rows) {
    const recv = big(r.recv_us);
    const value: TradeMessage = {
      ...head(a, 'trade', big(r.ts_us)),
      recv_ts: isoFromMicros(recv),
      source: 'venue',
      side: (r.side as string | null) ?? null,
      price: Number(r.price),
      size: Number(r.size),
      transaction_hash: (r.transaction_hash as string | null) ?? null,
      fee_rate_bps: num(r.fee_rate_bps),
    };
    // Before the level changes of the same receive instant's later messages: seq orders them.
    yield { us: recv, rank: RANK.tape, seq: big(r.seq), sub: -1, value };
  }
}

export async function* chainTrades(c: StreamContext, a: ReplayAsset): AsyncGenerator<Keyed<TradeMessage>> {
  const rows = pagedRows(c, (after) =>
    chainTradesPageQuery(
      c.session.sources,
      a.asset_id,
      c.window,
      after && { ts_us: big(after.ts_us), block: Number(after.block), log: Number(after.log_index), id: String(after.id) },
      c.pageRows,
    ),
  );
  for await (const r of rows) {
    const us = big(r.ts_us);
    const block = Number(r.block);
    const log = Number(r.log_index);
    const value: TradeMessage = {
      ...head(a, 'trade', us),
      source: 'chain',
      side: (r.side as string | null) ?? null,
      price: Number(r.price),
      size: Number(r.size),
      transaction_hash: (r.transaction_hash as string | null) ?? null,
      id: String(r.id),
      block_number: block < 0 ? null : block,
      log_index: log < 0 ? null : log,
    };
    yield { us, rank: RANK.chain, seq: BigInt(block), sub: log, value };
  }
}

export async function* quotes(c: StreamContext, a: ReplayAsset): AsyncGenerator<Keyed<QuoteMessage>> {
  const rows = pagedRows(c, (after) => quotesPageQuery(c.session.sources, a.asset_id, c.window, after && big(after.seq), c.pageRows));
  for await (const r of rows) {
    const us = big(r.ts_us);
    const value: QuoteMessage = {
      ...head(a, 'quote', us),
      best_bid: num(r.best_bid),
      best_bid_size: num(r.best_bid_size),
      best_ask: num(r.best_ask),
      best_ask_size: num(r.best_ask_size),
    };
    yield { us, rank: RANK.quote, seq: big(r.seq), sub: 0, value };
  }
}

/**
 * Outages and gaps the tape's integrity layer recorded (DISCONNECT_KINDS) whose stretch meets the window, each at
 * its start — or at the window's start for one already under way there, so a replay begins knowing it.
 */
export async function* disconnects(c: StreamContext, a: ReplayAsset): AsyncGenerator<Keyed<DisconnectMessage>> {
  const rows = pagedRows(c, (after) =>
    incidentsPageQuery(
      c.session.sources,
      a.asset_id,
      DISCONNECT_KINDS,
      c.window,
      after && { from_us: big(after.from_us), seq: big(after.seq), kind: String(after.kind) },
      c.pageRows,
    ),
  );
  for await (const r of rows) {
    const from = big(r.from_us);
    const us = from > c.window.start ? from : c.window.start;
    let detail: unknown = null;
    try {
      detail = typeof r.detail === 'string' ? JSON.parse(r.detail) : null;
    } catch {
      detail = r.detail;
    }
    const value: DisconnectMessage = {
      ...head(a, 'disconnect', us),
      kind: String(r.kind),
      from_ts: isoFromMicros(from),
      to_ts: isoFromMicros(big(r.to_us)),
      detail,
    };
    yield { us, rank: RANK.disconnect, seq: big(r.seq), sub: 0, value };
  }
}
