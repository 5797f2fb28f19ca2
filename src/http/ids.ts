import type { AppContext } from './context.js';
import { lakeStamp } from '../lake/stamp.js';
import { BadRequest, NotFound, Unprocessable } from './errors.js';
import { lakeSources, runOne, type Row } from '../lake/runner.js';
import { marketByIdQuery, marketByTokenListQuery, marketByTokenQuery } from '../query/markets.js';
import { CONDITION_ID_MESSAGE } from './params.js';

/**
 * market_id resolution, the one place that knows the spec's three meanings of "market id": a request carries
 * the numeric markets.id or one outcome token id (70+ digits); a 0x condition id is refused.
 */
export type TokenRef = { token_id: string; outcome_index: number; outcome_label: string | null };
export type ResolvedMarket = {
  market: Row;
  /** The market's tokens, parallel to its outcomes. */
  tokens: TokenRef[];
  /** Set when the request named one token: it narrows the query to that outcome. */
  token: TokenRef | null;
};

/** Venue token ids are 256-bit integers in decimal: far longer than any numeric market id. */
const TOKEN_ID = /^[0-9]{30,100}$/;

/**
 * Resolutions are cached per lake stamp (src/lake/stamp.ts: the catalogue files and the ingest ledger): a
 * client paging one market or polling its candles does not re-read the catalogue on every request. Bounded,
 * and emptied whenever an ingest lands.
 */
const CACHE_MAX = 10_000;
const cache = new Map<string, ResolvedMarket>();
let cacheVersion = '';

export async function resolveMarket(ctx: AppContext, marketId: string): Promise<ResolvedMarket> {
  if (/^0x[0-9a-fA-F]*$/.test(marketId)) throw new BadRequest(CONDITION_ID_MESSAGE);
  const version = lakeStamp(ctx.config.lakeDir);
  if (version !== cacheVersion) {
    cache.clear();
    cacheVersion = version;
  }
  const hit = cache.get(marketId);
  if (hit) return hit;
  const r = await lookup(ctx, marketId);
  if (cache.size >= CACHE_MAX) cache.delete(cache.keys().next().value!);
  cache.set(marketId, r);
  return r;
}

async function lookup(ctx: AppContext, marketId: string): Promise<ResolvedMarket> {
  const lake = lakeSources(ctx.config.lakeDir);
  if (TOKEN_ID.test(marketId)) {
    const market =
      (await runOne(ctx.db, marketByTokenQuery(lake, marketId))) ?? (await runOne(ctx.db, marketByTokenListQuery(lake, marketId)));
    if (market) {
      const tokens = tokensOf(market);
      const token = tokens.find((t) => t.token_id === marketId);
      if (token) return { market, tokens, token };
    }
  }
  const market = await runOne(ctx.db, marketByIdQuery(lake, marketId));
  if (!market) throw new NotFound('Market not found');
  return { market, tokens: tokensOf(market), token: null };
}

export function tokensOf(market: Row): TokenRef[] {
  const ids = Array.isArray(market.outcome_token_ids) ? market.outcome_token_ids : [];
  const labels = Array.isArray(market.outcomes) ? market.outcomes : [];
  return ids.map((id, i) => ({
    token_id: String(id),
    outcome_index: i,
    outcome_label: typeof labels[i] === 'string' ? (labels[i] as string) : null,
  }));
}

/**
 * The tokens a query covers: the named token, or the market's token for `outcome`, or all of them.
 * An outcome the market does not have is a 422 naming the parameter.
 */
export function selectTokens(r: ResolvedMarket, outcome: number | undefined, where: 'query' | 'body' = 'query'): TokenRef[] {
  if (r.token) return [r.token];
  if (outcome === undefined) return r.tokens;
  const t = r.tokens[outcome];
  if (!t) {
    throw new Unprocessable([
      { loc: [where, 'outcome'], msg: `market ${String(r.market.id)} has ${r.tokens.length} outcome token(s); outcome ${outcome} does not exist`, type: 'value_error', input: outcome },
    ]);
  }
  return [t];
}
