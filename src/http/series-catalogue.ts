import type { RequestContext } from './context.js';
import { StampedCache } from '../lake/stamp.js';
import { NotFound } from '../errors.js';
import type { Row } from '../lake/values.js';
import { optionsSeriesQuery, rawSeriesMarketsQuery, seriesQuery } from '../query/series.js';
import { RAW_DATASETS, rawDatasetsListing } from '../downloads/catalog.js';
import { pickSeriesId } from '../markets/series-ids.js';
import { catalogueSeriesRows } from './series-venue.js';

/**
 * The series catalogue of GET /v1/series and /v1/series/{id}: the market series (src/query/series.ts), one
 * options series per venue and underlying of the options data set, and the raw tape data sets — each in the
 * anchor's SeriesResponse shape.
 */

/** The venue this service archives: every series is one of its market families. */
const BROKER = 'polymarket';
const BROKER_DISPLAY = 'Polymarket';

function seriesOut(s: Row): Row {
  const latest = (s.latest as string | null) ?? null;
  return {
    series_id: String(s.series_id),
    broker: BROKER,
    broker_display: BROKER_DISPLAY,
    asset_class: (s.asset_class as string | null) ?? '',
    category: (s.category as string | null) ?? '',
    asset: (s.asset as string | null) ?? '',
    asset_symbol: (s.asset_symbol as string | null) ?? '',
    timeframe: (s.timeframe as string | null) ?? '',
    name: (s.name as string | null) ?? String(s.series_id),
    description: (s.description as string | null) ?? '',
    catalogued_markets: Number(s.catalogued_markets ?? 0),
    shoppable_markets: Number(s.shoppable_markets ?? 0),
    earliest: (s.earliest as string | null) ?? null,
    latest,
    data_current_through: latest ? latest.slice(0, 10) : null,
    coming_soon: false,
  };
}

/**
 * The series catalogue with its counts, computed once per lake stamp (src/lake/stamp.ts) and shared by the
 * list and the single-series routes: it joins the markets catalogue, so every call used to read both files.
 */
const catalogue = new StampedCache<{ list: Row[]; byId: Map<string, Row> }>({ maxEntries: 16 });

export async function allSeries(ctx: RequestContext): Promise<{ list: Row[]; byId: Map<string, Row> }> {
  const got = await catalogue.get(ctx.lake, 'series', async () => {
    const lake = ctx.lake.sources;
    const markets = (await ctx.lake.rows(seriesQuery(lake))).map(seriesOut);
    const options = (await ctx.lake.rows(optionsSeriesQuery(lake))).map(optionsSeriesOut);
    const list = [...markets, ...options, ...(await rawSeries(ctx)), ...(await catalogueSeriesRows(ctx))];
    return { list, byId: new Map(list.map((s) => [String(s.series_id), s])) };
  });
  return got.value;
}

/** Markets series are the ones built from markets (estimates count their markets' rows); options and raw are not. */
export function isMarketSeries(s: Row): boolean {
  return s.asset_class !== 'options' && s.asset_class !== 'raw' && s.asset_class !== 'catalogue';
}

const UNDERLYING_NAMES: Readonly<Record<string, string>> = { BTC: 'Bitcoin', ETH: 'Ethereum', SOL: 'Solana' };

/** One options series per venue and underlying of the options data set: `deribit:btc-options`; its markets are its instruments. */
function optionsSeriesOut(r: Row): Row {
  const venue = String(r.venue);
  const sym = String(r.underlying).toUpperCase();
  const latest = (r.latest as string | null) ?? null;
  const instruments = Number(r.instruments ?? 0);
  return {
    series_id: `${venue}:${sym.toLowerCase()}-options`,
    broker: venue,
    broker_display: venue.charAt(0).toUpperCase() + venue.slice(1),
    asset_class: 'options',
    category: 'crypto',
    asset: UNDERLYING_NAMES[sym] ?? sym,
    asset_symbol: sym,
    timeframe: '',
    name: `${sym} options (${venue})`,
    description: `${sym} option trades of ${venue}, every instrument; greeks computed at download (GET /v1/download/options)`,
    catalogued_markets: instruments,
    shoppable_markets: instruments,
    earliest: (r.earliest as string | null) ?? null,
    latest,
    data_current_through: latest ? latest.slice(0, 10) : null,
    coming_soon: false,
  };
}

/**
 * The raw tape data sets (src/downloads/catalog.ts) as series: their markets are the condition ids their frames
 * name, their span the capture's (the raw listing's own figures). Listed even when empty, as the raw listing is.
 */
async function rawSeries(ctx: RequestContext): Promise<Row[]> {
  const listing = (await rawDatasetsListing(ctx.lake)).data;
  const counts =
    (await ctx.lake.one(
      rawSeriesMarketsQuery(
        ctx.lake.sources,
        RAW_DATASETS.map((d) => d.eventTypes),
      ),
    )) ?? {};
  return RAW_DATASETS.map((d, i) => {
    const l = listing[i]!;
    const latest = (l.latest as string | null) ?? null;
    const markets = Number(counts[`markets_${i}`] ?? 0);
    return {
      series_id: d.series_id,
      broker: d.venue,
      broker_display: BROKER_DISPLAY,
      asset_class: 'raw',
      category: 'tape',
      asset: '',
      asset_symbol: '',
      timeframe: '',
      name: d.data_type,
      description: `${d.description} (GET /v1/download/raw?data_type=${d.data_type})`,
      catalogued_markets: markets,
      shoppable_markets: markets,
      earliest: (l.earliest as string | null) ?? null,
      latest,
      data_current_through: latest ? latest.slice(0, 10) : null,
      coming_soon: false,
    };
  });
}

/** A series by either spelling of its id (src/markets/series-ids.ts): the anchor's `polymarket:btc-15m` or the slug. */
export async function oneSeries(ctx: RequestContext, id: string): Promise<Row> {
  const { byId } = await allSeries(ctx);
  const found = pickSeriesId(id, (s) => byId.has(s));
  if (found === null) throw new NotFound('Series not found');
  return byId.get(found)!;
}
