import fs from 'node:fs';
import path from 'node:path';
import { respaced } from './spaced-json.js';

/**
 * Catalogue poll files written exactly per docs/catalogue-format.md, over local Gamma and CLOB records that change
 * between polls, and the point-in-time definitions they must give, computed here in plain TypeScript.
 */
type J = Record<string, unknown>;

export const cid = (n: number): string => `0x${'c'.repeat(56)}${n.toString(16).padStart(8, '0')}`;
export const tok = (n: number, o: number): string => `71${String(n).padStart(6, '0')}${o}${'7'.repeat(68)}`;
export const gid = (n: number): string => String(600000 + n);

/** A market's state in one poll. */
export type MarketState = {
  n: number;
  tick: number;
  active: boolean;
  closed: boolean;
  accepting: boolean;
  negRisk?: boolean;
  /** Index of the winning outcome once resolved. */
  winner?: number;
  end: string;
  tokens?: boolean;
};

export function gammaMarket(s: MarketState): J {
  const prices = s.winner === undefined ? ['0.6', '0.4'] : s.winner === 0 ? ['1', '0'] : ['0', '1'];
  return {
    id: gid(s.n),
    question: `Will thing ${s.n} happen?`,
    conditionId: cid(s.n),
    slug: `thing-${s.n}`,
    endDate: s.end,
    outcomes: JSON.stringify(['Yes', 'No']),
    outcomePrices: JSON.stringify(prices),
    active: s.active,
    closed: s.closed,
    acceptingOrders: s.accepting,
    orderPriceMinTickSize: s.tick,
    orderMinSize: 5,
    ...(s.tokens === false ? {} : { clobTokenIds: JSON.stringify([tok(s.n, 0), tok(s.n, 1)]) }),
    ...(s.negRisk === undefined ? {} : { negRisk: s.negRisk }),
    ...(s.winner === undefined ? {} : { umaResolutionStatus: 'resolved' }),
    updatedAt: '2026-05-01T00:00:00Z',
  };
}

export function clobMarket(s: MarketState): J {
  return {
    condition_id: cid(s.n),
    question_id: `0x${'b'.repeat(64)}`,
    question: `Will thing ${s.n} happen?`,
    market_slug: `thing-${s.n}`,
    end_date_iso: s.end,
    active: s.active,
    closed: s.closed,
    accepting_orders: s.accepting,
    minimum_tick_size: s.tick,
    minimum_order_size: 5,
    neg_risk: s.negRisk ?? false,
    tokens:
      s.tokens === false
        ? []
        : [
            { token_id: tok(s.n, 0), outcome: 'Yes', price: s.winner === 0 ? 1 : 0.6, winner: s.winner === 0 },
            { token_id: tok(s.n, 1), outcome: 'No', price: s.winner === 1 ? 1 : 0.4, winner: s.winner === 1 },
          ],
  };
}

export type Page = { endpoint: 'gamma_markets' | 'gamma_events' | 'clob_markets'; body: string; at: string };
export type PollLine = Page | { error: string; endpoint: string; at: string } | { raw: string };

/** The lines of one poll file: header, pages in order, `end` unless torn; `spaced`: every line spaced (test/helpers/spaced-json.ts). */
export function pollText(start: string, lines: PollLine[], opts: { end?: boolean; spaced?: boolean } = {}): string {
  const out = [
    JSON.stringify({
      kind: 'catalogue_poll',
      format: 1,
      poller: 'test',
      started_at: start,
      endpoints: { gamma_markets: 'http://gamma.test/markets', gamma_events: 'http://gamma.test/events', clob_markets: 'http://clob.test/markets' },
    }),
  ];
  let pages = 0;
  for (const l of lines) {
    if ('raw' in l) out.push(l.raw);
    else if ('error' in l) {
      out.push(JSON.stringify({ kind: 'error', endpoint: l.endpoint, url: 'http://x.test', received_at: l.at, status: 502, message: l.error }));
    } else {
      pages += 1;
      out.push(JSON.stringify({ kind: 'page', endpoint: l.endpoint, url: `http://x.test/${l.endpoint}`, received_at: l.at, status: 200, body: l.body }));
    }
  }
  if (opts.end !== false) {
    out.push(JSON.stringify({ kind: 'end', finished_at: start, complete: { gamma_markets: true, gamma_events: true, clob_markets: true }, pages }));
  }
  const text = out.join('\n') + '\n';
  return opts.spaced ? respaced(text) : text;
}

export function writePoll(dir: string, start: string, lines: PollLine[], opts: { end?: boolean; spaced?: boolean } = {}): string {
  const stamp = start.replace(/[-:]/g, '').replace(/\.\d+/, '').replace('Z', '');
  const file = path.join(dir, `catalogue-${stamp}Z-test.jsonl`);
  fs.mkdirSync(dir, { recursive: true });
  fs.writeFileSync(file, pollText(start, lines, opts));
  return file;
}

// ---- the oracle ---------------------------------------------------------------------------------------------

export type Definition = {
  condition_id: string;
  source: 'gamma' | 'clob';
  valid_from: string;
  market_id: string | null;
  question: string | null;
  slug: string | null;
  outcomes: string[] | null;
  tick_size: number | null;
  min_order_size: number | null;
  active: boolean | null;
  closed: boolean | null;
  accepting_orders: boolean | null;
  neg_risk: boolean | null;
  end_date: string | null;
  resolved: boolean;
  winning_outcome: number | null;
  outcome_token_ids: string[] | null;
};

const iso = (s: string): string => new Date(s).toISOString();

/** What one record says, by the rules of docs/catalogue-format.md, read from the record itself. */
function observe(endpoint: Page['endpoint'], rec: J, event: J | null, at: string): Definition | null {
  if (endpoint === 'clob_markets') {
    const tokens = (rec.tokens as J[]) ?? [];
    const win = tokens.findIndex((t) => t.winner === true);
    const ids = tokens.map((t) => String(t.token_id));
    return {
      condition_id: String(rec.condition_id),
      source: 'clob',
      valid_from: iso(at),
      market_id: null,
      question: rec.question as string,
      slug: rec.market_slug as string,
      outcomes: tokens.length > 0 ? tokens.map((t) => String(t.outcome)) : null,
      tick_size: rec.minimum_tick_size as number,
      min_order_size: rec.minimum_order_size as number,
      active: rec.active as boolean,
      closed: rec.closed as boolean,
      accepting_orders: rec.accepting_orders as boolean,
      neg_risk: rec.neg_risk as boolean,
      end_date: iso(rec.end_date_iso as string),
      resolved: win >= 0,
      winning_outcome: win >= 0 ? win : null,
      outcome_token_ids: ids.length > 0 && !ids.includes('') ? ids : null,
    };
  }
  const prices = (JSON.parse(rec.outcomePrices as string) as string[]).map(Number);
  const max = Math.max(...prices);
  const resolved = rec.umaResolutionStatus === 'resolved' || (rec.closed === true && max >= 0.99);
  const ids = rec.clobTokenIds === undefined ? null : (JSON.parse(rec.clobTokenIds as string) as string[]);
  return {
    condition_id: String(rec.conditionId),
    source: 'gamma',
    valid_from: iso(at),
    market_id: String(rec.id),
    question: rec.question as string,
    slug: rec.slug as string,
    outcomes: JSON.parse(rec.outcomes as string) as string[],
    tick_size: rec.orderPriceMinTickSize as number,
    min_order_size: rec.orderMinSize as number,
    active: rec.active as boolean,
    closed: rec.closed as boolean,
    accepting_orders: rec.acceptingOrders as boolean,
    neg_risk: (rec.negRisk as boolean | undefined) ?? (event?.negRisk as boolean | undefined) ?? null,
    end_date: iso(rec.endDate as string),
    resolved,
    winning_outcome: resolved && max >= 0.99 ? prices.indexOf(max) : null,
    outcome_token_ids: ids && ids.length > 0 ? ids : null,
  };
}

/** A poll's observations: per (condition id, source) the last copy in the file; tokenless markets dropped. */
export function pollObservations(lines: PollLine[]): Definition[] {
  const last = new Map<string, Definition>();
  for (const l of lines) {
    if (!('body' in l)) continue;
    let body: unknown;
    try {
      body = JSON.parse(l.body);
    } catch {
      continue;
    }
    const recs: { rec: J; event: J | null }[] = [];
    // Pages as docs/catalogue-format.md has them: Gamma keyset envelopes {markets} / {events}, CLOB {data}.
    if (l.endpoint === 'clob_markets') for (const r of (body as { data: J[] }).data) recs.push({ rec: r, event: null });
    else if (l.endpoint === 'gamma_events') {
      for (const e of (body as { events: J[] }).events) for (const m of e.markets as J[]) recs.push({ rec: m, event: e });
    } else for (const m of (body as { markets: J[] }).markets) recs.push({ rec: m, event: null });
    for (const { rec, event } of recs) {
      const d = observe(l.endpoint, rec, event, l.at);
      if (d) last.set(`${d.condition_id}|${d.source}`, d);
    }
  }
  return [...last.values()].filter((d) => d.outcome_token_ids !== null);
}

const body = (d: Definition): string => JSON.stringify({ ...d, valid_from: undefined });

/** The rows market_definitions must hold after these polls (in time order): each observation that changes something. */
export function expectedDefinitions(polls: PollLine[][]): Definition[] {
  const inForce = new Map<string, Definition>();
  const out: Definition[] = [];
  for (const p of polls) {
    for (const d of pollObservations(p)) {
      const k = `${d.condition_id}|${d.source}`;
      const prev = inForce.get(k);
      if (prev && body(prev) === body(d)) continue;
      inForce.set(k, d);
      out.push(d);
    }
  }
  return out.sort((a, b) => a.condition_id.localeCompare(b.condition_id) || a.source.localeCompare(b.source) || a.valid_from.localeCompare(b.valid_from));
}

// ---- the scenario: three polls --------------------------------------------------------------------------------

const END = '2026-06-30T00:00:00Z';
/** M1: tick 0.01 → 0.001 at poll 2. M2: resolved (No) at poll 3. M3: inserted mid-paging in poll 2. M4: repeated on two pages. M5: no tokens. M6: neg-risk by its event. */
function states(poll: number): MarketState[] {
  return [
    { n: 1, tick: poll >= 2 ? 0.001 : 0.01, active: true, closed: false, accepting: true, end: END },
    poll >= 3
      ? { n: 2, tick: 0.01, active: true, closed: true, accepting: false, winner: 1, end: END }
      : { n: 2, tick: 0.01, active: true, closed: false, accepting: true, end: END },
    { n: 3, tick: 0.01, active: true, closed: false, accepting: true, end: END },
    { n: 4, tick: 0.01, active: true, closed: false, accepting: true, end: END },
    { n: 5, tick: 0.01, active: true, closed: false, accepting: true, end: END, tokens: false },
  ];
}

export const POLL_STARTS = ['2026-05-01T10:00:00Z', '2026-05-01T10:05:00Z', '2026-06-01T00:00:00Z'];

/** The pages of poll `i` (0-based): Gamma markets in keyset pages of two (M4 repeated), an /events page, CLOB pages. */
export function scenarioPoll(i: number): PollLine[] {
  const poll = i + 1;
  const base = Date.parse(POLL_STARTS[i]!);
  const at = (s: number) => new Date(base + s * 1000).toISOString();
  const st = states(poll);
  const [m1, m2, m3, m4, m5] = st.map(gammaMarket) as [J, J, J, J, J];
  const c = st.map(clobMarket);
  // Poll 1 has no M3; in poll 2 it is created while paging and shows up on the last page only.
  const gammaPages: J[][] =
    poll === 1
      ? [[m1, m4], [m4, m2], [m5]]
      : poll === 2
        ? [
            [m1, m4],
            [m4, m2],
            [m5, m3],
          ]
        : [[m1, m2], [m3, m4], [m5]];
  const event = {
    id: '9001',
    ticker: 'grp',
    slug: 'grp',
    title: 'Group',
    negRisk: true,
    markets: [{ ...gammaMarket({ n: 6, tick: 0.001, active: true, closed: false, accepting: poll < 3, end: END }) }],
  };
  const lines: PollLine[] = [];
  // Gamma keyset pages: {markets|events, next_cursor}, the last one without next_cursor.
  gammaPages.forEach((p, k) => lines.push({ endpoint: 'gamma_markets', body: JSON.stringify({ markets: p, next_cursor: `c${k}` }), at: at(k) }));
  lines.push({ endpoint: 'gamma_markets', body: JSON.stringify({ markets: [] }), at: at(3) });
  lines.push({ endpoint: 'gamma_events', body: JSON.stringify({ events: [event], next_cursor: 'e0' }), at: at(4) });
  lines.push({ endpoint: 'gamma_events', body: JSON.stringify({ events: [] }), at: at(5) });
  const clob = poll === 1 ? [c[0], c[1], c[3], c[4]] : [c[0], c[1], c[2], c[3], c[4]];
  lines.push({ endpoint: 'clob_markets', body: JSON.stringify({ data: clob.slice(0, 2), next_cursor: 'MjA=', limit: 2, count: 2 }), at: at(6) });
  lines.push({ endpoint: 'clob_markets', body: JSON.stringify({ data: clob.slice(2), next_cursor: 'LTE=', limit: 2, count: clob.length - 2 }), at: at(7) });
  return lines;
}
