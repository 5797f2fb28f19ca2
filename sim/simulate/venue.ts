import http from 'node:http';
import { WebSocketServer, type WebSocket } from 'ws';
import { Rng } from '../generate/prng.js';
import { MarketBook } from './book.js';
import { Feed, type Conn, type SentFrame, type SimTrade } from './feed.js';
import { newSimMarket, type SimMarket } from './markets.js';
import { bookLevels, bookText, marketResolvedText, newMarketText } from './messages.js';
import { INVALID_OPERATION, parseClientMessage } from './protocol.js';
import { RatePacer } from './pacer.js';

export { syntheticMarkets, type SimMarket } from './markets.js';
export type { SimTrade } from './feed.js';

export type SimulatedVenueOptions = {
  host?: string;
  /** 0 = an ephemeral port (default). */
  port?: number;
  /** The markets it trades from the start. */
  markets: SimMarket[];
  /** Level updates per second across all subscribed assets (book levels + price_change entries), Poisson-ish with bursts. */
  rate: number;
  /** Deterministic choices (not timing). */
  seed?: number;
  maxAssetsPerConnection?: number;
  /** Tests: remember every frame sent. */
  keepSent?: boolean;
  /** A connection whose unsent bytes exceed this is dropped as a slow consumer (default 16 MiB). */
  maxBufferedBytes?: number;
  /** Every trade printed (as `last_trade_price`): the simulated chain (./chain.ts) settles it as exchange logs. */
  onTrade?: (t: SimTrade) => void;
  /**
   * Plain HTTP served on the same port (the venue's REST side: catalogue pages, a JSON-RPC node), tried in order;
   * a route answers by returning true. Anything no route takes is a 404.
   */
  routes?: readonly SimHttpRoute[];
};

/** One HTTP handler of the simulated venue: returns true when it answered the request. */
export type SimHttpRoute = (req: http.IncomingMessage, res: http.ServerResponse, url: URL) => boolean | Promise<boolean>;

export type VenueStats = {
  connections: number;
  /** Distinct assets at least one connection is subscribed to. */
  subscribedAssets: number;
  /** Text frames sent (PONGs excluded). */
  frames: number;
  /** Level updates sent on subscribed assets (book levels + price_change entries), each counted once however many connections got it. */
  levelUpdates: number;
  pings: number;
  /** Connections dropped because their send buffer grew beyond `maxBufferedBytes`. */
  slowConsumerDrops: number;
};

const PATH = '/ws/market';

/**
 * A venue speaking the market channel in real time over a real WebSocket server: subscriptions, the books after
 * each, PING/PONG, and a stream of order-book events on subscribed markets at the asked rate (ingest/README.md,
 * "Simulated venue"). It is the tests', the bench's and the demo's venue.
 */
export class SimulatedVenue {
  /** The market channel: ws://host:port/ws/market. */
  readonly url: string;
  /** The same port over plain HTTP (the `routes`): http://host:port. */
  readonly httpUrl: string;
  private readonly rng: Rng;
  private readonly feed: Feed;
  private readonly pacer: RatePacer;
  private readonly kept: SentFrame[] | null;
  private readonly byToken = new Map<string, { b: MarketBook; token: 0 | 1 }>();
  private readonly books = new Map<string, { b: MarketBook; id: number }>();
  private readonly conns = new Set<Conn>();
  private nextConn = 1;
  private pings = 0;
  private slowDrops = 0;
  private readonly maxAssets: number;
  private readonly maxBuffered: number;

  private constructor(
    private readonly server: http.Server,
    private readonly wss: WebSocketServer,
    opts: SimulatedVenueOptions,
    port: number,
  ) {
    this.url = `ws://${opts.host ?? '127.0.0.1'}:${port}${PATH}`;
    this.httpUrl = `http://${opts.host ?? '127.0.0.1'}:${port}`;
    const seed = opts.seed ?? 1;
    this.rng = new Rng(seed, 'venue');
    this.kept = opts.keepSent ? [] : null;
    this.feed = new Feed(new Rng(seed, 'venue:hashes'), this.kept, opts.onTrade ?? null);
    this.maxAssets = opts.maxAssetsPerConnection ?? 500;
    this.maxBuffered = opts.maxBufferedBytes ?? 16 << 20;
    for (const m of opts.markets) this.register(m);
    this.pacer = new RatePacer(
      opts.rate,
      new Rng(seed, 'venue:pace'),
      this.feed,
      () => this.activeMarkets(),
      () => this.dropSlowConsumers(),
    );
    wss.on('connection', (ws) => this.accept(ws));
  }

  static async start(opts: SimulatedVenueOptions): Promise<SimulatedVenue> {
    if (!(opts.rate >= 0) || !Number.isFinite(opts.rate)) throw new Error(`rate must be a finite number ≥ 0, got ${opts.rate}`);
    const routes = opts.routes ?? [];
    const server = http.createServer((req, res) => {
      void (async () => {
        const url = new URL(req.url ?? '/', 'http://venue');
        for (const route of routes) if (await route(req, res, url)) return;
        res.writeHead(404, { 'content-type': 'application/json' }).end('{"error":"not found"}');
      })().catch((err: unknown) => {
        if (!res.headersSent) res.writeHead(500, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ error: (err as Error).message }));
      });
    });
    const wss = new WebSocketServer({ server, path: PATH, perMessageDeflate: false, maxPayload: 4 << 20 });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(opts.port ?? 0, opts.host ?? '127.0.0.1', () => resolve());
    });
    server.on('error', () => {});
    wss.on('error', () => {});
    const address = server.address();
    const port = typeof address === 'object' && address ? address.port : (opts.port ?? 0);
    return new SimulatedVenue(server, wss, opts, port);
  }

  private register(m: SimMarket): MarketBook {
    if (this.books.has(m.conditionId)) throw new Error(`market ${m.conditionId} already trades on this venue`);
    const tick = Math.round(Number(m.tick) * 1000);
    if (tick !== 1 && tick !== 10) throw new Error(`tick ${m.tick} of ${m.conditionId}: the venue trades 0.01 or 0.001`);
    const b = new MarketBook(m.conditionId, [m.tokens[0], m.tokens[1]], tick, Math.exp(this.rng.normal()), this.rng);
    this.books.set(m.conditionId, { b, id: 500_000 + this.books.size });
    this.byToken.set(m.tokens[0], { b, token: 0 });
    this.byToken.set(m.tokens[1], { b, token: 1 });
    return b;
  }

  /** A new market: announced as `new_market` to custom-feature connections; it trades once someone subscribes. */
  addMarket(m: Partial<SimMarket> = {}): SimMarket {
    const market = newSimMarket(this.rng, m);
    this.register(market);
    const text = newMarketText(market, this.books.get(market.conditionId)!.id, String(Date.now()));
    for (const c of this.conns) if (c.custom && c.initialized) this.feed.send(c, text);
    return market;
  }

  /** The market stops trading; custom-feature connections subscribed to it get `market_resolved`. */
  resolveMarket(conditionId: string, winner: 0 | 1 = 0): void {
    const e = this.books.get(conditionId);
    if (!e || e.b.resolved) return;
    e.b.resolved = true;
    this.pacer.marketsChanged();
    const text = marketResolvedText(e.b, e.id, winner, String(Date.now()));
    const to = new Set([...(this.feed.subs.get(e.b.tokens[0]) ?? []), ...(this.feed.subs.get(e.b.tokens[1]) ?? [])]);
    for (const c of to) if (c.custom) this.feed.send(c, text);
  }

  private accept(ws: WebSocket): void {
    const c: Conn = { id: this.nextConn++, ws, assets: new Set(), custom: false, initialized: false };
    this.conns.add(c);
    ws.on('message', (data, isBinary) => {
      if (!isBinary) this.onText(c, data.toString());
    });
    ws.on('error', () => {});
    ws.on('close', () => {
      this.conns.delete(c);
      this.unsubscribe(c, [...c.assets]);
    });
  }

  private onText(c: Conn, text: string): void {
    const msg = parseClientMessage(text);
    if (msg.kind === 'ping') {
      this.pings++;
      c.ws.send('PONG');
    } else if (msg.kind === 'invalid' || (msg.kind === 'initial' && c.initialized)) {
      this.feed.send(c, INVALID_OPERATION);
    } else if (msg.kind === 'initial') {
      c.initialized = true;
      c.custom = msg.custom;
      this.subscribe(c, msg.assets, msg.initialDump);
    } else {
      c.initialized = true;
      if (msg.subscribe) this.subscribe(c, msg.assets, msg.initialDump);
      else this.unsubscribe(c, msg.assets);
    }
  }

  /**
   * Adds the assets that fit under the connection's limit; the rest are refused with one `INVALID OPERATION` frame
   * and ignored. Then one frame, a JSON array, holding the current book of each newly subscribed known asset in
   * shuffled order, timestamps within the last 1.5 s and not in order, as the venue sends them.
   */
  private subscribe(c: Conn, assets: string[], dump: boolean): void {
    const fresh = [...new Set(assets)].filter((a) => !c.assets.has(a));
    const accepted = fresh.slice(0, Math.max(0, this.maxAssets - c.assets.size));
    if (accepted.length < fresh.length) this.feed.send(c, INVALID_OPERATION);
    for (const a of accepted) {
      c.assets.add(a);
      let s = this.feed.subs.get(a);
      if (!s) this.feed.subs.set(a, (s = new Set()));
      s.add(c);
    }
    if (accepted.length) this.pacer.marketsChanged();
    if (!dump) return;
    const known = accepted.map((a) => this.byToken.get(a)).filter((e) => e !== undefined);
    for (let i = known.length - 1; i > 0; i--) {
      const j = this.rng.int(i + 1);
      [known[i], known[j]] = [known[j]!, known[i]!];
    }
    if (known.length === 0) return;
    const now = Date.now();
    const books = known.map((e) => {
      this.feed.levelUpdates += bookLevels(e.b);
      return bookText(e.b, e.token, String(now - this.rng.int(1500)), this.rng);
    });
    this.feed.send(c, `[${books.join(',')}]`);
  }

  private unsubscribe(c: Conn, assets: string[]): void {
    for (const a of assets) {
      if (!c.assets.delete(a)) continue;
      const s = this.feed.subs.get(a);
      s?.delete(c);
      if (s?.size === 0) this.feed.subs.delete(a);
    }
    this.pacer.marketsChanged();
  }

  /** Markets with a subscribed token, for the pacer to step. */
  private activeMarkets(): MarketBook[] {
    const out: MarketBook[] = [];
    for (const { b } of this.books.values()) if (!b.resolved && (this.feed.subs.has(b.tokens[0]) || this.feed.subs.has(b.tokens[1]))) out.push(b);
    return out;
  }

  /** A slow consumer is dropped, as the venue does, instead of buffered without bound. */
  private dropSlowConsumers(): void {
    for (const c of this.conns) {
      if (c.ws.bufferedAmount > this.maxBuffered) {
        this.slowDrops++;
        c.ws.terminate();
      }
    }
  }

  /** Every socket is cut at once, without a close frame (the client sees 1006). */
  dropAll(): void {
    for (const c of this.conns) c.ws.terminate();
  }

  sent(): SentFrame[] {
    return this.kept ? [...this.kept] : [];
  }

  stats(): VenueStats {
    return {
      connections: this.conns.size,
      subscribedAssets: this.feed.subs.size,
      frames: this.feed.frames,
      levelUpdates: this.feed.levelUpdates,
      pings: this.pings,
      slowConsumerDrops: this.slowDrops,
    };
  }

  async close(): Promise<void> {
    this.pacer.stop();
    this.dropAll();
    await new Promise<void>((resolve) => this.wss.close(() => resolve()));
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}
