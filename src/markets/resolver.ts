import { BadRequest, NotFound, Unprocessable } from '../errors.js';
import type { LakeSession } from '../lake/session.js';
import type { Row } from '../lake/values.js';
import { marketByIdQuery, marketByTokenListQuery, marketByTokenQuery } from '../query/markets.js';

/**
 * A market id in a request: the numeric markets.id or one outcome token id. A 0x condition id is refused
 * with a message that says what to send instead (the spec: condition ids are not accepted in requests).
 */
export const CONDITION_ID_MESSAGE =
  'market_id takes the numeric market id (the `id` field of GET /v1/markets) or an outcome token id; a 0x condition id is not accepted. Find the numeric id with GET /v1/markets?search=...';

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
 * Resolves request market ids against the lake's catalogue. Resolutions are cached per lake stamp
 * (the session's lake version): a client paging one market or polling its candles does not
 * re-read the catalogue on every request. Bounded, and emptied whenever a new version is published. One
 * instance per process, built by the composition root; the cache belongs to it.
 */
export class MarketResolver {
  private static readonly CACHE_MAX = 10_000;
  private readonly cache = new Map<string, ResolvedMarket>();
  private cacheVersion = '';

  async resolve(lake: LakeSession, marketId: string): Promise<ResolvedMarket> {
    if (/^0x[0-9a-fA-F]*$/.test(marketId)) throw new BadRequest(CONDITION_ID_MESSAGE);
    const version = lake.stamp;
    if (version !== this.cacheVersion) {
      this.cache.clear();
      this.cacheVersion = version;
    }
    const hit = this.cache.get(marketId);
    if (hit) return hit;
    const r = await this.lookup(lake, marketId);
    if (this.cache.size >= MarketResolver.CACHE_MAX) this.cache.delete(this.cache.keys().next().value!);
    this.cache.set(marketId, r);
    return r;
  }

  private async lookup(lake: LakeSession, marketId: string): Promise<ResolvedMarket> {
    const src = lake.sources;
    if (TOKEN_ID.test(marketId)) {
      const market = (await lake.one(marketByTokenQuery(src, marketId))) ?? (await lake.one(marketByTokenListQuery(src, marketId)));
      if (market) {
        const tokens = tokensOf(market);
        const token = tokens.find((t) => t.token_id === marketId);
        if (token) return { market, tokens, token };
      }
    }
    const market = await lake.one(marketByIdQuery(src, marketId));
    if (!market) throw new NotFound('Market not found');
    return { market, tokens: tokensOf(market), token: null };
  }
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
      {
        loc: [where, 'outcome'],
        msg: `market ${String(r.market.id)} has ${r.tokens.length} outcome token(s); outcome ${outcome} does not exist`,
        type: 'value_error',
        input: outcome,
      },
    ]);
  }
  return [t];
}
