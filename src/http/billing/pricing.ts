import { BYTES_PER_ROW, LEGACY_MINIMUM_ORDER_USD, PLANS, REFERENCE_RATE_PER_MB } from '../../accounts/plans.js';
import { defineRoute, type Route, type RouteInput } from '../route.js';

/** GET /v1/billing/pricing: the plans, the per-MB reference rates and the credit purchase bounds (public). */

export const MIN_CHECKOUT_USD = 10;
export const MAX_CHECKOUT_USD = 10_000;

function planView(id: keyof typeof PLANS) {
  const p = PLANS[id];
  return {
    id: p.id,
    name: p.name,
    price_usd_month: p.price_usd_month,
    price_usd_year: p.price_usd_year,
    requires_subscription: p.requires_subscription,
    datasets: p.datasets,
    requests_per_minute: p.requests_per_minute,
    downloads_per_hour: p.downloads_per_hour,
    downloads_per_minute: p.downloads_per_minute,
    fair_use_bytes_month: p.fair_use_bytes_month,
    fair_use_gb_month: p.fair_use_bytes_month / 1024 ** 3,
    top_of_book_delay_minutes: p.top_of_book_delay_minutes,
  };
}

/** The legacy per-MB constants: GET /v1/billing/pricing (usage_pricing) and GET /v1/orders/estimate. */
export function usagePricing() {
  return {
    rate_per_mb: { ...REFERENCE_RATE_PER_MB },
    bytes_per_row: { ...BYTES_PER_ROW },
    free_tier_mb: 0,
    minimum_order_usd: LEGACY_MINIMUM_ORDER_USD,
    currency: 'USD',
  };
}

export const billingPricingRoutes: Route[] = [
  defineRoute({
    method: 'get',
    path: '/v1/billing/pricing',
    cost: 'cheap',
    auth: 'public',
    tag: 'Billing',
    summary: 'Plans, the per-MB reference rates and the legacy minimum order',
    handler: getPricing,
  }),
];

async function getPricing({ res }: RouteInput) {
  res.setHeader('Cache-Control', 'public, max-age=300');
  return {
    pricing_model: 'subscription',
    // Pay-as-you-go for data is retired: pulls are included in the plan. Credits still buy legacy orders
    // and can be redeemed toward a subscription, so credit checkout stays open.
    payg_enabled: false,
    plans: [planView('free'), planView('professional')],
    reference_rates_per_mb: { ...REFERENCE_RATE_PER_MB },
    minimum_order_usd: LEGACY_MINIMUM_ORDER_USD,
    credit_pricing: { minimum_purchase: MIN_CHECKOUT_USD, maximum_purchase: MAX_CHECKOUT_USD, currency: 'USD', presets: [10, 25, 50, 100, 250] },
    usage_pricing: usagePricing(),
    note: 'Per-MB rates are reference numbers; downloads and exports are included in the plan up to its monthly fair-use volume.',
  };
}
