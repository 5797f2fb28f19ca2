import { buildPlan, tokenId } from '../generate/plan.js';
import { PRICE_STR } from '../generate/format.js';
import type { Rng } from '../generate/prng.js';

/** A market the simulated venue trades: two outcome tokens (Yes, No) and its price grid. */
export type SimMarket = {
  conditionId: string;
  tokens: [string, string];
  tick: string;
  question?: string;
  slug?: string;
  /** The venue's numeric market id (Gamma's `id`), when the generator planned one. */
  id?: string;
  /**
   * What the simulated catalogue says of the market's event when the market comes from a lake (the demo): its id,
   * series and category, so a polled record does not drop what the lake's catalogue already knew.
   */
  eventId?: string;
  seriesSlug?: string;
  category?: string;
};

/**
 * `n` markets as the generator plans them for `seed` (its questions, slugs, ticks, 76–78-digit token ids and
 * 0x+64-hex condition ids), so a generated history and a live simulation of one seed name the same markets.
 */
export function syntheticMarkets(n: number, seed: number): SimMarket[] {
  if (n <= 0) return [];
  const plan = buildPlan({ markets: n, days: 1, seed, out: '' });
  return plan.markets.map((m) => ({
    conditionId: m.conditionId,
    tokens: [m.tokens[0], m.tokens[1]],
    tick: PRICE_STR[m.tick]!,
    question: m.question,
    slug: m.slug,
    id: m.id,
  }));
}

const TOPICS = ['Will the Fed cut rates in', 'Will Bitcoin reach a new high in', 'Will it snow in London in', 'Will the home team win in'];
const MONTHS = ['January', 'February', 'March', 'April', 'May', 'June', 'July', 'August', 'September', 'October', 'November', 'December'];

/** A market created while the venue runs (`addMarket`): fields not given are drawn like the generator draws them. */
export function newSimMarket(rng: Rng, given: Partial<SimMarket> = {}): SimMarket {
  const question = given.question ?? `${rng.pick(TOPICS)} ${rng.pick(MONTHS)} ${2027 + rng.int(3)} (${rng.hex(6)})?`;
  const slug =
    given.slug ??
    question
      .toLowerCase()
      .replace(/[^a-z0-9]+/g, '-')
      .replace(/^-|-$/g, '');
  return {
    conditionId: given.conditionId ?? `0x${rng.hex(64)}`,
    tokens: given.tokens ?? [tokenId(rng), tokenId(rng)],
    tick: given.tick ?? (rng.chance(0.2) ? '0.001' : '0.01'),
    question,
    slug,
  };
}
