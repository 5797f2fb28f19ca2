import type http from 'node:http';
import { Rng } from '../generate/prng.js';
import { clobPage, gammaKeysetPage, gammaOffsetPage, type Answer, type PageLimits } from './catalogue-pages.js';
import type { CatalogueEntry } from './catalogue-records.js';
import type { SimMarket } from './markets.js';
import type { SimHttpRoute } from './venue.js';

export type { CatalogueEntry } from './catalogue-records.js';

/** The catalogue pages the simulated venue serves (the poller's endpoint names; Gamma's keyset and offset listings alike). */
export type CatalogueEndpoint = 'gamma_markets' | 'gamma_events' | 'clob_markets';
/** A page answered with an HTTP error, with a body that is not JSON, or with JSON of another shape. */
export type CatalogueFault = { status: 429 | 500 | 502 | 503; retryAfter?: string } | 'not-json' | 'shape';

export type SimulatedCatalogueOptions = {
  markets: readonly SimMarket[];
  seed?: number;
} & Partial<PageLimits>;

/** The real venue's limits. */
const LIMITS: PageLimits = { gammaMaxLimit: 100, gammaMaxOffset: 10_000, keysetMaxMarkets: 100, keysetMaxEvents: 500, clobPageSize: 100 };
const ROUTES: Record<string, { endpoint: CatalogueEndpoint; answer: (list: readonly CatalogueEntry[], q: URLSearchParams, l: PageLimits) => Answer }> = {
  '/gamma/markets/keyset': { endpoint: 'gamma_markets', answer: (list, q, l) => gammaKeysetPage(list, 'markets', q, l) },
  '/gamma/events/keyset': { endpoint: 'gamma_events', answer: (list, q, l) => gammaKeysetPage(list, 'events', q, l) },
  '/gamma/markets': { endpoint: 'gamma_markets', answer: (list, q, l) => gammaOffsetPage(list, 'markets', q, l) },
  '/gamma/events': { endpoint: 'gamma_events', answer: (list, q, l) => gammaOffsetPage(list, 'events', q, l) },
  '/clob/markets': { endpoint: 'clob_markets', answer: clobPage },
};

const DAY = 86_400_000;
const BASE_MS = Date.UTC(2026, 0, 5);
const iso = (ms: number): string => new Date(ms).toISOString();

/**
 * The venue's market catalogue over HTTP, served through `SimulatedVenueOptions.routes`: Gamma `GET
 * /gamma/markets/keyset` and `/gamma/events/keyset` (`limit`, `after_cursor`), Gamma's legacy offset listing `GET
 * /gamma/markets` and `/gamma/events` (`limit`, `offset`, `order`, `ascending`) and CLOB `GET /clob/markets`
 * (`next_cursor`), with records shaped like the real venue's (./catalogue-records.ts) and the real venue's limits
 * (./catalogue-pages.ts). Point PMLAKE_GAMMA_URL at `<venue.httpUrl>/gamma` and PMLAKE_CLOB_URL at
 * `<venue.httpUrl>/clob`. The offset listing without `order` goes by volume, which moves as markets trade (every
 * page served): paging it repeats and skips rows, as on the real venue. The catalogue changes through `add`,
 * `setTickSize`, `setAcceptingOrders` and `resolve`; tests hook every page (`onPageServed`) and inject faults
 * (`fault`, by endpoint and page index).
 */
export class SimulatedCatalogue {
  private readonly rng: Rng;
  private readonly byCid = new Map<string, CatalogueEntry>();
  private readonly list: CatalogueEntry[] = [];
  private readonly faults = new Map<string, { fault: CatalogueFault; left: number }>();
  private readonly limits: PageLimits;
  /** Called once a page's body is built, before it is sent; a promise returned delays the answer. */
  onPageServed: ((endpoint: CatalogueEndpoint, pageIndex: number) => void | Promise<void>) | null = null;
  /** Pages answered (faults included) per endpoint. */
  readonly served: Record<CatalogueEndpoint, number> = { gamma_markets: 0, gamma_events: 0, clob_markets: 0 };
  readonly routes: readonly SimHttpRoute[];

  constructor(opts: SimulatedCatalogueOptions) {
    this.rng = new Rng(opts.seed ?? 1, 'catalogue');
    const { markets: _markets, seed: _seed, ...limits } = opts;
    this.limits = { ...LIMITS, ...limits };
    for (const m of opts.markets) this.add(m);
    this.routes = [(req, res, url) => this.route(req, res, url)];
  }

  /** Every market listed, in creation (id) order. */
  entries(): readonly CatalogueEntry[] {
    return [...this.list];
  }

  /** A market listed from now on, after every market already listed. */
  add(market: SimMarket): CatalogueEntry {
    if (this.byCid.has(market.conditionId)) throw new Error(`market ${market.conditionId} is already listed`);
    // The generator's id when it planned the market (a generated history and the polled catalogue then agree),
    // else one after every id listed: ids grow with creation, as the keyset listing's order relies on.
    const last = this.list.at(-1)?.id ?? 500_000;
    const id = market.id !== undefined && Number(market.id) > last ? Number(market.id) : last + 1 + this.rng.int(60);
    const created = BASE_MS + this.list.length * 3_600_000 + this.rng.int(3_600_000);
    const question = market.question ?? `Will market ${id} resolve Yes?`;
    const e: CatalogueEntry = {
      market,
      id,
      eventId: market.eventId !== undefined && /^\d+$/.test(market.eventId) ? Number(market.eventId) : 90_000 + this.list.length,
      question,
      slug: market.slug ?? `market-${id}`,
      description: `This market will resolve to "Yes" if ${question.replace(/^Will |\?$/g, '')}. Otherwise, it will resolve to "No".`,
      questionId: `0x${this.rng.hex(64)}`,
      createdAt: iso(created),
      startDate: iso(created + 60_000 + this.rng.int(600_000)),
      endDate: iso(Math.ceil((created + (2 + this.rng.int(120)) * DAY) / DAY) * DAY),
      updatedAt: iso(created + 120_000),
      tick: market.tick,
      acceptingOrders: true,
      closed: false,
      winner: null,
      resolvedAt: null,
      price: 0.05 + 0.9 * this.rng.float(),
      volume: this.rng.exp(50_000),
      liquidity: this.rng.exp(20_000),
    };
    this.list.push(e);
    this.byCid.set(market.conditionId, e);
    return e;
  }

  private entry(conditionId: string): CatalogueEntry {
    const e = this.byCid.get(conditionId);
    if (!e) throw new Error(`market ${conditionId} is not listed`);
    e.updatedAt = iso(Date.now());
    return e;
  }

  setTickSize(conditionId: string, tick: string): void {
    this.entry(conditionId).tick = tick;
  }

  setAcceptingOrders(conditionId: string, accepting: boolean): void {
    this.entry(conditionId).acceptingOrders = accepting;
  }

  /** Closed, resolved by UMA, outcome prices 1/0, CLOB winner flags, no longer accepting orders. */
  resolve(conditionId: string, winner: 0 | 1): void {
    const e = this.entry(conditionId);
    Object.assign(e, { closed: true, acceptingOrders: false, winner, resolvedAt: e.updatedAt });
  }

  /** The page `pageIndex` of `endpoint` is answered with `fault` the next `times` times it is asked. */
  fault(endpoint: CatalogueEndpoint, pageIndex: number, fault: CatalogueFault, times = 1): void {
    this.faults.set(`${endpoint}:${pageIndex}`, { fault, left: times });
  }

  /** Markets trade: volumes and prices move, so the order by volume changes between two pages. */
  private trade(): void {
    for (const e of this.list) {
      if (e.closed || !this.rng.chance(0.3)) continue;
      e.volume += this.rng.exp(5_000);
      e.price = Math.min(0.99, Math.max(0.01, e.price + (this.rng.float() - 0.5) * 0.02));
    }
  }

  private async route(req: http.IncomingMessage, res: http.ServerResponse, url: URL): Promise<boolean> {
    const r = ROUTES[url.pathname];
    if (!r || req.method !== 'GET') return false;
    const page = r.answer(this.list, url.searchParams, this.limits);
    this.served[r.endpoint]++;
    this.trade();
    if (page.status === 200) {
      const key = `${r.endpoint}:${page.index}`;
      const f = this.faults.get(key);
      if (f && f.left-- > 0) Object.assign(page, faultAnswer(f.fault, page.body));
      if (f && f.left <= 0) this.faults.delete(key);
    }
    await this.onPageServed?.(r.endpoint, page.index);
    res.writeHead(page.status, { 'content-type': page.type ?? 'application/json', ...page.headers }).end(page.body);
    return true;
  }
}

function faultAnswer(fault: CatalogueFault, body: string): Partial<Answer> {
  if (fault === 'not-json') return { type: 'text/html', body: '<html><body><h1>502 Bad Gateway</h1></body></html>' };
  // The records still there, in an envelope the poller does not know.
  if (fault === 'shape') return { body: `{"results":${body}}` };
  return { status: fault.status, body: JSON.stringify({ error: 'try again later' }), headers: fault.retryAfter ? { 'retry-after': fault.retryAfter } : {} };
}
