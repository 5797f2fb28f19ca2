import { z } from 'zod';
import type { RequestContext } from '../context.js';
import { NotFound } from '../../errors.js';
import { CONDITION_ID_MESSAGE, selectTokens, type ResolvedMarket, type TokenRef } from '../../markets/resolver.js';
import { timeframeOf, MAX_TIMEFRAME_SECONDS, type Timeframe } from '../../timeframe.js';

/**
 * Chart symbols and UDF resolutions, shared by the UDF and replay routes.
 *
 * Symbol: `<market_id>` (outcome 0) or `<market_id>.<outcome>`, or an outcome token id. The anchor documents
 * `0xabc` / `0xabc.1` (condition ids); the spec refuses hex condition ids in every request, and the spec wins:
 * a 0x symbol is a 422 naming `symbol`, with the resolver's message saying which id to send. Search hands out symbols
 * in pmlake's form, so a UDF client that starts from search never meets the difference.
 */
export const symbolParam = z
  .string()
  .min(1)
  .max(120)
  .refine((v) => !/^0x[0-9a-fA-F]*(\.[0-9]+)?$/.test(v.trim()), { message: CONDITION_ID_MESSAGE })
  .describe('Chart symbol: a numeric market id, optionally with .<outcome> (e.g. 546814 or 546814.1), or an outcome token id');

export type ChartSymbol = { symbol: string; resolved: ResolvedMarket; token: TokenRef };

const SYMBOL = /^([0-9]+)(?:\.([0-9]{1,3}))?$/;

export async function resolveSymbol(ctx: RequestContext, symbol: string): Promise<ChartSymbol> {
  const m = SYMBOL.exec(symbol.trim());
  // Anything else, 0x included, goes to the resolver as written: it refuses 0x with the spec's message.
  const resolved = await ctx.markets.resolve(ctx.lake, m ? m[1]! : symbol.trim());
  const outcome = m?.[2] !== undefined ? Number(m[2]) : 0;
  // A token id already names its outcome (a suffix is then ignored, as /v1/trades/ohlcv ignores `outcome`).
  const [token] = selectTokens(resolved, outcome);
  if (!token) throw new NotFound('Market has no outcome tokens');
  return { symbol: symbolOf(String(resolved.market.id), token.outcome_index), resolved, token };
}

/** The canonical symbol of a market outcome: the bare id for outcome 0, `id.N` otherwise. */
export function symbolOf(marketId: string, outcome: number): string {
  return outcome === 0 ? marketId : `${marketId}.${outcome}`;
}

/**
 * UDF resolutions: `N` minutes, `NS` seconds, `ND`/`D` days, `NW`/`W` weeks. Months (`M`) are not a fixed
 * number of seconds and pmlake does not bucket them. Any whole multiple the timeframe parser allows works
 * (1s … 4w), not only the ones config lists.
 */
export function parseResolution(text: string): Timeframe | null {
  const m = /^([1-9][0-9]{0,6})?([SDW]?)$/i.exec(text.trim());
  if (!m || (m[1] === undefined && m[2] === '')) return null;
  const n = m[1] === undefined ? 1 : Number(m[1]);
  const unit = { '': 60, S: 1, D: 86_400, W: 604_800 }[m[2]!.toUpperCase()]!;
  const seconds = n * unit;
  if (seconds < 1 || seconds > MAX_TIMEFRAME_SECONDS) return null;
  return timeframeOf(seconds);
}

/** What config and symbol info advertise: every one is served natively (no client-side building of bars). */
export const SUPPORTED_RESOLUTIONS = ['1', '3', '5', '15', '30', '60', '120', '240', '360', '720', '1D', '2D', '3D', '1W', '2W', '4W'];
export const INTRADAY_MULTIPLIERS = ['1', '3', '5', '15', '30', '60', '120', '240', '360', '720'];
