import { PRICE_STR, sizeStr } from '../generate/format.js';
import type { Rng } from '../generate/prng.js';
import { ASK, BID, type MarketBook } from './book.js';
import type { SimMarket } from './markets.js';

/**
 * The market channel's messages in the venue's current shape and key order, written as text directly like the
 * generator writes its tape (sim/generate/day.ts): prices from the milli grid, sizes from cents, timestamps
 * epoch-ms strings.
 */
const SIDE = ['BUY', 'SELL'] as const;

/** A token's full book: bids ascending and asks descending (best last), `tick_size`, and the last trade if any. */
export function bookText(b: MarketBook, token: 0 | 1, ts: string, rng: Rng): string {
  const bids = b.lvl[token === 0 ? BID : ASK]!;
  const asks = b.lvl[token === 0 ? ASK : BID]!;
  let bs = '';
  let as = '';
  // For the No token a Yes ask at p is a bid at 1 − p, so walking Yes asks downwards yields No bids upwards.
  if (token === 0) {
    for (let p = 1; p < 1000; p++) if (bids[p]! > 0) bs += `${bs ? ',' : ''}{"price":"${PRICE_STR[p]}","size":"${sizeStr(bids[p]!)}"}`;
    for (let p = 999; p > 0; p--) if (asks[p]! > 0) as += `${as ? ',' : ''}{"price":"${PRICE_STR[p]}","size":"${sizeStr(asks[p]!)}"}`;
  } else {
    for (let p = 999; p > 0; p--) if (bids[p]! > 0) bs += `${bs ? ',' : ''}{"price":"${PRICE_STR[1000 - p]}","size":"${sizeStr(bids[p]!)}"}`;
    for (let p = 1; p < 1000; p++) if (asks[p]! > 0) as += `${as ? ',' : ''}{"price":"${PRICE_STR[1000 - p]}","size":"${sizeStr(asks[p]!)}"}`;
  }
  const last = b.lastPrice[token]!;
  const ltp = last >= 0 ? `,"last_trade_price":"${PRICE_STR[last]}"` : '';
  return `{"market":"${b.conditionId}","asset_id":"${b.tokens[token]}","timestamp":"${ts}","hash":"${rng.hex(40)}","bids":[${bs}],"asks":[${as}],"tick_size":"${PRICE_STR[b.tick]}"${ltp},"event_type":"book"}`;
}

/** The levels a token's book holds (what a `book` of it counts as level updates). */
export function bookLevels(b: MarketBook): number {
  return b.n[0]! + b.n[1]!;
}

/** One token's `price_changes[]` entries for Yes-book triples, each with its own hash and the token's touch after. */
export function changeEntries(b: MarketBook, token: 0 | 1, ch: number[], rng: Rng): string {
  const asset = b.tokens[token];
  const bestBid = PRICE_STR[token === 0 ? b.bb : 1000 - b.ba];
  const bestAsk = PRICE_STR[token === 0 ? b.ba : 1000 - b.bb];
  let e = '';
  for (let i = 0; i < ch.length; i += 3) {
    const side = token === 0 ? ch[i]! : 1 - ch[i]!;
    const p = token === 0 ? ch[i + 1]! : 1000 - ch[i + 1]!;
    e += `${i ? ',' : ''}{"asset_id":"${asset}","price":"${PRICE_STR[p]}","size":"${sizeStr(ch[i + 2]!)}","side":"${SIDE[side]}","hash":"${rng.hex(40)}","best_bid":"${bestBid}","best_ask":"${bestAsk}"}`;
  }
  return e;
}

/** One `price_change` message of a market holding the given entries (one token's, or both tokens' joined). */
export function priceChangeText(b: MarketBook, entries: string, ts: string): string {
  return `{"market":"${b.conditionId}","price_changes":[${entries}],"timestamp":"${ts}","event_type":"price_change"}`;
}

export function lastTradeText(b: MarketBook, token: 0 | 1, milli: number, takerBuys: boolean, cents: number, ts: string, txHash: string): string {
  return `{"market":"${b.conditionId}","asset_id":"${b.tokens[token]}","price":"${PRICE_STR[milli]}","size":"${sizeStr(cents)}","fee_rate_bps":"0","side":"${takerBuys ? 'BUY' : 'SELL'}","timestamp":"${ts}","event_type":"last_trade_price","transaction_hash":"${txHash}"}`;
}

export function bestBidAskText(b: MarketBook, token: 0 | 1, ts: string): string {
  const bid = token === 0 ? b.bb : 1000 - b.ba;
  const ask = token === 0 ? b.ba : 1000 - b.bb;
  return `{"market":"${b.conditionId}","asset_id":"${b.tokens[token]}","best_bid":"${PRICE_STR[bid]}","best_ask":"${PRICE_STR[ask]}","spread":"${PRICE_STR[ask - bid]}","timestamp":"${ts}","event_type":"best_bid_ask"}`;
}

/** Key order of the venue's captures of this message (sorted, as the generator writes it). */
export function tickChangeText(b: MarketBook, token: 0 | 1, oldTick: number, newTick: number, ts: string): string {
  return `{"asset_id":"${b.tokens[token]}","event_type":"tick_size_change","market":"${b.conditionId}","new_tick_size":"${PRICE_STR[newTick]}","old_tick_size":"${PRICE_STR[oldTick]}","timestamp":"${ts}"}`;
}

/** The announcement of a market created on the venue (custom-feature connections only). */
export function newMarketText(m: SimMarket, id: number, ts: string): string {
  const question = JSON.stringify(m.question ?? '');
  const slug = JSON.stringify(m.slug ?? '');
  const assets = `["${m.tokens[0]}","${m.tokens[1]}"]`;
  return (
    `{"id":"${id}","question":${question},"market":"${m.conditionId}","slug":${slug},"description":"","assets_ids":${assets},` +
    `"outcomes":["Yes","No"],"event_message":{"id":"${id}","ticker":${slug},"slug":${slug},"title":${question},"description":""},` +
    `"timestamp":"${ts}","tags":[],"condition_id":"${m.conditionId}","active":true,"clob_token_ids":${assets},` +
    `"order_price_min_tick_size":"${m.tick}","group_item_title":"","event_type":"new_market"}`
  );
}

export function marketResolvedText(b: MarketBook, id: number, winner: 0 | 1, ts: string): string {
  return (
    `{"id":"${id}","market":"${b.conditionId}","assets_ids":["${b.tokens[0]}","${b.tokens[1]}"],` +
    `"winning_asset_id":"${b.tokens[winner]}","winning_outcome":"${winner === 0 ? 'Yes' : 'No'}","timestamp":"${ts}","tags":[],"event_type":"market_resolved"}`
  );
}
