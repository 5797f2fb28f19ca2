import { z } from 'zod';
import type { Json, Row } from '../../lake/values.js';

/** The Market object of /v1/markets and /v1/markets/{id}: its schema and how a catalogue row becomes one. */

/** ISO 8601 text in UTC, typed as a date-time for generated clients (as the anchor types its timestamps); null when unknown. */
const dt = z.string().meta({ format: 'date-time' }).nullable();

export const MARKET_STATUS = ['active', 'resolved', 'paused'] as const;
export type MarketStatus = (typeof MARKET_STATUS)[number];

/**
 * The legacy `status` string, derived from the boolean flags (the spec lists the values, not the rule):
 * resolved wins; a market that is closed but not yet resolved, or flagged not active, is 'paused' (no
 * trading, no outcome yet); everything else is 'active'.
 */
export function marketStatus(flags: { active: boolean; closed: boolean; resolved: boolean }): MarketStatus {
  if (flags.resolved) return 'resolved';
  if (flags.closed || !flags.active) return 'paused';
  return 'active';
}

export const MarketResponse = z
  .object({
    id: z.string().describe('Numeric market id (markets.id): what requests take as market_id'),
    event_id: z.string().describe('Empty when no metadata names the event'),
    question: z
      .string()
      .describe('For a market known only from the order-book tape or from fills (no metadata yet): "Unknown market <condition id or token id>"'),
    description: z.string(),
    outcomes: z.array(z.string()).meta({
      default: ['Yes', 'No'],
      description: 'Parallel to outcome_token_ids. Without metadata: ["Yes","No"] for two tokens, else "Outcome <index>" per token',
    }),
    outcome_prices: z.array(z.number()).describe('Parallel to outcomes; 0 where the venue published no price (a placeholder market: all 0)'),
    outcome_token_ids: z
      .array(z.string())
      .describe('Outcome token ids, parallel to outcomes; trade and candle rows carry these in market_id; [] when no token id is known'),
    // The anchor's defaults, stated as it states them: pmlake always sends these fields, so they never apply.
    active: z.boolean().meta({ default: true }),
    closed: z.boolean().meta({ default: false }),
    resolved: z.boolean().meta({ default: false }),
    status: z
      .enum(MARKET_STATUS)
      .describe('Legacy field derived from the flags: resolved if resolved; paused if closed but unresolved, or not active; else active'),
    winning_outcome: z.number().int().nullable(),
    resolution_date: dt,
    volume: z.number().describe('USD as published; 0 when the venue published none'),
    volume_24h: z.number(),
    liquidity: z.number(),
    start_date: dt,
    end_date: dt,
    trade_count: z.number().int().meta({ default: 0 }),
    orderbook_count: z.number().int().meta({ default: 0 }),
    data_from: dt,
    data_to: dt,
    category: z.string().describe('Empty when no source names one'),
    condition_id: z.string().nullable().describe('The 0x condition id; order-book rows carry it in market_id. Not accepted in requests.'),
    series_id: z.string().nullable(),
    // Only in an answer with as_of (GET /v1/markets/{market_id}?as_of=): the definition in force then.
    tick_size: z.number().nullable().optional().describe('With as_of: the minimum price increment in force then'),
    min_order_size: z.number().nullable().optional().describe('With as_of: the minimum order size in force then'),
    neg_risk: z.boolean().nullable().optional().describe('With as_of: whether the market was neg-risk then'),
    accepting_orders: z.boolean().nullable().optional().describe('With as_of: whether the venue accepted orders then'),
    as_of: dt.optional().describe('With as_of: the instant asked for'),
    definition_valid_from: dt.optional().describe('With as_of: when the definition served came into force (the latest recorded change at or before as_of)'),
  })
  .meta({ id: 'MarketResponse' });

/**
 * A catalogue row's Market object as JSON text, built once per row object: the list's rows are held per lake
 * version (src/markets/catalogue.ts), so a page is the concatenation of texts built before — stringifying them
 * per request was most of a list's cost under load. A new version's rows are new objects, new entries.
 */
const marketTexts = new WeakMap<Row, string>();

export function marketJson(m: Row): string {
  let text = marketTexts.get(m);
  if (text === undefined) marketTexts.set(m, (text = JSON.stringify(marketOut(m))));
  return text;
}

/**
 * Outcome labels. A market seen only on the tape or in fills has tokens but no metadata (NULL outcomes),
 * and its token order is ingest's sort order, not the venue's. Labels stay parallel to outcome_token_ids:
 * the anchor's default ["Yes","No"] only for exactly two tokens, else one "Outcome <index>" per token
 * (the index requests take as `outcome`), and [] when no token is known.
 */
function outcomesOf(m: Row, tokens: Json[] | null): string[] {
  if (Array.isArray(m.outcomes) && m.outcomes.length > 0) return m.outcomes as string[];
  if (!tokens || tokens.length === 0) return [];
  if (tokens.length === 2) return ['Yes', 'No'];
  return tokens.map((_, i) => `Outcome ${i}`);
}

/** Published prices parallel to the outcomes; 0 for an outcome without one (a placeholder has none at all). */
function pricesOf(m: Row, outcomes: readonly string[]): number[] {
  const p = Array.isArray(m.outcome_prices) ? (m.outcome_prices as Json[]) : [];
  return outcomes.map((_, i) => (typeof p[i] === 'number' && Number.isFinite(p[i]) ? (p[i] as number) : 0));
}

const num = (v: Json | undefined): number => (typeof v === 'number' && Number.isFinite(v) ? v : 0);
const text = (v: Json | undefined): string => (typeof v === 'string' ? v : '');

/**
 * The Market object: every seed field present with the seed's type — never null where the spec gives a type.
 * A placeholder (a token seen on the tape or in fills before any metadata) has only what the lake knows: its
 * tokens, counts and data span; the rest takes the type's empty value (lake/README.md says what each means).
 * Dates and winning_outcome stay null while unknown: the anchor types them nullable, and a made-up date would be
 * a false one.
 */
export function marketOut(m: Row): Row {
  const tokens = Array.isArray(m.outcome_token_ids) && m.outcome_token_ids.length > 0 ? (m.outcome_token_ids as Json[]) : null;
  const outcomes = outcomesOf(m, tokens);
  const active = (m.active as boolean | null) ?? true;
  const closed = (m.closed as boolean | null) ?? false;
  const resolved = (m.resolved as boolean | null) ?? false;
  // Placeholders (tape- or fills-only markets) have no question yet: name them by what identifies them.
  const question = typeof m.question === 'string' ? m.question : `Unknown market ${String(m.condition_id ?? tokens?.[0] ?? m.id)}`;
  return {
    id: String(m.id),
    event_id: text(m.event_id),
    question,
    description: text(m.description),
    outcomes,
    outcome_prices: pricesOf(m, outcomes),
    outcome_token_ids: tokens ?? [],
    active,
    closed,
    resolved,
    status: marketStatus({ active, closed, resolved }),
    winning_outcome: m.winning_outcome ?? null,
    resolution_date: m.resolution_date ?? null,
    volume: num(m.volume),
    volume_24h: num(m.volume_24h),
    liquidity: num(m.liquidity),
    start_date: m.start_date ?? null,
    end_date: m.end_date ?? null,
    trade_count: m.trade_count ?? 0,
    orderbook_count: m.orderbook_count ?? 0,
    data_from: m.data_from ?? null,
    data_to: m.data_to ?? null,
    category: text(m.category),
    condition_id: m.condition_id ?? null,
    series_id: m.series_id ?? null,
  };
}

/**
 * The Market object as it stood at an instant: the current object with the point-in-time fields taken from the
 * definition in force then (src/markets/definitions.ts), and the flags' status derived from those. Fields the
 * definitions do not record (volume, prices, counts, data span) are the current ones.
 */
export function marketAtOut(m: Row, def: { fields: Record<string, Json>; validFrom: string }, asOf: string): Row {
  const f = def.fields;
  const now = marketOut(m);
  const closed = typeof f.closed === 'boolean' ? f.closed : false;
  const active = typeof f.active === 'boolean' ? f.active : !closed;
  const resolved = f.resolved === true;
  return {
    ...now,
    active,
    closed,
    resolved,
    status: marketStatus({ active, closed, resolved }),
    winning_outcome: resolved ? (f.winning_outcome ?? null) : null,
    // A resolution date only for a market resolved at that instant.
    resolution_date: resolved ? (now.resolution_date ?? null) : null,
    end_date: f.end_date ?? null,
    tick_size: f.tick_size ?? null,
    min_order_size: f.min_order_size ?? null,
    neg_risk: f.neg_risk ?? null,
    accepting_orders: f.accepting_orders ?? null,
    as_of: asOf,
    definition_valid_from: def.validFrom,
  };
}
