import type { LakeSession } from '../lake/session.js';
import { StampedCache } from '../lake/stamp.js';
import { seriesIdsQuery } from '../query/series.js';
import type { VenueSeriesKind } from '../catalogue/kinds.js';

/**
 * Series ids in the anchor's form. The anchor names a series `<venue>:<name>` (`polymarket:btc-15m`,
 * `deribit:btc-options`, `polymarket:l2-delta-tape`); pmlake's market series are stored under the venue's own
 * slugs (`btc-up-or-down-15m`). Every edge that takes a series id (GET /v1/series/{id}, its estimate,
 * GET /v1/markets?series_id=, downloads, bulk items, exports) resolves it here, so both spellings name the same
 * stored series and give the same answer. Options and raw-tape series have only the anchor's form.
 */

/** Recurring crypto series in the anchor's short form: `<asset>-<timeframe>` (btc-15m, eth-1h, sol-daily). */
const SHORT_RECURRING = /^([a-z0-9]+)-([0-9]+[mhd]|hourly|daily|weekly)$/;

/** The stored slugs an id may name, most literal first: the id as given, without `polymarket:`, and the long slug. */
export function seriesIdCandidates(id: string): string[] {
  const out = [id];
  if (id.startsWith('polymarket:')) {
    const rest = id.slice('polymarket:'.length);
    out.push(rest);
    const m = SHORT_RECURRING.exec(rest);
    if (m) out.push(`${m[1]}-up-or-down-${m[2]}`);
  }
  return out;
}

/** The first candidate `known` holds, or null. */
export function pickSeriesId(id: string, known: (slug: string) => boolean): string | null {
  return seriesIdCandidates(id).find(known) ?? null;
}

const stored = new StampedCache<Set<string>>({ maxEntries: 16 });

/** The stored market series an id (either form) names in the session's lake version, or null when none. */
export async function resolveSeriesId(lake: LakeSession, id: string): Promise<string | null> {
  const got = await stored.get(lake, 'series-ids', async () => {
    const rows = await lake.rows(seriesIdsQuery(lake.sources));
    return new Set(rows.map((r) => String(r.series_id)));
  });
  return pickSeriesId(id, (s) => got.value.has(s));
}

/**
 * The anchor's whole-venue catalogue series (its GET /v1/download/series description: "single-bucket-catalog
 * series … each parquet already contains every market for that day"). Each takes one data type. pmlake serves
 * the ones its lake can build across every market (candles from the 1-minute candles, trades from the trade
 * files); the anchor's prices-history and market-stats buckets have no data set here, so they are named with
 * what to use instead rather than answered as unknown.
 */
export type CatalogueSeries = {
  id: string;
  name: string;
  description: string;
  /** The one data type the series takes. */
  dataType: VenueSeriesKind;
  /** Candle seconds for an ohlcv series. */
  timeframeSeconds?: number;
  /** Set when pmlake does not serve the series: what it offers instead. */
  insteadOf?: string;
};

export const CATALOGUE_SERIES: readonly CatalogueSeries[] = [
  { id: 'polymarket:trades-recent', name: 'All trades', description: 'Every trade of every market', dataType: 'trades' },
  {
    id: 'polymarket:prices-history',
    name: 'Prices history',
    description: 'Not offered: pmlake holds no separate price-history data set',
    dataType: 'ohlcv',
    insteadOf: 'use polymarket:ohlcv-1h or polymarket:ohlcv-1d (candles of every market), or GET /v1/trades/ohlcv for one market',
  },
  {
    id: 'polymarket:market-stats',
    name: 'Market stats',
    description: 'Not offered: pmlake holds no market-stats data set',
    dataType: 'trades',
    insteadOf: 'use GET /v1/markets/{market_id}/stats for one market, or GET /v1/markets for the catalogue with its counts',
  },
  { id: 'polymarket:ohlcv-1h', name: 'Hourly candles', description: '1h OHLCV candles of every market', dataType: 'ohlcv', timeframeSeconds: 3600 },
  { id: 'polymarket:ohlcv-1d', name: 'Daily candles', description: '1d OHLCV candles of every market', dataType: 'ohlcv', timeframeSeconds: 86400 },
];

/** The catalogue series an id names, or null. */
export function catalogueSeries(id: string): CatalogueSeries | null {
  return CATALOGUE_SERIES.find((s) => s.id === id) ?? null;
}
