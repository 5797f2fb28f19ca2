import { afterEach, describe, expect, it } from 'vitest';
import { WebSocket } from 'ws';
import { SimulatedVenue, syntheticMarkets, type SimulatedVenueOptions } from '../../sim/simulate/venue.js';

/** A plain `ws` client that keeps every text frame it receives. */
class Client {
  readonly frames: string[] = [];
  closeCode: number | null = null;
  private constructor(readonly ws: WebSocket) {
    ws.on('message', (d) => this.frames.push(d.toString()));
    ws.on('close', (code) => (this.closeCode = code));
    ws.on('error', () => {});
  }
  static async open(url: string): Promise<Client> {
    const ws = new WebSocket(url);
    await new Promise<void>((resolve, reject) => {
      ws.once('open', () => resolve());
      ws.once('error', reject);
    });
    return new Client(ws);
  }
  send(msg: object | string): void {
    this.ws.send(typeof msg === 'string' ? msg : JSON.stringify(msg));
  }
  /** Every message object received (arrays flattened; non-JSON frames skipped). */
  messages(from = 0): Msg[] {
    return this.frames.slice(from).flatMap((f) => (f.startsWith('{') || f.startsWith('[') ? [JSON.parse(f) as Msg | Msg[]].flat() : []));
  }
}

type Level = { price: string; size: string };
type Entry = { asset_id: string; price: string; size: string; side: string; best_bid: string; best_ask: string };
type Msg = {
  event_type: string;
  asset_id?: string;
  assets_ids?: string[];
  market?: string;
  bids?: Level[];
  asks?: Level[];
  price_changes?: Entry[];
  price?: string;
  size?: string;
  side?: string;
  timestamp?: string;
};

async function until(what: string, cond: () => boolean, ms = 20_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

const venues: SimulatedVenue[] = [];
const clients: Client[] = [];
async function startVenue(o: Partial<SimulatedVenueOptions> & { markets: SimulatedVenueOptions['markets'] }): Promise<SimulatedVenue> {
  const v = await SimulatedVenue.start({ rate: 0, seed: 7, ...o });
  venues.push(v);
  return v;
}
async function connect(v: SimulatedVenue): Promise<Client> {
  const c = await Client.open(v.url);
  clients.push(c);
  return c;
}
afterEach(async () => {
  for (const c of clients.splice(0)) c.ws.terminate();
  for (const v of venues.splice(0)) await v.close();
});

const cents = (s: string): number => Math.round(Number(s) * 100);
type Book = { bids: Map<string, number>; asks: Map<string, number> };
const touch = (b: Book): [number, number] => [Math.max(0, ...[...b.bids.keys()].map(Number)), Math.min(1, ...[...b.asks.keys()].map(Number))];

/**
 * An independent replay of one connection's frames with the venue's rules: a `book` replaces the token's book, a
 * price_change entry's size is the new total at its level ("0" removes it), and a last_trade_price takes its size
 * off the maker's level (asks for a BUY taker, bids for a SELL) before the traded token's next book arrives.
 * Returns each book compared against the replay before it, and each entry's best bid/ask against the replay.
 */
function replay(frames: string[]): { books: number; compared: number; entries: number; trades: number; problems: string[]; state: Map<string, Book> } {
  const state = new Map<string, Book>();
  const out = { books: 0, compared: 0, entries: 0, trades: 0, problems: [] as string[], state };
  for (const f of frames) {
    if (!f.startsWith('{') && !f.startsWith('[')) continue;
    for (const m of [JSON.parse(f) as Msg | Msg[]].flat()) {
      if (m.event_type === 'book') {
        const bids = m.bids!.map((l) => Number(l.price));
        const asks = m.asks!.map((l) => Number(l.price));
        if (bids.some((p, i) => i > 0 && p <= bids[i - 1]!)) out.problems.push(`bids not ascending in ${f.slice(0, 120)}`);
        if (asks.some((p, i) => i > 0 && p >= asks[i - 1]!)) out.problems.push(`asks not descending in ${f.slice(0, 120)}`);
        const got: Book = { bids: new Map(m.bids!.map((l) => [l.price, cents(l.size)])), asks: new Map(m.asks!.map((l) => [l.price, cents(l.size)])) };
        const prev = state.get(m.asset_id!);
        if (prev) {
          out.compared++;
          const same = (a: Map<string, number>, b: Map<string, number>): boolean => a.size === b.size && [...a].every(([p, s]) => b.get(p) === s);
          if (!same(prev.bids, got.bids) || !same(prev.asks, got.asks))
            out.problems.push(`book of ${m.asset_id!.slice(0, 8)} at ${m.timestamp} differs from the replay`);
        }
        state.set(m.asset_id!, got);
        out.books++;
      } else if (m.event_type === 'price_change') {
        for (const e of m.price_changes!) {
          const b = state.get(e.asset_id);
          if (!b) {
            out.problems.push(`price_change before any book of ${e.asset_id.slice(0, 8)}`);
            continue;
          }
          const side = e.side === 'BUY' ? b.bids : b.asks;
          if (cents(e.size) === 0) side.delete(e.price);
          else side.set(e.price, cents(e.size));
        }
        for (const e of m.price_changes!) {
          const b = state.get(e.asset_id);
          if (!b) continue;
          out.entries++;
          const [bid, ask] = touch(b);
          if (Number(e.best_bid) !== bid || Number(e.best_ask) !== ask)
            out.problems.push(`touch of ${e.asset_id.slice(0, 8)} ${e.best_bid}/${e.best_ask} ≠ replay ${bid}/${ask}`);
        }
      } else if (m.event_type === 'last_trade_price') {
        const b = state.get(m.asset_id!);
        const side = m.side === 'BUY' ? b?.asks : b?.bids;
        const left = (side?.get(m.price!) ?? 0) - cents(m.size!);
        if (!side || left < 0) out.problems.push(`trade of ${m.size} at ${m.price} larger than the maker level`);
        else if (left === 0) side.delete(m.price!);
        else side.set(m.price!, left);
        out.trades++;
      }
    }
  }
  return out;
}

describe('simulated venue', () => {
  it('answers a subscription with one array of books for exactly those assets, PING with PONG', async () => {
    const markets = syntheticMarkets(5, 1);
    const v = await startVenue({ markets });
    const c = await connect(v);
    const want = [markets[0]!.tokens[0], markets[0]!.tokens[1], markets[3]!.tokens[1]];
    c.send({ assets_ids: [...want, '123456789'], type: 'market', custom_feature_enabled: true });
    await until('books', () => c.frames.length === 1);
    const first = JSON.parse(c.frames[0]!) as Msg[];
    expect(Array.isArray(first)).toBe(true);
    expect(first.map((m) => m.event_type)).toEqual(['book', 'book', 'book']);
    expect(new Set(first.map((m) => m.asset_id))).toEqual(new Set(want));
    expect(first.every((m) => m.market === markets.find((x) => x.tokens.includes(m.asset_id!))!.conditionId)).toBe(true);
    c.send('PING');
    await until('PONG', () => c.frames.includes('PONG'));
    expect(v.stats()).toMatchObject({ connections: 1, subscribedAssets: 4, pings: 1 });
    expect(v.sent()).toEqual([]); // keepSent off
  });

  it('refuses assets beyond 500 per connection with INVALID OPERATION and ignores them', async () => {
    const markets = syntheticMarkets(260, 2);
    const tokens = markets.flatMap((m) => m.tokens);
    const v = await startVenue({ markets, keepSent: true });
    const c = await connect(v);
    c.send({ assets_ids: tokens, type: 'market' });
    await until('refusal and books', () => c.frames.length === 2);
    expect(c.frames[0]).toBe('INVALID OPERATION');
    expect(new Set((JSON.parse(c.frames[1]!) as Msg[]).map((m) => m.asset_id))).toEqual(new Set(tokens.slice(0, 500)));
    c.send({ assets_ids: tokens.slice(500, 503), operation: 'subscribe' });
    c.send({ assets_ids: tokens.slice(0, 2), operation: 'unsubscribe' });
    c.send({ assets_ids: tokens.slice(500, 503), operation: 'subscribe' });
    await until('second refusal and two books', () => c.frames.length === 5);
    expect(c.frames.slice(2, 4)).toEqual(['INVALID OPERATION', 'INVALID OPERATION']);
    expect((JSON.parse(c.frames[4]!) as Msg[]).map((m) => m.asset_id).sort()).toEqual(tokens.slice(500, 502).sort());
    // Another connection takes the rest: sharding over connections is how a client goes beyond 500.
    const d = await connect(v);
    d.send({ assets_ids: tokens.slice(502), type: 'market' });
    await until('shard books', () => d.frames.length === 1);
    expect(new Set((JSON.parse(d.frames[0]!) as Msg[]).map((m) => m.asset_id))).toEqual(new Set(tokens.slice(502)));
    expect(v.stats().subscribedAssets).toBe(500 + tokens.length - 502);
    expect(
      v
        .sent()
        .filter((s) => s.conn === 1)
        .map((s) => s.text),
    ).toEqual(c.frames);
  });

  it('sends each asset only to the connections subscribed to it, and every book equals the replay of the frames before it', async () => {
    const markets = syntheticMarkets(4, 3);
    const v = await startVenue({ markets, rate: 20_000, keepSent: true });
    const a = await connect(v);
    const b = await connect(v);
    const mine = {
      a: new Set([...markets[0]!.tokens, ...markets[1]!.tokens, markets[2]!.tokens[0]]),
      b: new Set([markets[2]!.tokens[1], ...markets[3]!.tokens]),
    };
    a.send({ assets_ids: [...mine.a], type: 'market', custom_feature_enabled: true });
    b.send({ assets_ids: [...mine.b], type: 'market', custom_feature_enabled: false });
    const traded = (c: Client): number => replay(c.frames).compared;
    await until('books after trades on both connections', () => traded(a) >= 60 && traded(b) >= 40, 40_000);
    for (const [c, own] of [
      [a, mine.a],
      [b, mine.b],
    ] as const) {
      const assets = c.messages().flatMap((m) => (m.price_changes ? m.price_changes.map((e) => e.asset_id) : [m.asset_id!]));
      expect(assets.length).toBeGreaterThan(1000);
      expect(assets.filter((x) => !own.has(x))).toEqual([]);
      const r = replay(c.frames);
      expect(r.problems).toEqual([]);
      expect(r.trades).toBeGreaterThan(0);
      // No frame repeats on a connection (a capture would take a repeat for one frame recorded twice).
      expect(new Set(c.frames).size).toBe(c.frames.length);
    }
    // Market 2 is split between the two connections: each got its own token's entries of the same messages.
    const split = (c: Client, t: string): number => c.messages().filter((m) => m.price_changes?.some((e) => e.asset_id === t)).length;
    expect(split(a, markets[2]!.tokens[0])).toBeGreaterThan(0);
    expect(split(b, markets[2]!.tokens[1])).toBeGreaterThan(0);
    // What the client received is what the venue says it sent, in order.
    const sentA = v.sent().filter((s) => s.conn === 1);
    expect(sentA.slice(0, a.frames.length).map((s) => s.text)).toEqual(a.frames);
    expect(b.messages().some((m) => m.event_type === 'best_bid_ask')).toBe(false);
    expect(a.messages().some((m) => m.event_type === 'best_bid_ask')).toBe(true);
  });

  it('gives a later subscriber the current books: what another connection replays at that moment', async () => {
    const markets = syntheticMarkets(2, 9);
    const v = await startVenue({ markets, rate: 20_000, keepSent: true });
    const a = await connect(v);
    a.send({ assets_ids: markets.flatMap((m) => m.tokens), type: 'market' });
    await until('a stream on the first connection', () => replay(a.frames).compared >= 20);
    const b = await connect(v);
    b.send({ assets_ids: markets[1]!.tokens, type: 'market' });
    await until('books on the second', () => b.frames.length > 0);
    const sent = v.sent();
    const at = sent.findIndex((s) => s.conn === 2);
    const before = replay(
      sent
        .slice(0, at)
        .filter((s) => s.conn === 1)
        .map((s) => s.text),
    ).state;
    const books = JSON.parse(b.frames[0]!) as Msg[];
    expect(books).toHaveLength(2);
    for (const m of books) {
      const want = before.get(m.asset_id!)!;
      expect(new Map(m.bids!.map((l) => [l.price, cents(l.size)]))).toEqual(want.bids);
      expect(new Map(m.asks!.map((l) => [l.price, cents(l.size)]))).toEqual(want.asks);
    }
  });

  it('announces a new market to custom-feature connections only, then streams it once subscribed', async () => {
    const markets = syntheticMarkets(2, 4);
    const v = await startVenue({ markets, rate: 5_000 });
    const a = await connect(v);
    const b = await connect(v);
    a.send({ assets_ids: markets[0]!.tokens, type: 'market', custom_feature_enabled: true });
    b.send({ assets_ids: markets[0]!.tokens, type: 'market' });
    await until('first books', () => a.frames.length > 0 && b.frames.length > 0);
    const m = v.addMarket({ question: 'Will the simulator announce this market?' });
    await until('new_market', () => a.messages().some((x) => x.event_type === 'new_market'));
    const announced = a.messages().find((x) => x.event_type === 'new_market')!;
    expect(announced).toMatchObject({ market: m.conditionId, assets_ids: m.tokens, question: 'Will the simulator announce this market?' });
    expect(m.tokens.every((t) => /^[1-9]\d{75,77}$/.test(t))).toBe(true);
    const bSeen = b.frames.length;
    await until('more frames on b', () => b.frames.length > bSeen + 50);
    expect(b.messages().some((x) => x.event_type === 'new_market')).toBe(false);
    const from = a.frames.length;
    a.send({ assets_ids: m.tokens, operation: 'subscribe' });
    await until('the new market trading', () => a.messages(from).some((x) => x.price_changes?.some((e) => e.asset_id === m.tokens[0])));
    const books = a.frames.slice(from).find((f) => f.startsWith('['))!;
    expect((JSON.parse(books) as Msg[]).map((x) => x.asset_id).sort()).toEqual([...m.tokens].sort());
    expect(replay(a.frames).problems).toEqual([]);
    // Resolution: announced to the custom-feature subscriber, and the market stops trading.
    v.resolveMarket(m.conditionId, 1);
    a.send('PING');
    await until('market_resolved and PONG', () => a.frames.includes('PONG') && a.messages().some((x) => x.event_type === 'market_resolved'));
    expect(a.messages().find((x) => x.event_type === 'market_resolved')).toMatchObject({ market: m.conditionId, winning_asset_id: m.tokens[1] });
    const pong = a.frames.indexOf('PONG');
    await until('more frames after the resolution', () => a.frames.length > pong + 100);
    expect(a.messages(pong + 1).filter((x) => x.market === m.conditionId && x.event_type !== 'market_resolved')).toEqual([]);
    expect(b.messages().some((x) => x.event_type === 'market_resolved')).toBe(false);
  });

  it('stops an asset once unsubscribed, and skips the books when initial_dump is false', async () => {
    const markets = syntheticMarkets(3, 10);
    const v = await startVenue({ markets, rate: 10_000 });
    const c = await connect(v);
    c.send({ assets_ids: [...markets[0]!.tokens, ...markets[1]!.tokens], type: 'market', initial_dump: false });
    await until('a stream', () => c.frames.length > 100);
    expect(c.frames.some((f) => f.includes('"event_type":"book"') && f.startsWith('['))).toBe(false);
    c.send({ assets_ids: markets[0]!.tokens, operation: 'unsubscribe' });
    // Frames after the PONG were sent after the venue read the unsubscription (one socket, in order).
    c.send('PING');
    await until('PONG', () => c.frames.includes('PONG'));
    const pong = c.frames.indexOf('PONG');
    await until('more frames', () => c.frames.length > pong + 200);
    const after = c.messages(pong + 1);
    expect(after.filter((x) => x.market === markets[0]!.conditionId)).toEqual([]);
    expect(after.filter((x) => x.market === markets[1]!.conditionId).length).toBeGreaterThan(0);
    expect(v.stats().subscribedAssets).toBe(2);
  });

  it('dropAll cuts every socket without a close frame', async () => {
    const markets = syntheticMarkets(2, 5);
    const v = await startVenue({ markets, rate: 2_000 });
    const a = await connect(v);
    const b = await connect(v);
    a.send({ assets_ids: markets[0]!.tokens, type: 'market' });
    b.send({ assets_ids: markets[1]!.tokens, type: 'market' });
    await until('both connected', () => v.stats().connections === 2 && a.frames.length > 0 && b.frames.length > 0);
    v.dropAll();
    await until('both closed', () => a.closeCode !== null && b.closeCode !== null && v.stats().connections === 0);
    expect([a.closeCode, b.closeCode]).toEqual([1006, 1006]);
    expect(v.stats().subscribedAssets).toBe(0);
    // The venue still takes new connections.
    const c = await connect(v);
    c.send({ assets_ids: markets[0]!.tokens, type: 'market' });
    await until('books after reconnect', () => c.frames.length > 0);
  });

  it('roughly honours the rate over a polled window', async () => {
    const markets = syntheticMarkets(30, 6);
    const rate = 10_000;
    const v = await startVenue({ markets, rate });
    const c = await connect(v);
    c.send({ assets_ids: markets.flatMap((m) => m.tokens), type: 'market' });
    await until('books', () => c.frames.length > 0);
    const levels = (): number =>
      c.messages(1).reduce((n, m) => n + (m.event_type === 'book' ? m.bids!.length + m.asks!.length : (m.price_changes?.length ?? 0)), 0);
    const t0 = performance.now();
    const l0 = levels();
    await until('a 4-second window', () => performance.now() - t0 >= 4_000, 30_000);
    const perSecond = (levels() - l0) / ((performance.now() - t0) / 1000);
    expect(perSecond).toBeGreaterThan(rate * 0.4);
    expect(perSecond).toBeLessThan(rate * 1.8);
  });

  it('drops a consumer that stops reading once its buffer passes the bound', async () => {
    const markets = syntheticMarkets(20, 8);
    const v = await startVenue({ markets, rate: 100_000, maxBufferedBytes: 256 << 10 });
    const c = await connect(v);
    c.send({ assets_ids: markets.flatMap((m) => m.tokens), type: 'market' });
    await until('books', () => c.frames.length > 0);
    c.ws.pause();
    await until('the slow consumer dropped', () => v.stats().slowConsumerDrops === 1 && v.stats().connections === 0, 30_000);
  });
});
