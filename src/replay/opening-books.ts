import { NotFound } from '../errors.js';
import { mapLimit } from '../map-limit.js';
import { tokensStartingAfterQuery } from '../query/tape-starts.js';
import type { LakeSession } from '../lake/session.js';
import type { Row } from '../lake/values.js';
import { bookAt } from '../markets/book-at.js';
import type { MarketResolver, ResolvedMarket, TokenRef } from '../markets/resolver.js';

/**
 * The book of each subscribed asset at the replay's start, as the venue's `book` message (the venue sends one
 * after subscribing). Built from the lake (src/markets/book-at.ts: the stored snapshot, then the tape after it),
 * so it is marked as rebuilt: its `hash` is `pmlake-rebuilt` (a string, as the venue's own hash, so a strict
 * client still parses it; no venue hash has that form). Levels in the venue's order: bids ascending, asks
 * descending (the best price last), prices and sizes as decimal text.
 */
export const REBUILT_HASH = 'pmlake-rebuilt';

/** Books rebuilt at once (each its own lake statements): a subscription may name 500 assets. */
export const LOOKUPS_IN_FLIGHT = 4;

/** Every level of the book: a venue `book` is the whole book. */
const ALL_LEVELS = 1_000_000;

/** A subscribed asset as the catalogue knows it: its market, for the book's `market` and the lake's filter. */
export type KnownAsset = { assetId: string; conditionId: string; market: ResolvedMarket; token: TokenRef };

/** The asset's market, or null when the lake knows no such outcome token (the replay refuses it). */
export async function knownAsset(session: LakeSession, markets: MarketResolver, assetId: string): Promise<KnownAsset | null> {
  if (!/^[0-9]{1,100}$/.test(assetId)) return null;
  try {
    const r = await markets.resolve(session, assetId);
    const conditionId = r.market.condition_id;
    if (!r.token || typeof conditionId !== 'string') return null;
    return { assetId, conditionId, market: r, token: r.token };
  } catch (err) {
    if (err instanceof NotFound) return null;
    throw err;
  }
}

/**
 * The `book` message of an asset just before `atUs` (frames received at `atUs` itself are replayed after it), or
 * null when the tape holds nothing of it before then (the replay starts before its tape).
 */
export async function openingBook(session: LakeSession, a: KnownAsset, atUs: bigint): Promise<string | null> {
  let book: Row;
  try {
    book = await bookAt(session, a.market, a.token, atUs - 1n, ALL_LEVELS);
  } catch (err) {
    if (err instanceof NotFound) return null;
    throw err;
  }
  const level = (l: Row): string => `{"price":"${decimal(l.price)}","size":"${decimal(l.size)}"}`;
  const bids = ((book.bids as Row[]) ?? []).map(level).reverse();
  const asks = ((book.asks as Row[]) ?? []).map(level).reverse();
  const market = typeof book.market_id === 'string' ? book.market_id : a.conditionId;
  return (
    `{"market":${JSON.stringify(market)},"asset_id":${JSON.stringify(a.assetId)},"timestamp":"${atUs / 1000n}",` +
    `"hash":"${REBUILT_HASH}","bids":[${bids.join(',')}],"asks":[${asks.join(',')}],"event_type":"book"}`
  );
}

/**
 * The books of the assets, one frame each (a single `book` message, not the venue's array of books: every client
 * of the channel parses single-message frames, and some drop array frames), none for an asset without tape before.
 */
export async function openingBookFrames(session: LakeSession, assets: readonly KnownAsset[], atUs: bigint): Promise<string[]> {
  // A replay from before an asset's first data (a market's whole life) has no book to rebuild: one small read of
  // the catalogue's token stats spares each asset its book statements.
  const stats = session.version.files('token_stats');
  let empty = new Set<string>();
  if (stats.length > 0 && assets.length > 0) {
    const rows = await session.rows(
      tokensStartingAfterQuery(
        stats,
        assets.map((a) => a.assetId),
        atUs - 1n,
      ),
    );
    empty = new Set(rows.map((r) => String(r.token_id)));
  }
  // Each book is its own statements on its own connection: rebuilt side by side.
  const books = await mapLimit(assets, LOOKUPS_IN_FLIGHT, (a) => (empty.has(a.assetId) ? Promise.resolve(null) : openingBook(session, a, atUs)));
  return books.filter((b): b is string => b !== null);
}

/** A level's number as the venue writes it: plain decimal text, never an exponent. */
function decimal(v: unknown): string {
  const n = Number(v);
  if (!Number.isFinite(n)) return String(v);
  const s = String(n);
  return /e/i.test(s) ? n.toFixed(6).replace(/\.?0+$/, '') : s;
}
