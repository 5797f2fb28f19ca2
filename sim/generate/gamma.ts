import type { Plan, PlanMarket, PlanEvent, PlanSeries } from './plan.js';
import { PRICE_STR } from './format.js';

/**
 * Gamma `/markets` records for the plan, shaped like the venue's (see
 * test/fixtures/venue/markets/gamma_market_btc_5m.json): camelCase keys, `outcomes` / `outcomePrices` /
 * `clobTokenIds` as JSON arrays inside strings, `volume` / `liquidity` as strings on markets and numbers on
 * events, and a nested `events[]` carrying the event's `series[]`. Written after the tape so volumes and
 * last prices agree with the generated trades.
 */
export type MarketTotals = {
  volumeMicro: number;
  trades: number;
  lastYesMilli: number;
  lastTradeMs: number;
  bestBid: number;
  bestAsk: number;
};

const iso = (ms: number): string => new Date(ms).toISOString().replace('.000Z', 'Z');
const isoMicros = (ms: number, frac: number): string => new Date(ms).toISOString().replace(/\.\d{3}Z$/, `.${String(frac).padStart(6, '0')}Z`);
const day = (ms: number): string => new Date(ms).toISOString().slice(0, 10);
const IMAGE = 'https://polymarket-upload.s3.us-east-2.amazonaws.com/';

function seriesJson(s: PlanSeries, updatedMs: number, volume: number): Record<string, unknown> {
  return {
    id: s.id,
    ticker: s.ticker,
    slug: s.slug,
    title: s.title,
    seriesType: 'single',
    recurrence: s.recurrence,
    image: '',
    icon: '',
    active: true,
    closed: false,
    archived: false,
    featured: false,
    restricted: true,
    createdAt: isoMicros(s.createdMs, 201627),
    updatedAt: isoMicros(updatedMs, 415743),
    volume24hr: 0,
    volume,
    liquidity: 0,
    commentCount: 0,
    requiresTranslation: false,
  };
}

function eventJson(plan: Plan, e: PlanEvent, volume: number, liquidity: number, closed: boolean, seriesVolume: number[]): Record<string, unknown> {
  const s = e.series >= 0 ? plan.series[e.series]! : undefined;
  const img = `${IMAGE}${e.slug}.png`;
  return {
    id: e.id,
    ticker: e.ticker,
    slug: e.slug,
    title: e.title,
    description: e.description,
    resolutionSource: '',
    startDate: isoMicros(e.startMs, 152914),
    creationDate: isoMicros(e.createdMs, 152908),
    endDate: iso(e.endMs),
    image: img,
    icon: img,
    active: true,
    closed,
    archived: false,
    new: false,
    featured: false,
    restricted: true,
    liquidity,
    volume,
    openInterest: 0,
    category: e.category,
    createdAt: isoMicros(e.createdMs, 37225),
    updatedAt: isoMicros(plan.endMs, 660179),
    competitive: 0.95,
    volume24hr: 0,
    volume1wk: 0,
    volume1mo: 0,
    volume1yr: volume,
    enableOrderBook: true,
    liquidityClob: liquidity,
    negRisk: e.negRisk,
    ...(e.negRisk ? { negRiskMarketID: e.negRiskMarketId } : {}),
    commentCount: 0,
    ...(s ? { series: [seriesJson(s, plan.endMs, seriesVolume[s.idx]!)] } : {}),
    cyom: false,
    showAllOutcomes: true,
    showMarketImages: true,
    enableNegRisk: e.negRisk,
    automaticallyActive: true,
    ...(e.eventStartMs ? { startTime: iso(e.eventStartMs) } : {}),
    ...(s ? { seriesSlug: s.slug } : {}),
    negRiskAugmented: false,
    pendingDeployment: false,
    deploying: false,
    requiresTranslation: false,
  };
}

export function gammaMarkets(plan: Plan, totals: MarketTotals[]): Record<string, unknown>[] {
  const num = (micro: number): number => Math.round(micro) / 1e6;
  const liq = (m: PlanMarket): number => Math.round((m.busy ? 2_000_000 : 20_000) * (1 + (m.idx % 7) / 3) * 1e4) / 1e4;
  const eventVolume = plan.events.map((e) => e.markets.reduce((a, i) => a + totals[i]!.volumeMicro, 0));
  const seriesVolume = plan.series.map(() => 0);
  for (const e of plan.events) if (e.series >= 0) seriesVolume[e.series]! += num(eventVolume[e.idx]!);

  return plan.markets.map((m) => {
    const t = totals[m.idx]!;
    const e = plan.events[m.event]!;
    const closed = m.resolvedInRange;
    const vol = num(t.volumeMicro);
    const yes = closed ? (m.winner === 0 ? '1' : '0') : t.lastYesMilli >= 0 ? PRICE_STR[t.lastYesMilli]! : '0.5';
    const no = closed ? (m.winner === 0 ? '0' : '1') : t.lastYesMilli >= 0 ? PRICE_STR[1000 - t.lastYesMilli]! : '0.5';
    const tick = m.tickChangeMs > 0 && m.tickChangeMs < plan.endMs ? 0.001 : m.tick / 1000;
    const l = liq(m);
    const img = `${IMAGE}${m.slug}.png`;
    const spreadMilli = t.bestAsk > t.bestBid && t.bestBid > 0 ? t.bestAsk - t.bestBid : m.tick;
    const eventVol = num(eventVolume[e.idx]!);
    const eventClosed = e.markets.every((i) => plan.markets[i]!.resolvedInRange);
    return {
      id: m.id,
      question: m.question,
      conditionId: m.conditionId,
      slug: m.slug,
      resolutionSource: m.kind === 'crypto15m' ? `https://data.chain.link/streams/${m.slug.slice(0, 3)}-usd` : '',
      endDate: iso(m.endMs),
      liquidity: closed ? '0' : String(l),
      startDate: isoMicros(m.createdMs, 328428),
      image: img,
      icon: img,
      description: m.description,
      outcomes: JSON.stringify(m.outcomes),
      outcomePrices: JSON.stringify([yes, no]),
      volume: String(vol),
      active: true,
      closed,
      marketMakerAddress: '',
      createdAt: isoMicros(m.createdMs, 140253),
      updatedAt: isoMicros(closed ? m.endMs + 600_000 : plan.endMs, 97817),
      new: false,
      featured: false,
      archived: false,
      ...(m.negRisk ? { groupItemTitle: m.groupItemTitle } : {}),
      restricted: true,
      groupItemThreshold: '0',
      questionID: m.questionId,
      category: m.category,
      enableOrderBook: true,
      orderPriceMinTickSize: tick,
      orderMinSize: 5,
      volumeNum: vol,
      liquidityNum: closed ? 0 : l,
      endDateIso: day(m.endMs),
      startDateIso: day(m.createdMs),
      hasReviewedDates: true,
      volume24hr: 0,
      volume1wk: 0,
      volume1mo: 0,
      volume1yr: vol,
      clobTokenIds: JSON.stringify(m.tokens),
      umaBond: '500',
      umaReward: '2',
      volume24hrClob: 0,
      volume1wkClob: 0,
      volume1moClob: 0,
      volume1yrClob: vol,
      volumeClob: vol,
      liquidityClob: closed ? 0 : l,
      makerBaseFee: m.feeBps,
      takerBaseFee: m.feeBps,
      acceptingOrders: !closed,
      negRisk: m.negRisk,
      ...(m.negRisk ? { negRiskMarketID: e.negRiskMarketId, negRiskRequestID: m.questionId } : {}),
      events: [eventJson(plan, e, eventVol, closed ? 0 : l, eventClosed, seriesVolume)],
      ready: false,
      funded: false,
      acceptingOrdersTimestamp: iso(m.createdMs),
      cyom: false,
      competitive: 0.95,
      pagerDutyNotificationEnabled: false,
      approved: true,
      rewardsMinSize: 50,
      rewardsMaxSpread: 4.5,
      spread: spreadMilli / 1000,
      ...(t.lastYesMilli >= 0 ? { lastTradePrice: t.lastYesMilli / 1000 } : {}),
      bestBid: closed ? 0 : t.bestBid / 1000,
      bestAsk: closed ? 1 : t.bestAsk / 1000,
      automaticallyActive: true,
      clearBookOnStart: false,
      ...(closed
        ? {
            closedTime: iso(m.endMs + 300_000)
              .replace('T', ' ')
              .replace('Z', '+00'),
            umaResolutionStatus: 'resolved',
          }
        : {}),
      showGmpSeries: false,
      showGmpOutcome: false,
      manualActivation: false,
      negRiskOther: false,
      umaResolutionStatuses: closed ? '["proposed","resolved"]' : '[]',
      pendingDeployment: false,
      deploying: false,
      rfqEnabled: false,
      ...(e.eventStartMs ? { eventStartTime: iso(e.eventStartMs) } : {}),
      holdingRewardsEnabled: false,
      feesEnabled: m.feeBps > 0,
      requiresTranslation: false,
      ...(m.feeBps > 0 ? { makerRebatesFeeShareBps: 10000, feeType: 'crypto_fees' } : {}),
    };
  });
}
