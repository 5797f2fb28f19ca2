import { DATASET_KEYS, FREE_DATASET_KEYS, type DatasetKey } from '../catalogue/kinds.js';

/**
 * Plans in one table: data sets covered, request rate, download limits, monthly fair-use volume.
 * The free plan's data sets are a documented subset: no raw L2 tape, no exports, top of book only delayed.
 * Which data set keys exist and which of them Free has is the catalogue's (src/catalogue/kinds.ts).
 */
export type { DatasetKey };

export type PlanDef = Readonly<{
  id: 'free' | 'professional';
  name: string;
  price_usd_month: number;
  /** Annual price: ten months. */
  price_usd_year: number;
  /** Paid plans entitle only while a subscription is active; Free needs none. */
  requires_subscription: boolean;
  datasets: readonly DatasetKey[];
  requests_per_minute: number;
  downloads_per_hour: number;
  /** Burst cap on downloads per minute (protects the service; not an allowance). */
  downloads_per_minute: number | null;
  fair_use_bytes_month: number;
  /** Free callers see top of book only this many minutes behind now. */
  top_of_book_delay_minutes: number;
}>;

const GB = 1024 ** 3;

export const PLANS: Readonly<Record<PlanDef['id'], PlanDef>> = {
  free: {
    id: 'free',
    name: 'Free',
    price_usd_month: 0,
    price_usd_year: 0,
    requires_subscription: false,
    datasets: FREE_DATASET_KEYS,
    requests_per_minute: 60,
    downloads_per_hour: 10,
    downloads_per_minute: null,
    fair_use_bytes_month: 1 * GB,
    top_of_book_delay_minutes: 15,
  },
  professional: {
    id: 'professional',
    name: 'Professional',
    price_usd_month: 99,
    price_usd_year: 990,
    requires_subscription: true,
    datasets: DATASET_KEYS,
    requests_per_minute: 60,
    downloads_per_hour: 300,
    downloads_per_minute: 20,
    fair_use_bytes_month: 50 * GB,
    top_of_book_delay_minutes: 0,
  },
};

/** Per-MB reference rates of the retired credit model (reported, not charged, under subscriptions): each kind's. */
export { REFERENCE_RATE_PER_MB } from '../catalogue/kinds.js';

export const LEGACY_MINIMUM_ORDER_USD = 10;

/**
 * Average bytes one row of each data type takes in a CSV download: the legacy size model behind order costs and
 * the constants GET /v1/orders/estimate hands to clients. Unknown types fall back to 230 B/row at 1 USD/MB.
 */
export const BYTES_PER_ROW: Readonly<Record<string, number>> = {
  trades: 230,
  ohlcv: 137,
  orderbook: 2076,
  snapshots: 250,
  top_of_book: 250,
};

export function planOf(id: string): PlanDef {
  return PLANS[id as PlanDef['id']] ?? PLANS.free;
}
