import type { SimMarket } from './markets.js';

/**
 * One market of the simulated catalogue and its three renderings, shaped like the real venue's answers
 * (test/fixtures/venue/markets/: gamma_market_btc_5m.json, gamma_event_negrisk.json,
 * clob_markets_page_enveloped.json): Gamma camelCase with `outcomes`, `outcomePrices` and `clobTokenIds` as JSON
 * arrays inside strings and `volume`/`liquidity` as strings on markets and numbers on events; CLOB snake_case with
 * `tokens[{token_id, outcome, price, winner}]`.
 */
export type CatalogueEntry = {
  market: SimMarket;
  /** Gamma's numeric id (creation order) and its event's. */
  id: number;
  eventId: number;
  question: string;
  slug: string;
  description: string;
  questionId: string;
  createdAt: string;
  startDate: string;
  endDate: string;
  updatedAt: string;
  tick: string;
  acceptingOrders: boolean;
  closed: boolean;
  /** The winning outcome (0 = Yes) once resolved. */
  winner: 0 | 1 | null;
  resolvedAt: string | null;
  /** Yes price; volume and liquidity in USDC (they move as the market trades). */
  price: number;
  volume: number;
  liquidity: number;
};

const OUTCOMES = ['Yes', 'No'] as const;
/** The venue writes the arrays inside strings with ", " between elements. */
const stringList = (xs: readonly string[]): string => `[${xs.map((x) => JSON.stringify(x)).join(', ')}]`;
const prices = (e: CatalogueEntry): [string, string] =>
  e.winner === null ? [String(round(e.price, 4)), String(round(1 - e.price, 4))] : e.winner === 0 ? ['1', '0'] : ['0', '1'];
const round = (x: number, d: number): number => Math.round(x * 10 ** d) / 10 ** d;
const resolved = (e: CatalogueEntry): boolean => e.winner !== null;

function eventFields(e: CatalogueEntry): Record<string, unknown> {
  return {
    id: String(e.eventId),
    ticker: e.slug,
    slug: e.slug,
    title: e.question,
    description: e.description,
    resolutionSource: '',
    startDate: e.startDate,
    creationDate: e.createdAt,
    endDate: e.endDate,
    active: true,
    closed: e.closed,
    archived: false,
    new: false,
    featured: false,
    restricted: true,
    liquidity: round(e.liquidity, 4),
    volume: round(e.volume, 6),
    openInterest: 0,
    createdAt: e.createdAt,
    updatedAt: e.updatedAt,
    enableOrderBook: true,
    liquidityClob: round(e.liquidity, 4),
    negRisk: false,
    commentCount: 0,
    ...(e.market.seriesSlug ? { seriesSlug: e.market.seriesSlug } : {}),
    ...(e.market.category ? { category: e.market.category } : {}),
  };
}

/** A Gamma `/markets` record; `withEvents` false for the copy nested in an `/events` record. */
export function gammaMarket(e: CatalogueEntry, withEvents = true): Record<string, unknown> {
  const vol = round(e.volume, 6);
  const liq = round(e.liquidity, 4);
  const [yes, no] = prices(e);
  const spread = Number(e.tick);
  return {
    id: String(e.id),
    question: e.question,
    conditionId: e.market.conditionId,
    slug: e.slug,
    resolutionSource: '',
    endDate: e.endDate,
    liquidity: String(liq),
    startDate: e.startDate,
    description: e.description,
    outcomes: stringList(OUTCOMES),
    outcomePrices: stringList([yes, no]),
    volume: String(vol),
    active: true,
    closed: e.closed,
    marketMakerAddress: '',
    createdAt: e.createdAt,
    updatedAt: e.updatedAt,
    new: false,
    featured: false,
    archived: false,
    restricted: true,
    groupItemThreshold: '0',
    questionID: e.questionId,
    enableOrderBook: true,
    orderPriceMinTickSize: Number(e.tick),
    orderMinSize: 5,
    volumeNum: vol,
    liquidityNum: liq,
    endDateIso: e.endDate.slice(0, 10),
    startDateIso: e.startDate.slice(0, 10),
    hasReviewedDates: true,
    volume24hr: round(e.volume / 10, 6),
    clobTokenIds: stringList(e.market.tokens),
    acceptingOrders: e.acceptingOrders,
    negRisk: false,
    ...(withEvents ? { events: [eventFields(e)] } : {}),
    acceptingOrdersTimestamp: e.startDate.slice(0, 19) + 'Z',
    spread,
    lastTradePrice: round(e.price, 3),
    bestBid: round(Math.max(spread, e.price - spread / 2), 3),
    bestAsk: round(Math.min(1 - spread, e.price + spread / 2), 3),
    umaResolutionStatuses: '[]',
    ...(resolved(e) ? { umaResolutionStatus: 'resolved', closedTime: e.resolvedAt!.replace('T', ' ').slice(0, 19) + '+00', umaEndDate: e.resolvedAt } : {}),
  };
}

/** A Gamma `/events` record: the event with its market nested. */
export function gammaEvent(e: CatalogueEntry): Record<string, unknown> {
  return { ...eventFields(e), markets: [gammaMarket(e, false)] };
}

/** A CLOB `/markets` record. */
export function clobMarket(e: CatalogueEntry): Record<string, unknown> {
  const [yes, no] = prices(e).map(Number) as [number, number];
  return {
    enable_order_book: !e.closed,
    active: true,
    closed: e.closed,
    archived: false,
    accepting_orders: e.acceptingOrders,
    accepting_order_timestamp: e.startDate.slice(0, 19) + 'Z',
    minimum_order_size: 5,
    minimum_tick_size: Number(e.tick),
    condition_id: e.market.conditionId,
    question_id: e.questionId,
    question: e.question,
    description: e.description,
    market_slug: e.slug,
    end_date_iso: e.endDate,
    game_start_time: null,
    seconds_delay: 0,
    fpmm: '',
    maker_base_fee: 0,
    taker_base_fee: 0,
    notifications_enabled: true,
    neg_risk: false,
    neg_risk_market_id: '',
    neg_risk_request_id: '',
    rewards: { rates: null, min_size: 0, max_spread: 0 },
    is_50_50_outcome: false,
    tokens: e.market.tokens.map((token_id, i) => ({ token_id, outcome: OUTCOMES[i], price: i === 0 ? yes : no, winner: e.winner === i })),
    tags: ['All'],
  };
}
