import type { LakeSession } from '../lake/session.js';
import type { MarketResolver } from '../markets/resolver.js';
import { BadRequest, NotFound } from '../errors.js';
import { bookSnapshots } from './book-snapshots.js';
import { mergeByTime, type Keyed } from './merge.js';
import { bookChanges, chainTrades, disconnects, quotes, venueTrades, type StreamContext } from './normalized-streams.js';
import type { DataType, NormalizedMessage, ReplayAsset } from './normalized-types.js';
import { tradeBars } from './trade-bars.js';

export type NormalizedOptions = {
  /** The window [from, to) in epoch microseconds. */
  from: bigint;
  to: bigint;
  assets: readonly ReplayAsset[];
  dataTypes: readonly DataType[];
  signal?: AbortSignal | undefined;
  /** Rows per page of each stream; by default as many as keep all pages together near ALL_PAGES_ROWS. */
  pageRows?: number | undefined;
};

/** Rows held per stream page at most, and in all pages together (the merge holds one page per stream). */
const MAX_PAGE_ROWS = 5000;
const MIN_PAGE_ROWS = 200;
const ALL_PAGES_ROWS = 100_000;

/**
 * The normalized replay: for each token and data type a stream in time order, merged (./merge.ts) into one
 * sequence ordered by time — the receive time for what came from the tape (recv_ts), else ts — then by type
 * (./normalized-streams.ts RANK). Memory is one page per stream plus one book per book_snapshot type and token;
 * it stops at once when `signal` aborts. Knows no HTTP: the NDJSON endpoint and the WebSocket both consume it.
 */
export function normalizedMessages(lake: LakeSession, o: NormalizedOptions): AsyncIterable<NormalizedMessage> {
  const types = dedupe(o.dataTypes);
  const perAsset = types.reduce((n, t) => n + (t.kind === 'trade' ? 2 : 1), 0);
  const streams = Math.max(1, perAsset * o.assets.length);
  const pageRows = o.pageRows ?? Math.max(MIN_PAGE_ROWS, Math.min(MAX_PAGE_ROWS, Math.floor(ALL_PAGES_ROWS / streams)));
  const c: StreamContext = { session: lake, window: { start: o.from, end: o.to }, pageRows, signal: o.signal };
  const list: AsyncIterable<Keyed<NormalizedMessage>>[] = [];
  if (o.to <= o.from) return mergeByTime(list, o.signal);
  for (const a of o.assets) {
    for (const t of types) {
      switch (t.kind) {
        case 'book_change':
          list.push(bookChanges(c, a));
          break;
        case 'trade':
          list.push(venueTrades(c, a), chainTrades(c, a));
          break;
        case 'quote':
          list.push(quotes(c, a));
          break;
        case 'disconnect':
          list.push(disconnects(c, a));
          break;
        case 'book_snapshot':
          list.push(bookSnapshots(c, a, t));
          break;
        case 'trade_bar':
          list.push(tradeBars(c, a, t));
          break;
      }
    }
  }
  return mergeByTime(list, o.signal);
}

function dedupe(types: readonly DataType[]): DataType[] {
  const seen = new Set<string>();
  return types.filter((t) => (seen.has(t.name) ? false : (seen.add(t.name), true)));
}

/** Tokens a replay may cover at most (each is a stream per data type). */
export const MAX_REPLAY_ASSETS = 100;

/**
 * The tokens named by `assets` (token ids) and `marketIds` (numeric market ids, or token ids: every outcome of the
 * market, or that one), each once, in the order named. An unknown one is NotFound naming it; more than
 * MAX_REPLAY_ASSETS tokens (or names) is a BadRequest, checked before anything is looked up where it can be.
 */
export async function resolveReplayAssets(
  lake: LakeSession,
  markets: MarketResolver,
  names: { assets?: readonly string[] | undefined; marketIds?: readonly string[] | undefined },
): Promise<ReplayAsset[]> {
  const out = new Map<string, ReplayAsset>();
  const add = async (id: string, whole: boolean): Promise<void> => {
    let r;
    try {
      r = await markets.resolve(lake, id);
    } catch (err) {
      if (err instanceof NotFound) throw new NotFound(`Unknown ${whole ? 'market' : 'asset'}: ${id}`);
      throw err;
    }
    if (!whole && !r.token) throw new NotFound(`Unknown asset: ${id} (an outcome token id; a market's numeric id goes in market_id)`);
    for (const token of r.token ? [r.token] : r.tokens) {
      out.set(token.token_id, {
        asset_id: token.token_id,
        outcome: token.outcome_label,
        outcome_index: token.outcome_index,
        market_id: String(r.market.id),
        condition_id: (r.market.condition_id as string | null) ?? null,
        resolved: r,
        token,
      });
    }
  };
  const named = (names.assets?.length ?? 0) + (names.marketIds?.length ?? 0);
  if (named > MAX_REPLAY_ASSETS) throw tooMany(named);
  for (const id of names.assets ?? []) await add(id, false);
  for (const id of names.marketIds ?? []) await add(id, true);
  if (out.size > MAX_REPLAY_ASSETS) throw tooMany(out.size);
  return [...out.values()];
}

function tooMany(n: number): BadRequest {
  return new BadRequest(`At most ${MAX_REPLAY_ASSETS} outcome tokens per replay (got ${n})`);
}
