import { REFERENCE_RATE_PER_MB } from '../accounts/plans.js';
import type { LakeSession } from '../lake/session.js';
import type { Row } from '../lake/values.js';
import { StampedCache } from '../lake/stamp.js';
import { rawDatasetsSummaryQuery } from '../query/downloads.js';

/**
 * The raw tape data sets: names a `data_type` (or its series id) can take on /v1/download/raw, /raw/estimate
 * and raw exports. All live in the lake's `raw` data set (one verbatim frame per row, with the event types it
 * carries); each name selects frames by event type. `normalized` names the flat data set the same events
 * were parsed into at ingest, where one exists.
 */
export type RawDataset = Readonly<{
  data_type: string;
  series_id: string;
  venue: string;
  description: string;
  /** Frames carrying any of these event types; empty = every frame. */
  eventTypes: readonly string[];
  normalized: 'l2' | 'last_trades' | null;
}>;

export const RAW_DATASETS: readonly RawDataset[] = [
  {
    data_type: 'polymarket_l2_deltas',
    series_id: 'polymarket:l2-delta-tape',
    venue: 'polymarket',
    description: 'Order-book WebSocket frames (book snapshots, price_change deltas, tick size changes) exactly as captured',
    eventTypes: ['book', 'price_change', 'tick_size_change'],
    normalized: 'l2',
  },
  {
    data_type: 'polymarket_trades',
    series_id: 'polymarket:trades-tape',
    venue: 'polymarket',
    description: 'last_trade_price WebSocket frames exactly as captured',
    eventTypes: ['last_trade_price'],
    normalized: 'last_trades',
  },
  {
    data_type: 'polymarket_bbo',
    series_id: 'polymarket:bbo-tape',
    venue: 'polymarket',
    description: 'best_bid_ask WebSocket frames exactly as captured',
    eventTypes: ['best_bid_ask'],
    normalized: null,
  },
  {
    data_type: 'polymarket_raw',
    series_id: 'polymarket:raw-tape',
    venue: 'polymarket',
    description: 'Every captured market-channel WebSocket frame, in capture order',
    eventTypes: [],
    normalized: null,
  },
];

/** A data_type or series id → its data set (the anchor accepts both spellings). */
export function findRawDataset(name: string): RawDataset | undefined {
  return RAW_DATASETS.find((d) => d.data_type === name || d.series_id === name);
}

/** Options series ids: `<venue>:<underlying>-options`, e.g. deribit:btc-options. */
export const OPTIONS_SERIES = /^([a-z][a-z0-9]{0,31}):([a-z][a-z0-9]{0,15})-options$/;

export function parseOptionsSeries(id: string): { venue: string; underlying: string } | null {
  const m = OPTIONS_SERIES.exec(id);
  return m ? { venue: m[1]!, underlying: m[2]!.toUpperCase() } : null;
}

// ---------------------------------------------------------------------------------------------------------
// GET /v1/download/raw/datasets: the listing, computed in one scan and cached per lake stamp.

/**
 * The listing: each data set's figures need a scan of the whole raw tape, so all of them come from one scan,
 * computed once per lake stamp and shared by concurrent callers.
 */
const listing = new StampedCache<{ data: Row[]; meta: { count: number } }>({ maxEntries: 16 });

export async function rawDatasetsListing(lake: LakeSession): Promise<{ data: Row[]; meta: { count: number } }> {
  return (await listing.get(lake, 'raw-datasets', () => computeListing(lake))).value;
}

async function computeListing(lake: LakeSession): Promise<{ data: Row[]; meta: { count: number } }> {
  const r =
    (await lake.one(
      rawDatasetsSummaryQuery(
        lake.sources,
        RAW_DATASETS.map((d) => d.eventTypes),
      ),
    )) ?? {};
  const data = RAW_DATASETS.map((d, i): Row => ({
    data_type: d.data_type,
    series_id: d.series_id,
    venue: d.venue,
    description: d.description,
    shapes: d.normalized ? ['raw', 'normalized'] : ['raw'],
    normalizable: d.normalized !== null,
    formats: ['json', 'csv', 'parquet'],
    earliest: r[`first_${i}`] ?? null,
    latest: r[`last_${i}`] ?? null,
    record_count: Number(r[`rows_${i}`] ?? 0),
    size_bytes: Number(r[`bytes_${i}`] ?? 0),
    rate_per_mb: REFERENCE_RATE_PER_MB.raw ?? 0,
    download_path: `/v1/download/raw?data_type=${d.data_type}&start=&end=&format=json`,
  }));
  // The one {data, meta} envelope among the download routes: the anchor's client unwraps `data`.
  return { data, meta: { count: data.length } };
}
