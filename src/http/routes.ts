import type { Route } from './route.js';
import { marketRoutes } from './markets.js';
import { seriesRoutes } from './series.js';
import { tradeRoutes } from './trades.js';
import { ohlcvRoutes } from './ohlcv.js';
import { orderbookRoutes } from './orderbook.js';
import { openapiRoutes } from './openapi.js';
import { docsRoutes } from './docs.js';
import { userRoutes } from './user.js';
import { billingRoutes } from './billing.js';
import { orderRoutes } from './orders.js';
import { webhookRoutes } from './webhooks.js';
import { checkoutPageRoutes } from './checkout-page.js';
import { statsRoutes } from './stats.js';
import { downloadRoutes } from './downloads.js';
import { exportRoutes } from './exports.js';

/**
 * Every route of the service, in one table. Each endpoint family lives in its own file under src/http/ and
 * exports its rows; this list is their union, in the order Express matches them.
 */
export const routes: Route[] = [
  ...marketRoutes,
  ...seriesRoutes,
  ...tradeRoutes,
  ...ohlcvRoutes,
  ...orderbookRoutes,
  ...openapiRoutes,
  ...docsRoutes,
  ...userRoutes,
  ...billingRoutes,
  ...orderRoutes,
  ...webhookRoutes,
  ...checkoutPageRoutes,
  ...statsRoutes,
  ...downloadRoutes,
  ...exportRoutes,
];
