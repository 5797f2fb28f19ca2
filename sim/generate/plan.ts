import { Rng } from './prng.js';

/**
 * The market plan: which markets exist, when each trades, how its fair price moves, who trades. It is a
 * pure function of the options, cheap to build (milliseconds for thousands of markets), so every worker
 * thread rebuilds it from the seed instead of receiving it, and each day can be simulated independently.
 */
export type GenerateOptions = {
  markets: number;
  days: number;
  seed: number;
  out: string;
  /** First day, YYYY-MM-DD (UTC). Default: the range is centred on 2025-09-15 so both price_change shapes appear. */
  start?: string;
  /** Number of very busy long-running markets carrying a large share of the volume. */
  busy?: number;
  /** Also write crypto-options trades (options/YYYY-MM-DD.jsonl). */
  options?: boolean;
  /** Activity multiplier (1 = default event rates). */
  rate?: number;
  /**
   * Mean number of resting (maker) orders one taker order fills (default ≈ 2.9). Raising it raises trades per
   * match without adding book messages: the bench uses it to reach its trades-to-level-updates ratio.
   */
  makerFills?: number;
  /** Worker threads; 0 = run in this thread. Default: available cores, capped at the number of days. */
  workers?: number;
  /** Capture faults to inject into the websocket tape (faults.ts); none by default. */
  faults?: FaultOptions;
};

/** Capture faults injected into the websocket tape (sim/generate/faults.ts). */
export type FaultOptions = {
  dropRate: number;
  silences: { fromMs: number; seconds: number }[];
  duplicates: number;
  crossed: number;
};

export type ResolvedOptions = Required<Omit<GenerateOptions, 'workers' | 'faults'>> & { workers: number };

export type Kind = 'crypto15m' | 'daily' | 'politics' | 'futures' | 'match';

export type PlanSeries = {
  idx: number;
  id: string;
  ticker: string;
  slug: string;
  title: string;
  recurrence: string;
  category: string;
  createdMs: number;
};

export type PlanEvent = {
  idx: number;
  id: string;
  ticker: string;
  slug: string;
  title: string;
  description: string;
  category: string;
  negRisk: boolean;
  negRiskMarketId: string;
  series: number; // index into plan.series, -1 when the event is not part of a series
  startMs: number;
  endMs: number;
  createdMs: number;
  eventStartMs: number; // for recurring crypto windows: when the window opens
  markets: number[];
};

export type PlanMarket = {
  idx: number;
  id: string;
  kind: Kind;
  event: number;
  question: string;
  groupItemTitle: string;
  description: string;
  category: string;
  slug: string;
  conditionId: string;
  questionId: string;
  outcomes: [string, string];
  tokens: [string, string];
  /** Gamma createdAt / startDate. */
  createdMs: number;
  /** Trading window inside the generated range: the tape shows this market in [tradeFromMs, tradeToMs). */
  tradeFromMs: number;
  tradeToMs: number;
  /** Gamma endDate: when the market closes; resolvedInRange when that is inside the range. */
  endMs: number;
  resolvedInRange: boolean;
  /** Winning outcome index when resolved in range, else -1. */
  winner: number;
  negRisk: boolean;
  /** Milli-price grid step at the start: 10 (0.01) or 1 (0.001). */
  tick: number;
  /** When the venue changes the tick 0.01 → 0.001 (prices near the bounds before resolution); 0 = never. */
  tickChangeMs: number;
  /** Relative activity (events per hour = base rate × weight). */
  weight: number;
  busy: boolean;
  /** Fair probability of outcome 0 as a logit, piecewise linear between knots (times ms, values logit). */
  knotT: number[];
  knotX: number[];
  /** Stationary s.d. of the intraday OU noise around the knot path (logit units). */
  noiseSd: number;
  feeBps: number;
};

export type Plan = {
  opts: ResolvedOptions;
  startMs: number;
  endMs: number;
  dayStarts: number[];
  markets: PlanMarket[];
  events: PlanEvent[];
  series: PlanSeries[];
  /** Liquidity providers: most maker orders come from a few of them. */
  makers: string[];
  /** Takers: a long tail of addresses. */
  takers: string[];
  /** Base events per hour for a weight-1 market. */
  baseRatePerHour: number;
};

export const DAY_MS = 86_400_000;
/** The venue switched `price_change` to the `price_changes[]` shape in September 2025. */
export const NEW_SHAPE_FROM = '2025-09-15';
const CENTRE = Date.UTC(2025, 8, 15);

/** 1 + geometric(0.35): the mean maker fills per match of the generator's first version (kept as the default). */
export const DEFAULT_MAKER_FILLS = 1 + 0.65 / 0.35;

export function resolveOptions(o: GenerateOptions): ResolvedOptions {
  const start = o.start ?? isoDate(CENTRE - Math.floor(o.days / 2) * DAY_MS);
  return {
    markets: o.markets,
    days: o.days,
    seed: o.seed,
    out: o.out,
    start,
    busy: o.busy ?? Math.max(1, Math.round(o.markets / 500)),
    options: o.options ?? false,
    rate: o.rate ?? 1,
    makerFills: o.makerFills ?? DEFAULT_MAKER_FILLS,
    workers: o.workers ?? -1,
  };
}

export function isoDate(ms: number): string {
  return new Date(ms).toISOString().slice(0, 10);
}

const FIRST_NAMES = [
  'Jordan',
  'Priya',
  'Marcus',
  'Elena',
  'Theo',
  'Imani',
  'Rafael',
  'Hannah',
  'Desmond',
  'Mei',
  'Colin',
  'Sofia',
  'Victor',
  'Amara',
  'Grant',
  'Lucia',
  'Nolan',
  'Farah',
  'Owen',
  'Beatrix',
];
const LAST_NAMES = [
  'Hale',
  'Natarajan',
  'Whitfield',
  'Okafor',
  'Brennan',
  'Castillo',
  'Lindqvist',
  'Achebe',
  'Moreau',
  'Sato',
  'Pritchard',
  'Delgado',
  'Kowalski',
  'Ferreira',
  'Ashby',
  'Rinaldi',
  'Osei',
  'Vance',
];
const RACES = [
  {
    title: 'Democratic Presidential Nominee 2028',
    slug: 'democratic-presidential-nominee-2028',
    q: 'win the 2028 Democratic presidential nomination',
    end: '2028-11-07',
  },
  {
    title: 'Republican Presidential Nominee 2028',
    slug: 'republican-presidential-nominee-2028',
    q: 'win the 2028 Republican presidential nomination',
    end: '2028-11-07',
  },
  { title: 'Presidential Election Winner 2028', slug: 'presidential-election-winner-2028', q: 'win the 2028 US Presidential Election', end: '2028-11-07' },
  { title: 'Next UK Prime Minister', slug: 'next-uk-prime-minister', q: 'be the next Prime Minister of the United Kingdom', end: '2029-12-31' },
  { title: 'Next Chair of the Federal Reserve', slug: 'next-fed-chair', q: 'be nominated as the next Fed Chair', end: '2026-12-31' },
];
const TEAMS = [
  'Kansas City Chiefs',
  'Philadelphia Eagles',
  'Buffalo Bills',
  'Baltimore Ravens',
  'Detroit Lions',
  'San Francisco 49ers',
  'Green Bay Packers',
  'Cincinnati Bengals',
  'Dallas Cowboys',
  'Houston Texans',
];
const CLUBS = [
  'Arsenal',
  'Chelsea',
  'Liverpool',
  'Manchester City',
  'Tottenham',
  'Newcastle',
  'Aston Villa',
  'Brighton',
  'Real Madrid',
  'Barcelona',
  'Bayern Munich',
  'Inter Milan',
  'Juventus',
  'PSG',
];
const CITIES = [
  { name: 'New York City', slug: 'nyc', base: 72 },
  { name: 'London', slug: 'london', base: 64 },
  { name: 'Chicago', slug: 'chicago', base: 70 },
];
const CRYPTO = [
  { sym: 'btc', name: 'Bitcoin', price: 112_000, step: 1000 },
  { sym: 'eth', name: 'Ethereum', price: 4_300, step: 50 },
];

const UINT256 = 2n ** 256n;

/**
 * Token id: a uint256 in decimal (the venue's ids are ERC-1155 ids, so they must ABI-encode on chain), drawn as
 * 76–78 random digits, first non-zero, taken modulo 2^256 (most 78-digit numbers exceed it).
 */
export function tokenId(rng: Rng): string {
  const r = rng.float();
  return (BigInt(rng.digits(r < 0.1 ? 76 : r < 0.3 ? 77 : 78)) % UINT256).toString();
}

function logit(p: number): number {
  return Math.log(p / (1 - p));
}

/** US Eastern wall-clock offset (EDT between the 2nd Sunday of March and the 1st Sunday of November). */
function etOffsetHours(ms: number): number {
  const y = new Date(ms).getUTCFullYear();
  const nthSunday = (month: number, n: number): number => {
    const first = new Date(Date.UTC(y, month, 1)).getUTCDay();
    return Date.UTC(y, month, 1 + ((7 - first) % 7) + 7 * (n - 1));
  };
  const dstStart = nthSunday(2, 2) + 7 * 3_600_000; // 2am EST = 07:00 UTC
  const dstEnd = nthSunday(10, 1) + 6 * 3_600_000; // 2am EDT = 06:00 UTC
  return ms >= dstStart && ms < dstEnd ? -4 : -5;
}

const MONTHS = ['January', 'February', 'March', 'April', 'May', 'June', 'July', 'August', 'September', 'October', 'November', 'December'];

function etParts(ms: number): { month: string; day: number; clock: string } {
  const d = new Date(ms + etOffsetHours(ms) * 3_600_000);
  const h = d.getUTCHours();
  const m = d.getUTCMinutes();
  const clock = `${h % 12 === 0 ? 12 : h % 12}:${String(m).padStart(2, '0')}${h < 12 ? 'AM' : 'PM'}`;
  return { month: MONTHS[d.getUTCMonth()]!, day: d.getUTCDate(), clock };
}

function utcMonthDay(ms: number): string {
  const d = new Date(ms);
  return `${MONTHS[d.getUTCMonth()]} ${d.getUTCDate()}`;
}

function slugify(s: string): string {
  return s
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^-|-$/g, '');
}

/** Split n items over k buckets as evenly as possible. */
function spread(n: number, k: number, i: number): number {
  return Math.floor(((i + 1) * n) / k) - Math.floor((i * n) / k);
}

export function buildPlan(o: GenerateOptions): Plan {
  const opts = resolveOptions(o);
  const rng = new Rng(opts.seed, 'plan');
  const startMs = Date.parse(`${opts.start}T00:00:00Z`);
  const endMs = startMs + opts.days * DAY_MS;
  const dayStarts = Array.from({ length: opts.days }, (_, i) => startMs + i * DAY_MS);
  const N = opts.markets;

  const nCrypto = N >= 3 ? Math.round(N * 0.4) : 0;
  const nDaily = N >= 3 ? Math.round(N * 0.2) : 0;
  const nLong = N - nCrypto - nDaily;
  const nPolitics = Math.ceil(nLong * 0.5);
  const nFutures = Math.ceil((nLong - nPolitics) / 2);
  const nMatch = nLong - nPolitics - nFutures;

  const series: PlanSeries[] = [];
  const events: PlanEvent[] = [];
  const markets: PlanMarket[] = [];
  let nextMarketId = 500_000 + rng.int(50_000);
  let nextEventId = 20_000 + rng.int(5_000);
  const addSeries = (ticker: string, title: string, recurrence: string, category: string): number => {
    series.push({
      idx: series.length,
      id: String(10_000 + rng.int(900) + series.length * 1000),
      ticker,
      slug: ticker,
      title,
      recurrence,
      category,
      createdMs: startMs - (200 + rng.int(300)) * DAY_MS,
    });
    return series.length - 1;
  };
  const addEvent = (e: Omit<PlanEvent, 'idx' | 'id' | 'markets' | 'negRiskMarketId'>): PlanEvent => {
    nextEventId += 1 + rng.int(40);
    const ev: PlanEvent = { ...e, idx: events.length, id: String(nextEventId), markets: [], negRiskMarketId: e.negRisk ? `0x${rng.hex(62)}00` : '' };
    events.push(ev);
    return ev;
  };
  const addMarket = (m: Omit<PlanMarket, 'idx' | 'id' | 'conditionId' | 'questionId' | 'tokens'>): PlanMarket => {
    nextMarketId += 1 + rng.int(60);
    const pm: PlanMarket = {
      ...m,
      idx: markets.length,
      id: String(nextMarketId),
      conditionId: `0x${rng.hex(64)}`,
      questionId: `0x${rng.hex(64)}`,
      tokens: [tokenId(rng), tokenId(rng)],
    };
    markets.push(pm);
    events[m.event]!.markets.push(pm.idx);
    return pm;
  };

  /** Random-walk knots in logit space: one per `stepMs` (aligned to `from`), last value forced when resolving. */
  const knots = (from: number, to: number, stepMs: number, x0: number, sdPerStep: number, final: number | null) => {
    const t: number[] = [from];
    const x: number[] = [x0];
    let cur = x0;
    for (let k = Math.floor(from / stepMs) * stepMs + stepMs; k < to; k += stepMs) {
      cur = Math.max(-5.5, Math.min(5.5, cur + rng.normal() * sdPerStep));
      t.push(k);
      x.push(cur);
    }
    t.push(to);
    x.push(final ?? Math.max(-5.5, Math.min(5.5, cur + rng.normal() * sdPerStep)));
    return { knotT: t, knotX: x };
  };

  // Recurring 15-minute crypto Up/Down windows: each day a run of consecutive windows per asset.
  const cryptoSeries = CRYPTO.map((c) => addSeries(`${c.sym}-up-or-down-15m`, `${c.name === 'Bitcoin' ? 'BTC' : 'ETH'} Up or Down 15m`, '15m', 'Crypto'));
  for (let d = 0; d < opts.days; d++) {
    const today = spread(nCrypto, opts.days, d);
    for (let a = 0; a < CRYPTO.length; a++) {
      const n = spread(today, CRYPTO.length, a);
      if (n === 0) continue;
      const c = CRYPTO[a]!;
      const firstSlot = rng.int(96 - Math.min(n, 96) + 1);
      for (let s = 0; s < n; s++) {
        const from = dayStarts[d]! + ((firstSlot + s) % 96) * 900_000;
        const to = from + 900_000;
        const a0 = etParts(from);
        const a1 = etParts(to);
        const title = `${c.name} Up or Down - ${a0.month} ${a0.day}, ${a0.clock}-${a1.clock} ET`;
        const slug = `${c.sym}-updown-15m-${from / 1000}`;
        const desc = `This market will resolve to "Up" if the ${c.name} price at the end of the time range specified in the title is greater than or equal to the price at the beginning of that range. Otherwise, it will resolve to "Down".\nThe resolution source for this market is information from Chainlink, specifically the ${c.sym.toUpperCase()}/USD data stream available at https://data.chain.link/streams/${c.sym}-usd.\nPlease note that this market is about the price according to Chainlink data stream ${c.sym.toUpperCase()}/USD, not according to other sources or spot markets.`;
        const created = from - DAY_MS + rng.int(3_600_000);
        const ev = addEvent({
          ticker: slug,
          slug,
          title,
          description: desc,
          category: 'Crypto',
          negRisk: false,
          series: cryptoSeries[a]!,
          startMs: created,
          endMs: to,
          createdMs: created,
          eventStartMs: from,
        });
        const winner = rng.chance(0.5) ? 0 : 1;
        addMarket({
          kind: 'crypto15m',
          event: ev.idx,
          question: title,
          groupItemTitle: '',
          description: desc,
          category: 'Crypto',
          slug,
          outcomes: ['Up', 'Down'],
          createdMs: created,
          tradeFromMs: from,
          tradeToMs: to,
          endMs: to,
          resolvedInRange: true,
          winner,
          negRisk: false,
          tick: 10,
          tickChangeMs: 0,
          weight: 40,
          busy: false,
          noiseSd: 0.25,
          feeBps: 1000,
          ...knots(from, to, 150_000, rng.normal() * 0.1, 0.35, winner === 0 ? 4.6 : -4.6),
        });
      }
    }
  }

  // Daily markets: Bitcoin above a strike, and a city's high temperature, each live for one day.
  const btcDaily = addSeries('bitcoin-above-daily', 'Bitcoin Above on Date', 'daily', 'Crypto');
  const tempDaily = CITIES.map((c) => addSeries(`${c.slug}-daily-weather`, `${c.name} Daily Weather`, 'daily', 'Weather'));
  for (let d = 0; d < opts.days; d++) {
    const n = spread(nDaily, opts.days, d);
    for (let i = 0; i < n; i++) {
      const day = dayStarts[d]!;
      const from = day + (i === 0 ? 0 : rng.int(6) * 3_600_000);
      const to = day + 20 * 3_600_000; // noon ET: the resolution time of the venue's daily markets
      const md = utcMonthDay(day);
      let question: string;
      let seriesIdx: number;
      let category: string;
      if (i % 2 === 0) {
        const strike = Math.round((112_000 + rng.normal() * 6_000) / 1000) * 1000;
        question = `Will the price of Bitcoin be above $${strike.toLocaleString('en-US')} on ${md}?`;
        seriesIdx = btcDaily;
        category = 'Crypto';
      } else {
        const c = CITIES[rng.int(CITIES.length)]!;
        const deg = c.base + rng.range(-6, 6);
        question = `Will the highest temperature in ${c.name} be ${deg}°F or higher on ${md}?`;
        seriesIdx = tempDaily[CITIES.indexOf(c)]!;
        category = 'Weather';
      }
      const slug = slugify(question);
      const desc = `This market will resolve to "Yes" if the condition in the title is met at ${md}, 12:00 PM ET according to the resolution source. Otherwise, it will resolve to "No".`;
      const created = day - DAY_MS + rng.int(6 * 3_600_000);
      const ev = addEvent({
        ticker: slug,
        slug,
        title: question,
        description: desc,
        category,
        negRisk: false,
        series: seriesIdx,
        startMs: created,
        endMs: to,
        createdMs: created,
        eventStartMs: 0,
      });
      const winner = rng.chance(0.5) ? 0 : 1;
      addMarket({
        kind: 'daily',
        event: ev.idx,
        question,
        groupItemTitle: '',
        description: desc,
        category,
        slug,
        outcomes: ['Yes', 'No'],
        createdMs: created,
        tradeFromMs: from,
        tradeToMs: to,
        endMs: to,
        resolvedInRange: true,
        winner,
        negRisk: false,
        tick: 10,
        tickChangeMs: rng.chance(0.4) ? to - 1_800_000 : 0,
        weight: 1.5,
        busy: false,
        noiseSd: 0.12,
        feeBps: 0,
        ...knots(from, to, 3_600_000, rng.normal() * 0.8, 0.3, winner === 0 ? 4.6 : -4.6),
      });
    }
  }

  // Long-running political markets, grouped into neg-risk events of several candidates.
  const longFrom = (ms: number): number => Math.max(ms, startMs);
  let made = 0;
  let raceNo = 0;
  while (made < nPolitics) {
    const race = RACES[raceNo % RACES.length]!;
    const round = Math.floor(raceNo / RACES.length);
    raceNo++;
    const size = Math.min(nPolitics - made, 2 + rng.int(5));
    const created = startMs - (30 + rng.int(300)) * DAY_MS;
    let end = Date.parse(`${race.end}T00:00:00Z`);
    if (end <= endMs) end = endMs + 365 * DAY_MS;
    const title = round === 0 ? race.title : `${race.title} (${round + 1})`;
    const slug = round === 0 ? race.slug : `${race.slug}-${round + 1}`;
    const desc = `This market will resolve to "Yes" if the named individual is the outcome described in the title. Otherwise, this market will resolve to "No".`;
    const ev = addEvent({
      ticker: slug,
      slug,
      title,
      description: desc,
      category: 'Politics',
      negRisk: true,
      series: -1,
      startMs: created,
      endMs: end,
      createdMs: created,
      eventStartMs: 0,
    });
    for (let i = 0; i < size; i++) {
      const name = `${rng.pick(FIRST_NAMES)} ${rng.pick(LAST_NAMES)}`;
      const question = `Will ${name} ${race.q}?`;
      const p0 = 0.01 + 0.35 * rng.float() ** 2;
      addMarket({
        kind: 'politics',
        event: ev.idx,
        question,
        groupItemTitle: name,
        description: desc,
        category: 'Politics',
        slug: `${slugify(question)}-${rng.int(1000)}`,
        outcomes: ['Yes', 'No'],
        createdMs: created,
        tradeFromMs: longFrom(created),
        tradeToMs: endMs,
        endMs: end,
        resolvedInRange: false,
        winner: -1,
        negRisk: true,
        tick: 1,
        tickChangeMs: 0,
        weight: Math.exp(rng.normal() - 0.5),
        busy: false,
        noiseSd: 0.06,
        feeBps: 0,
        ...knots(startMs, endMs, DAY_MS, logit(p0), 0.12, null),
      });
      made++;
    }
  }

  // Season futures (long-running, single-market events) and matches (a few days, resolved in range).
  for (let i = 0; i < nFutures; i++) {
    const team = TEAMS[i % TEAMS.length]!;
    const year = new Date(endMs).getUTCFullYear() + 1;
    const question = `Will the ${team} win Super Bowl ${year}${i >= TEAMS.length ? ` (${Math.floor(i / TEAMS.length) + 1})` : ''}?`;
    const slug = slugify(question);
    const created = startMs - (20 + rng.int(200)) * DAY_MS;
    const end = Math.max(Date.UTC(year, 1, 8), endMs + 30 * DAY_MS);
    const desc = `This market will resolve to "Yes" if the ${team} win Super Bowl ${year}. Otherwise, this market will resolve to "No".`;
    const ev = addEvent({
      ticker: slug,
      slug,
      title: question,
      description: desc,
      category: 'Sports',
      negRisk: false,
      series: -1,
      startMs: created,
      endMs: end,
      createdMs: created,
      eventStartMs: 0,
    });
    addMarket({
      kind: 'futures',
      event: ev.idx,
      question,
      groupItemTitle: '',
      description: desc,
      category: 'Sports',
      slug,
      outcomes: ['Yes', 'No'],
      createdMs: created,
      tradeFromMs: longFrom(created),
      tradeToMs: endMs,
      endMs: end,
      resolvedInRange: false,
      winner: -1,
      negRisk: false,
      tick: 10,
      tickChangeMs: 0,
      weight: Math.exp(rng.normal() - 0.5),
      busy: false,
      noiseSd: 0.08,
      feeBps: 0,
      ...knots(startMs, endMs, DAY_MS, logit(0.03 + 0.25 * rng.float()), 0.15, null),
    });
  }
  for (let i = 0; i < nMatch; i++) {
    const home = rng.pick(CLUBS);
    let away = rng.pick(CLUBS);
    if (away === home) away = CLUBS[(CLUBS.indexOf(home) + 1) % CLUBS.length]!;
    const lifeDays = Math.min(opts.days, 2 + rng.int(6));
    const from = startMs + rng.int(Math.max(1, opts.days - lifeDays + 1)) * DAY_MS + rng.int(12) * 3_600_000;
    const to = Math.min(endMs, from + lifeDays * DAY_MS - rng.int(6) * 3_600_000);
    const question = `Will ${home} beat ${away} on ${utcMonthDay(to)}?`;
    const slug = `${slugify(question)}-${rng.int(10000)}`;
    const desc = `This market refers to the match between ${home} and ${away}. If ${home} wins, the market will resolve to "Yes". Otherwise, it will resolve to "No".`;
    const ev = addEvent({
      ticker: slug,
      slug,
      title: `${home} vs. ${away}`,
      description: desc,
      category: 'Sports',
      negRisk: false,
      series: -1,
      startMs: from,
      endMs: to,
      createdMs: from,
      eventStartMs: to - 2 * 3_600_000,
    });
    const winner = rng.chance(0.45) ? 0 : 1;
    addMarket({
      kind: 'match',
      event: ev.idx,
      question,
      groupItemTitle: '',
      description: desc,
      category: 'Sports',
      slug,
      outcomes: ['Yes', 'No'],
      createdMs: from,
      tradeFromMs: from,
      tradeToMs: to,
      endMs: to,
      resolvedInRange: true,
      winner,
      negRisk: false,
      tick: 10,
      tickChangeMs: rng.chance(0.5) ? to - 600_000 : 0,
      weight: 2 * Math.exp(rng.normal() * 0.7 - 0.25),
      busy: false,
      noiseSd: 0.1,
      feeBps: 0,
      ...knots(from, to, 6 * 3_600_000, logit(0.3 + 0.4 * rng.float()), 0.25, winner === 0 ? 4.6 : -4.6),
    });
  }

  // Busy markets: the first K long-running ones that span the range (politics first, then futures), weighted so
  // that together they carry roughly 40% of all events.
  const spanning = markets.filter((m) => (m.kind === 'politics' || m.kind === 'futures') && m.tradeFromMs === startMs);
  const busy = spanning.slice(0, Math.min(opts.busy, spanning.length));
  if (busy.length > 0) {
    let weightDays = 0;
    for (const m of markets) if (!busy.includes(m)) weightDays += (m.weight * (m.tradeToMs - m.tradeFromMs)) / DAY_MS;
    const w = (0.7 * weightDays) / (busy.length * opts.days);
    for (const m of busy) {
      m.busy = true;
      m.weight = Math.max(w, 5);
      m.noiseSd *= 1.5;
    }
  }

  const makers = Array.from({ length: 40 }, () => `0x${rng.hex(40)}`);
  const takers = Array.from({ length: 3000 }, () => `0x${rng.hex(40)}`);
  return { opts, startMs, endMs, dayStarts, markets, events, series, makers, takers, baseRatePerHour: 5.8 * opts.rate };
}
