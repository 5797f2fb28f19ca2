import type { DatasetName } from '../lake/layout.js';

/**
 * The product catalogue: every data kind pmlake sells, declared once. Downloads (a pull's kind), estimates,
 * exports, the legacy orders, the plans (their data set keys), the per-MB reference rates and the OpenAPI
 * enums are all read from this table; `npm run lint` (scripts/architecture.ts) refuses a list of kinds anywhere
 * else in src/. Adding a kind is one entry here plus its query builder.
 */

/** Where a kind is served: each name is one place the public API lists its kinds. */
export type Surface =
  /** The JSON query API (/v1/markets, /v1/trades, /v1/ohlcv, /v1/orderbook/*). */
  | 'query'
  /** A file pull's kind: GET /v1/download/<kind>, a bulk line item, the spec an export job stores. */
  | 'download'
  /** POST /v1/markets/{market_id}/estimate `data_type`. */
  | 'estimate'
  /** POST /v1/series/{series_id}/estimate `data_type`. */
  | 'series_estimate'
  /** POST /v1/exports `kind`. */
  | 'export'
  /** GET /v1/download/series `data_type` (a series' markets in one file). */
  | 'series_download'
  /** GET /v1/download/options `data_type`. */
  | 'options_download'
  /** /v1/charts/replay/ticks. */
  | 'replay'
  /** A venue-wide catalogue series (src/markets/series-ids.ts: polymarket:ohlcv-1h, trades-recent). */
  | 'venue_series'
  /** A legacy order item's `data_type` (POST /v1/orders). */
  | 'order'
  /** GET /v1/markets `data_type` (only markets that have it). */
  | 'market_filter';

type KindDef<Id extends string = string> = Readonly<{
  title: string;
  /** The lake data sets it is read from; the first one's stored bytes per row size its estimates. */
  lake: readonly DatasetName[];
  serves: readonly Surface[];
  /**
   * The plan data set key that covers it: `own` makes its id a key of the plans (`free`: the Free plan has it
   * too; every paid plan has every key); `as` names the kind whose key covers it.
   */
  plan: { readonly own: { readonly free: boolean } } | { readonly as: Id };
  /** Reference rate in USD per MB (the retired credit model: reported, not charged). */
  rate_per_mb?: number;
  /** Read from the websocket tape: an estimate of it reports the tape's coverage of the days (trades and OHLCV are on-chain fills). */
  tape: boolean;
  /** Where its rows are built (and so its file columns). */
  builder: string;
}>;

/** The table as written, its `plan.as` checked against its own ids by the compiler. */
function catalogue<const C extends { readonly [K in keyof C]: KindDef<Extract<keyof C, string>> }>(table: C): C {
  return table;
}

/** Kinds in catalogue order: every derived list, key set and rate table keeps this order. */
export const CATALOGUE = catalogue({
  markets: {
    title: 'The market catalogue',
    lake: ['markets'],
    serves: ['query'],
    plan: { own: { free: true } },
    tape: false,
    builder: 'src/query/markets.ts, src/markets/catalogue.ts',
  },
  trades: {
    title: 'On-chain trades (fills)',
    lake: ['trades'],
    serves: [
      'query',
      'download',
      'estimate',
      'series_estimate',
      'export',
      'series_download',
      'options_download',
      'replay',
      'venue_series',
      'order',
      'market_filter',
    ],
    plan: { own: { free: true } },
    rate_per_mb: 1,
    tape: false,
    builder: 'src/query/trades.ts; files: tradesDownload in src/query/downloads.ts',
  },
  ohlcv: {
    title: 'OHLCV candles at any timeframe',
    lake: ['candles_1m', 'candles_1h', 'trades'],
    serves: ['query', 'download', 'estimate', 'series_estimate', 'export', 'series_download', 'venue_series', 'order', 'market_filter'],
    plan: { own: { free: true } },
    rate_per_mb: 8,
    tape: false,
    builder: 'src/query/ohlcv.ts; files: ohlcvDownload in src/query/downloads.ts',
  },
  orderbook: {
    title: 'Order-book snapshots',
    lake: ['book_snapshots'],
    serves: ['query', 'download', 'estimate', 'series_estimate', 'export', 'order', 'market_filter'],
    plan: { own: { free: true } },
    rate_per_mb: 2,
    tape: true,
    builder: 'src/query/orderbook.ts; files: orderbookDownload in src/query/downloads.ts',
  },
  top_of_book: {
    title: 'Best bid and ask changes',
    lake: ['top_of_book'],
    serves: ['query', 'download', 'estimate', 'series_estimate'],
    plan: { own: { free: true } },
    rate_per_mb: 2,
    tape: true,
    builder: 'src/query/orderbook.ts; files: topOfBookDownload in src/query/downloads.ts',
  },
  raw: {
    title: 'The raw websocket tape (its data sets: src/downloads/catalog.ts RAW_DATASETS)',
    lake: ['l2', 'raw', 'last_trades'],
    serves: ['download', 'estimate', 'series_estimate', 'export'],
    plan: { own: { free: false } },
    rate_per_mb: 2,
    tape: true,
    builder: 'rawFramesDownload, l2LevelsDownload, tapeTradesDownload in src/query/downloads.ts',
  },
  // Computed from the tape at read time (src/query/computed.ts): covered by the raw tape's key, as they are
  // built from its level-2 changes and trade prints.
  book_snapshot_interval: {
    title: 'The order book at every interval boundary of a window, to a depth',
    lake: ['book_snapshots', 'l2'],
    serves: ['download', 'estimate', 'export'],
    plan: { as: 'raw' },
    tape: true,
    builder: 'intervalBookDownload in src/query/computed.ts',
  },
  tbbo: {
    title: 'Every venue trade print with the best bid and ask just before it',
    lake: ['last_trades', 'top_of_book'],
    serves: ['download', 'estimate', 'export'],
    plan: { as: 'raw' },
    tape: true,
    builder: 'tbboDownload in src/query/computed.ts',
  },
  options: {
    title: 'Crypto-options trades',
    lake: ['options'],
    serves: ['download'],
    plan: { own: { free: false } },
    rate_per_mb: 1,
    tape: false,
    builder: 'optionsTradesDownload in src/query/downloads.ts',
  },
  series: {
    title: "A series' markets in one file",
    lake: [],
    serves: ['download'],
    plan: { own: { free: true } },
    tape: false,
    builder: 'the series data type (trades, ohlcv, snapshots) over the series; src/downloads/plan.ts',
  },
  greeks: {
    title: 'Per-trade Black-76 greeks of an options series',
    lake: ['options'],
    serves: ['series_estimate', 'options_download', 'order'],
    plan: { as: 'options' },
    tape: false,
    builder: 'optionsGreeksDownload in src/query/downloads.ts',
  },
  // Legacy orders size their `snapshots` as top of book and cover them by its key (src/accounts/order-sizing.ts).
  snapshots: {
    title: "A series' order-book snapshots",
    lake: ['book_snapshots'],
    serves: ['series_estimate', 'series_download', 'options_download', 'order'],
    plan: { as: 'orderbook' },
    rate_per_mb: 2,
    tape: true,
    builder: 'orderbookDownload in src/query/downloads.ts',
  },
});

type Catalogue = typeof CATALOGUE;
export type KindId = keyof Catalogue;

/** The kinds served at a surface, as a union type. */
export type Serving<S extends Surface> = { [K in KindId]: S extends Catalogue[K]['serves'][number] ? K : never }[KindId];

/** The ids that are plan data set keys, plus `exports` (exporting any data set needs it as well). */
export type DatasetKey = { [K in KindId]: Catalogue[K]['plan'] extends { own: unknown } ? K : never }[KindId] | 'exports';

export const KIND_IDS = Object.keys(CATALOGUE) as KindId[];
/** The table read entry by entry (the literal types above are for the derived unions). */
const ENTRIES: Readonly<Record<KindId, KindDef<KindId>>> = CATALOGUE;

/**
 * Where the public enum's order is the anchor's (the OpenAPI document and a 422 list its values so), the
 * kinds named here come first in that order; every other kind served there follows in catalogue order.
 */
const LISTED_FIRST: Partial<Record<Surface | 'bulk', readonly KindId[]>> = {
  bulk: ['trades', 'ohlcv', 'orderbook', 'top_of_book', 'options', 'series', 'raw'],
  export: ['trades', 'raw'],
  series_download: ['trades', 'snapshots'],
};

/** The kinds served at a surface, as a list (zod enums take it and narrow to `Serving<S>`). */
export function kindsServing<S extends Surface>(surface: S, order: Surface | 'bulk' = surface): readonly Serving<S>[] {
  const served = KIND_IDS.filter((k) => ENTRIES[k].serves.includes(surface));
  const first = (LISTED_FIRST[order] ?? []).filter((k) => served.includes(k));
  return [...first, ...served.filter((k) => !first.includes(k))] as Serving<S>[];
}

export const DOWNLOAD_KINDS = kindsServing('download');
export type DownloadKind = Serving<'download'>;
/** The same kinds in a bulk line item, in the anchor's order. */
export const BULK_KINDS = kindsServing('download', 'bulk');
export const ESTIMATE_KINDS = kindsServing('estimate');
export type EstimateKind = Serving<'estimate'>;
export const SERIES_ESTIMATE_KINDS = kindsServing('series_estimate');
export type SeriesEstimateKind = Serving<'series_estimate'>;
export const EXPORT_KINDS = kindsServing('export');
export const SERIES_DOWNLOAD_KINDS = kindsServing('series_download');
export const OPTIONS_DOWNLOAD_KINDS = kindsServing('options_download');
export const ORDER_KINDS = kindsServing('order');
export const MARKET_FILTER_KINDS = kindsServing('market_filter');
export type MarketFilterKind = Serving<'market_filter'>;
export type VenueSeriesKind = Serving<'venue_series'>;

/** The plan data set key that covers a kind. */
export function planKeyOf(id: KindId): DatasetKey {
  const p = ENTRIES[id].plan;
  return ('as' in p ? p.as : id) as DatasetKey;
}

/** Every plan data set key, in catalogue order, `exports` last. */
export const DATASET_KEYS = [...KIND_IDS.filter((k) => 'own' in ENTRIES[k].plan), 'exports'] as readonly DatasetKey[];

/** The keys the Free plan has (every paid plan has them all). */
export const FREE_DATASET_KEYS = KIND_IDS.filter((k) => {
  const p = ENTRIES[k].plan;
  return 'own' in p && p.own.free;
}) as readonly DatasetKey[];

/** Per-MB reference rates by kind, in catalogue order (GET /v1/billing/pricing lists them so). */
export const REFERENCE_RATE_PER_MB: Readonly<Record<string, number>> = Object.fromEntries(
  KIND_IDS.flatMap((k) => {
    const rate = ENTRIES[k].rate_per_mb;
    return rate === undefined ? [] : [[k, rate]];
  }),
);

/** The data set whose stored bytes per row size an estimate of this kind. */
export function sizingDataset(id: SeriesEstimateKind | EstimateKind): DatasetName {
  return ENTRIES[id].lake[0]!;
}

/** Whether a kind is read from the websocket tape (its pulls report the tape's coverage). */
export function fromTape(id: KindId): boolean {
  return ENTRIES[id].tape;
}
