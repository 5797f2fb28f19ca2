import { z } from 'zod';
import { parseTimeframe, type Timeframe } from '../timeframe.js';
import { CONDITION_ID_MESSAGE } from '../markets/resolver.js';
import { isoFromMicros } from '../lake/values.js';
import { MAX_ISO_MICROS, MIN_ISO_MICROS, parseIsoMicros } from '../iso-time.js';

export { parseIsoMicros };

/**
 * zod pieces shared by the query endpoints. Query strings arrive as text: booleans as 'true'/'false',
 * numbers as digits, dates as ISO 8601. Each piece turns text into a checked value or a 422 naming it.
 */

/** 'true'/'false' (also 1/0 and any case: Python's str(True) sends 'True'). */
export const queryBool = z
  .enum(['true', 'false', 'True', 'False', 'TRUE', 'FALSE', '1', '0'])
  .transform((v) => v.toLowerCase() === 'true' || v === '1')
  .meta({ type: 'boolean' });

/** An integer query parameter with bounds and a default (query strings carry digits as text). */
export function queryInt(opts: { min: number; max: number; default: number; description?: string }) {
  const s = z.coerce.number().int().min(opts.min).max(opts.max).default(opts.default);
  return opts.description ? s.describe(opts.description) : s;
}

/**
 * An ISO 8601 date or datetime as query text: an unencoded '+' arrives as a space ("…T12:00:00 00:00" is "+00:00").
 * Null also when its offset carries it out of years 0000–9999 UTC (0000-01-01T00:00+01:00 is in year -1): every
 * instant the API takes is one it can write back and cut into day and month partitions.
 */
function queryIsoMicros(v: string): bigint | null {
  const us = parseIsoMicros(v.trim().replace(/(T\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?) (\d{2}:?\d{2})$/, '$1+$2'));
  return us !== null && us >= MIN_ISO_MICROS && us <= MAX_ISO_MICROS ? us : null;
}

export const isoDateTime = z
  .string()
  .max(64)
  .transform((v, ctx) => {
    const micros = queryIsoMicros(v);
    if (micros === null) {
      ctx.addIssue({ code: 'custom', message: 'Input should be a valid ISO 8601 date or datetime, e.g. 2025-03-01 or 2025-03-01T12:00:00Z' });
      return z.NEVER;
    }
    return micros;
  })
  .meta({ type: 'string', format: 'date-time' });

/** Epoch seconds (up to 11 digits, an optional fraction) or milliseconds (12 digits or more) → µs; null past year 9999. */
function epochMicros(v: string): bigint | null {
  const m = /^(\d{1,15})(?:\.(\d{1,6}))?$/.exec(v);
  if (!m) return null;
  const whole = BigInt(m[1]!);
  const frac = BigInt((m[2] ?? '').padEnd(6, '0'));
  const us = m[1]!.length <= 11 ? whole * 1_000_000n + frac : m[2] === undefined ? whole * 1000n : null;
  return us !== null && us <= MAX_ISO_MICROS ? us : null;
}

/** An instant as ISO 8601 (as isoDateTime) or as epoch seconds / milliseconds (digits). */
export const instantParam = z
  .string()
  .max(64)
  .transform((v, ctx) => {
    const t = v.trim();
    const micros = /^\d/.test(t) && !t.includes('-') ? epochMicros(t) : queryIsoMicros(t);
    if (micros === null) {
      ctx.addIssue({
        code: 'custom',
        message: 'Input should be an ISO 8601 date or datetime (2025-03-01T12:00:00Z) or epoch seconds (1740830400) or milliseconds (1740830400000)',
      });
      return z.NEVER;
    }
    return micros;
  })
  .meta({
    anyOf: [
      { type: 'string', format: 'date-time' },
      { type: 'string', pattern: '^[0-9]{1,15}(\\.[0-9]{1,6})?$' },
    ],
  });

export const timeframeParam = z
  .string()
  .max(16)
  .transform((v, ctx): Timeframe => {
    const r = parseTimeframe(v);
    if (!r.ok) {
      ctx.addIssue({ code: 'custom', message: r.message });
      return z.NEVER;
    }
    return r.value;
  })
  .meta({ type: 'string', pattern: '^[1-9][0-9]*[smhdw]$', examples: ['30s', '1m', '7m', '1h', '4h', '1d', '1w'] });

export const marketIdParam = z
  .string()
  .min(1)
  .max(200)
  .refine((v) => !/^0x[0-9a-fA-F]*$/.test(v), { message: CONDITION_ID_MESSAGE })
  .describe('Numeric market id (markets.id), or one outcome token id (narrows to that outcome)');

/** The path of /v1/markets/{market_id} and its sub-resources. */
export const MarketPath = z.object({ market_id: marketIdParam });

/** start before end, otherwise a 422 naming `start`. */
export function checkWindow<T extends { start?: bigint | undefined; end?: bigint | undefined }>(
  v: T,
  ctx: z.RefinementCtx,
  names: [string, string] = ['start', 'end'],
): void {
  if (v.start !== undefined && v.end !== undefined && v.start > v.end) {
    ctx.addIssue({ code: 'custom', path: [names[0]], message: `${names[0]} must not be after ${names[1]}`, input: undefined });
  }
}

/** Far above any market's outcome count: bounds the parameter before any lookup. */
export const MAX_OUTCOME = 1000;

/**
 * An outcome index (0 = the first, e.g. Yes/Up), the same rule on every endpoint: any outcome the market has. A
 * market may list more than two (the catalogue keeps every outcome it lists), so the bound here is only a sanity
 * bound; the market's own count is checked where it is resolved (selectTokens: an outcome it lacks is a 422
 * naming `outcome`, as a bound would be).
 */
export const outcomeParam = z.coerce.number().int().min(0).max(MAX_OUTCOME);

/**
 * A UTC day as `YYYY-MM-DD` text. Taken as a day (`2025-03-01`) or as any date-time the other endpoints take,
 * which names the UTC day it falls in (`2025-03-02T00:00:00Z` → 2025-03-02, `2025-03-02T01:00:00+02:00` →
 * 2025-03-01); an impossible day such as 2025-02-30 is refused.
 */
export const isoDay = z
  .string()
  .max(64)
  .transform((v, ctx) => {
    const micros = queryIsoMicros(v);
    if (micros === null) {
      ctx.addIssue({ code: 'custom', message: 'Input should be a UTC day (2025-03-01) or an ISO 8601 datetime (2025-03-01T12:00:00Z, its UTC day)' });
      return z.NEVER;
    }
    return isoFromMicros(micros).slice(0, 10);
  })
  .meta({
    anyOf: [
      { type: 'string', format: 'date' },
      { type: 'string', format: 'date-time' },
    ],
  });
