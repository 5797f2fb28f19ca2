import { WebSocket } from 'ws';
import type { Rng } from '../generate/prng.js';
import type { BookSink, MarketBook } from './book.js';
import { bestBidAskText, bookLevels, bookText, changeEntries, lastTradeText, priceChangeText, tickChangeText } from './messages.js';

/** One client socket: its id (per venue, from 1), its subscribed assets and whether it asked for the custom feature. */
export type Conn = { id: number; ws: WebSocket; assets: Set<string>; custom: boolean; initialized: boolean };

export type SentFrame = { conn: number; text: string; atMs: number };

/** A trade the venue printed: what its settlement on chain carries (`milli` the token's price in thousandths, `cents` the size in hundredths). */
export type SimTrade = { conditionId: string; tokenId: string; milli: number; cents: number; takerBuys: boolean; ms: number; transactionHash: string };

/**
 * Routes the book model's changes to the connections subscribed to each token, as text frames of one message
 * each. A `price_change` spans both tokens of a market; a connection subscribed to one of them gets only that
 * token's entries, so no connection ever sees an asset it did not subscribe to.
 */
export class Feed implements BookSink {
  /** Connections by subscribed asset; an asset with no subscriber has no entry. */
  readonly subs = new Map<string, Set<Conn>>();
  frames = 0;
  levelUpdates = 0;
  /** The timestamp of the messages being written (the venue's clock, epoch ms). */
  ts = '';
  private readonly touch = new Map<MarketBook, { touch: number; at: string }>();
  private readonly moved = new Set<MarketBook>();

  constructor(
    private readonly rng: Rng,
    private readonly kept: SentFrame[] | null,
    private readonly onTrade: ((t: SimTrade) => void) | null = null,
  ) {}

  send(c: Conn, text: string): void {
    if (c.ws.readyState !== WebSocket.OPEN) return;
    c.ws.send(text);
    this.frames++;
    this.kept?.push({ conn: c.id, text, atMs: Date.now() });
  }

  private toToken(b: MarketBook, token: 0 | 1, text: string, customOnly = false): void {
    const s = this.subs.get(b.tokens[token]);
    if (!s) return;
    for (const c of s) if (!customOnly || c.custom) this.send(c, text);
  }

  changes(b: MarketBook, ch: number[], only: -1 | 0 | 1): void {
    const yes = only !== 1 ? this.subs.get(b.tokens[0]) : undefined;
    const no = only !== 0 ? this.subs.get(b.tokens[1]) : undefined;
    if (yes || no) {
      const ye = yes ? changeEntries(b, 0, ch, this.rng) : '';
      const ne = no ? changeEntries(b, 1, ch, this.rng) : '';
      let both = '';
      const k = ch.length / 3;
      this.levelUpdates += (yes ? k : 0) + (no ? k : 0);
      if (yes) {
        const yesOnly = no ? '' : priceChangeText(b, ye, this.ts);
        for (const c of yes) {
          if (no?.has(c)) this.send(c, (both ||= priceChangeText(b, `${ye},${ne}`, this.ts)));
          else this.send(c, yesOnly || priceChangeText(b, ye, this.ts));
        }
      }
      if (no) {
        let noOnly = '';
        for (const c of no) if (!yes?.has(c)) this.send(c, (noOnly ||= priceChangeText(b, ne, this.ts)));
      }
    }
    this.touchChanged(b);
  }

  trade(b: MarketBook, token: 0 | 1, milli: number, takerBuys: boolean, cents: number): void {
    if (!this.subs.has(b.tokens[token])) return;
    const transactionHash = `0x${this.rng.hex(64)}`;
    this.toToken(b, token, lastTradeText(b, token, milli, takerBuys, cents, this.ts, transactionHash));
    this.onTrade?.({ conditionId: b.conditionId, tokenId: b.tokens[token], milli, cents, takerBuys, ms: Number(this.ts), transactionHash });
  }

  book(b: MarketBook, token: 0 | 1): void {
    if (this.subs.has(b.tokens[token])) {
      this.levelUpdates += bookLevels(b);
      this.toToken(b, token, bookText(b, token, this.ts, this.rng));
    }
    this.touchChanged(b);
  }

  tickChange(b: MarketBook, oldTick: number, newTick: number): void {
    for (const token of [0, 1] as const) this.toToken(b, token, tickChangeText(b, token, oldTick, newTick, this.ts));
  }

  private touchChanged(b: MarketBook): void {
    this.moved.add(b);
  }

  /**
   * `best_bid_ask` (custom-feature connections only) for each market whose touch moved since the last flush, once
   * per tick: two moves back and forth within one millisecond would otherwise send byte-identical frames, which a
   * capture's integrity layer and redundant recorders take for one frame recorded twice.
   */
  flushTouches(): void {
    for (const b of this.moved) {
      if (b.resolved) {
        this.moved.delete(b);
        continue;
      }
      const now = b.bb * 1001 + b.ba;
      const last = this.touch.get(b);
      if (last?.at === this.ts) continue; // announced in this millisecond already: the next tick will
      this.moved.delete(b);
      if (last?.touch === now) continue;
      this.touch.set(b, { touch: now, at: this.ts });
      for (const token of [0, 1] as const) {
        const s = this.subs.get(b.tokens[token]);
        if (!s) continue;
        let text = '';
        for (const c of s) if (c.custom) this.send(c, (text ||= bestBidAskText(b, token, this.ts)));
      }
    }
  }
}
