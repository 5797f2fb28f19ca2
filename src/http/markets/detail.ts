import type { Response } from 'express';
import { defineRoute, type Route, type RouteInput } from '../route.js';
import type { RequestContext } from '../context.js';
import type { Row } from '../../lake/values.js';
import { MarketPath } from '../params.js';
import { MarketResponse, marketOut } from './view.js';

/** GET /v1/markets/{market_id}: one market, by numeric id or by one of its outcome token ids. */
export const marketDetailRoutes: Route[] = [
  defineRoute({
    method: 'get',
    path: '/v1/markets/:market_id',
    cost: 'cheap',
    auth: 'key',
    tag: 'markets',
    summary: 'Get one market (numeric id or an outcome token id)',
    params: MarketPath,
    response: MarketResponse,
    handler: getMarket,
  }),
];

async function getMarket({ params, res }: RouteInput<{ params: typeof MarketPath }>, ctx: RequestContext) {
  const r = await ctx.markets.resolve(ctx.lake, params.market_id);
  res.locals.rows = 1;
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
