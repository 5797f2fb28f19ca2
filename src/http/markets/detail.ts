import type { Response } from 'express';
import { z } from 'zod';
import { defineRoute, type Route, type RouteInput } from '../route.js';
import type { RequestContext } from '../context.js';
import type { Row } from '../../lake/values.js';
import { instantParam, MarketPath } from '../params.js';
import { MarketResponse, marketAtOut, marketOut } from './view.js';
import { definitionAt } from '../../markets/definitions.js';
import { isoFromMicros } from '../../lake/values.js';

const MarketDetailQuery = z.object({
  as_of: instantParam
    .optional()
    .describe(
      'The market as it stood at this instant (ISO 8601, or epoch seconds / milliseconds): tick size, active, closed, accepting orders, neg-risk, end date, resolution and winner from the definition the catalogue poller recorded in force then (Gamma over CLOB, field by field). 404 before the first recorded definition, or for a market never polled',
    ),
});

/** GET /v1/markets/{market_id}: one market, by numeric id or by one of its outcome token ids. */
export const marketDetailRoutes: Route[] = [
  defineRoute({
    method: 'get',
    path: '/v1/markets/:market_id',
    cost: 'cheap',
    auth: 'key',
    tag: 'markets',
    summary: 'Get one market (numeric id or an outcome token id), now or as it stood at as_of',
    params: MarketPath,
    query: MarketDetailQuery,
    response: MarketResponse,
    handler: getMarket,
  }),
];

async function getMarket({ params, query, res }: RouteInput<{ params: typeof MarketPath; query: typeof MarketDetailQuery }>, ctx: RequestContext) {
  const r = await ctx.markets.resolve(ctx.lake, params.market_id);
  res.locals.rows = 1;
  if (query.as_of !== undefined) {
    // A point-in-time answer is built per request, outside the per-row body cache below.
    const cid = typeof r.market.condition_id === 'string' ? r.market.condition_id : null;
    const def = await definitionAt(ctx.lake, String(r.market.id), cid, query.as_of);
    return marketAtOut(r.market, def, isoFromMicros(query.as_of));
  }
  sendMarket(res, r.market);
  return undefined;
}

/**
 * GET /v1/markets/{id} answers the same bytes until the catalogue changes, so the JSON and its ETag are built
 * once per market row: stringifying and hashing them per request showed in the profile under load. Keyed by
 * the row object, which the market resolver's cache (src/markets/resolver.ts) replaces when a new lake version
 * is published — a new row is a new entry, and the old one goes with its row.
 */
const marketBodies = new WeakMap<Row, { body: Buffer; etag: string | undefined }>();

function sendMarket(res: Response, market: Row): void {
  let hit = marketBodies.get(market);
  if (!hit) {
    const body = Buffer.from(JSON.stringify(marketOut(market)), 'utf8');
    // The app's own ETag function (Express's default weak ETag unless configured), so answers match res.json's.
    const etagFn = res.app.get('etag fn') as ((b: Buffer) => string) | undefined;
    hit = { body, etag: typeof etagFn === 'function' ? etagFn(body) : undefined };
    marketBodies.set(market, hit);
  }
  res.setHeader('Content-Type', 'application/json; charset=utf-8');
  if (hit.etag) res.setHeader('ETag', hit.etag);
  // res.send keeps Express's conditional GET (If-None-Match → 304) and HEAD handling.
  res.send(hit.body);
}
