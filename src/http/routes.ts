import type { Route } from './route.js';

/**
 * Every route of the service, in one table. Each endpoint family lives in its own file under src/http/ and
 * exports its rows; this list is their union, in the order Express matches them.
 */
export const routes: Route[] = [];
