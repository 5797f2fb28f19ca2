import type { Route } from './route.js';
import { marketListRoutes } from './markets/list.js';
import { marketDetailRoutes } from './markets/detail.js';
import { marketChangesRoutes } from './markets/changes.js';
import { marketStatsRoutes } from './markets/stats.js';
import { marketEstimateRoutes } from './markets/estimate.js';
import { marketCoverageRoutes } from './markets/coverage.js';
import { coverageRoutes } from './coverage.js';
import { seriesRoutes } from './series.js';
import { tradeRoutes } from './trades.js';
import { recentTradeRoutes } from './trades-recent.js';
import { ohlcvRoutes } from './ohlcv.js';
import { orderbookSnapshotRoutes } from './orderbook/snapshot.js';
import { topOfBookRoutes } from './orderbook/top-of-book.js';
import { openapiRoutes } from './openapi.js';
import { docsRoutes } from './docs.js';
import { chartsPageRoutes } from './charts-page.js';
import { userProfileRoutes } from './user/profile.js';
import { userKeyRoutes } from './user/keys.js';
import { userProvisionRoutes } from './user/provision.js';
import { userUsageRoutes } from './user/usage.js';
import { userHistoryRoutes } from './user/history.js';
import { userLifecycleRoutes } from './user/lifecycle.js';
import { billingPricingRoutes } from './billing/pricing.js';
import { creditRoutes } from './billing/credits.js';
import { subscriptionRoutes } from './billing/subscriptions.js';
import { orderListRoutes } from './orders/list.js';
import { orderPlaceRoutes } from './orders/place.js';
import { webhookRoutes } from './billing/webhooks.js';
import { localCheckoutRoutes } from './billing/local-checkout.js';
import { statsRoutes } from './stats.js';
import { downloadRoutes } from './downloads.js';
import { exportRoutes } from './exports.js';
import { udfRoutes } from './charts/udf.js';
import { historyRoutes } from './charts/history.js';
import { replayRoutes } from './charts/replay.js';
import { publicMarketRoutes } from './public/markets.js';
import { statusRoutes } from './public/status.js';
import { replayNormalizedRoutes } from './replay-normalized.js';

/**
 * Every route of the service, in one table. Each endpoint family lives in its own file under src/http/, or in a
 * folder of files by sub-resource when it is larger (markets/, orderbook/, user/, billing/, orders/); each file
 * exports its rows and this list is their union, in the order Express matches them.
 */
export const routes: Route[] = [
  // /v1/markets
  ...marketListRoutes,
  ...marketDetailRoutes,
  // /v1/markets/{market_id}/changes: point-in-time definitions from the catalogue polls
  ...marketChangesRoutes,
  ...marketStatsRoutes,
  ...marketEstimateRoutes,
  // /v1/markets/{market_id}/coverage and /v1/coverage: the tape's verified days
  ...marketCoverageRoutes,
  ...coverageRoutes,
  ...seriesRoutes,
  ...tradeRoutes,
  ...recentTradeRoutes,
  ...ohlcvRoutes,
  // /v1/orderbook
  ...orderbookSnapshotRoutes,
  ...topOfBookRoutes,
  // /v1/replay/normalized: the normalized and computed streams as NDJSON
  ...replayNormalizedRoutes,
  // The document describes this very table; read when first asked for, once the table is complete.
  ...openapiRoutes(() => routes),
  ...docsRoutes,
  ...chartsPageRoutes,
  // /v1/user
  ...userProfileRoutes,
  ...userKeyRoutes,
  ...userProvisionRoutes,
  ...userUsageRoutes,
  ...userHistoryRoutes,
  ...userLifecycleRoutes,
  // /v1/billing
  ...billingPricingRoutes,
  ...creditRoutes,
  ...subscriptionRoutes,
  // /v1/orders
  ...orderListRoutes,
  ...orderPlaceRoutes,
  // /v1/billing: the providers' webhooks and the local provider's checkout page
  ...webhookRoutes,
  ...localCheckoutRoutes,
  ...statsRoutes,
  ...downloadRoutes,
  ...exportRoutes,
  // /v1/charts: the TradingView UDF datafeed and replay ticks
  ...udfRoutes,
  ...historyRoutes,
  ...replayRoutes,
  // No key: the anchor's public market pages, the root and the status probe
  ...publicMarketRoutes,
  ...statusRoutes,
];
