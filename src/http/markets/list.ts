import type { Response } from 'express';
import { z } from 'zod';
import { MARKET_FILTER_KINDS } from '../../catalogue/kinds.js';
import { defineRoute, type Route, type RouteInput } from '../route.js';
import type { RequestContext } from '../context.js';
import { NotFound } from '../../errors.js';
import type { Row } from '../../lake/values.js';
import { SORT_BY, type MarketSeriesScope, type SortBy } from '../../query/markets.js';
import { catalogueHeld, listFromCatalogue } from '../../markets/catalogue.js';
import { catalogueSeries, resolveSeriesId } from '../../markets/series-ids.js';
import { parseOptionsSeries, RAW_DATASETS } from '../../downloads/catalog.js';
import { isMarketSeries, oneSeries } from '../series-catalogue.js';
import { checkWindow, isoDateTime, queryBool, queryInt } from '../params.js';
import { MarketResponse, marketJson } from './view.js';
import { sendJsonText } from '../respond.js';
import { setNextLink } from '../next-link.js';

/** The offset bound of the spec (GET /v1/markets: offset max 1000000). */
const MAX_OFFSET = 1_000_000;

/** GET /v1/markets: the catalogue, filtered, searched and sorted (src/markets/catalogue.ts, src/query/markets.ts). */

const ListMarketsQuery = z
  .object({
    active: queryBool.optional().describe('Filter by active status'),
    closed: queryBool.optional().describe('Filter by closed status'),
    resolved: queryBool.optional().describe('Filter by resolution status'),
    category: z.string().max(200).optional().describe('Filter by category (case-insensitive exact match)'),
    has_data: queryBool.optional().describe('true: only markets with trade or order-book data; false or unset: no filter'),
    data_type: z.enum(MARKET_FILTER_KINDS).optional().describe('Only markets that have this data type'),
    search: z.string().max(1000).optional().describe('Case-insensitive substring of the question; % and _ match literally'),
    series_id: z
      .string()
      .min(1)
      .max(80)
      .optional()
      .describe(
        'Only markets in this series (ids from GET /v1/series); a venue-wide catalogue series (polymarket:ohlcv-1h) covers every market; unknown series → 404',
      ),
    ending_after: isoDateTime.optional().describe('Only markets whose end_date is at or after this instant'),
    ending_before: isoDateTime.optional().describe('Only markets whose end_date is at or before this instant'),
    // The anchor types sort_by as a free string (its document has no enum) and its description names only a
    // default, so a value it does not know sorts by that default instead of failing; the spec is silent. pmlake
    // does the same: an unknown sort_by is the default order, not a 422 (bounded in length like every string).
    sort_by: z
      .string()
      .max(100)
      .optional()
      .transform((v): SortBy | undefined => ((SORT_BY as readonly string[]).includes(v ?? '') ? (v as SortBy) : undefined))
      .describe(`All descending: ${SORT_BY.join(', ')}. Default top (most rows), or end_date when series_id is set; an unknown value sorts by the default`),
    limit: queryInt({ min: 1, max: 1000, default: 100 }),
    offset: queryInt({ min: 0, max: MAX_OFFSET, default: 0 }),
  })
  .superRefine((v, ctx) => checkWindow({ start: v.ending_after, end: v.ending_before }, ctx, ['ending_after', 'ending_before']));

/**
 * The markets of a series id, consistent with what GET /v1/series/{id} counts for it: a stored market series
 * (the anchor's `polymarket:btc-15m` or the slug, src/markets/series-ids.ts), a served venue-wide catalogue
 * series (`polymarket:ohlcv-1h`: every market, as its catalogued_markets says), a raw tape series (the markets
 * its frames name), none for options series and unserved catalogue series; an id GET /v1/series lacks is a 404.
 */
async function seriesScope(ctx: RequestContext, id: string): Promise<MarketSeriesScope> {
  const stored = await resolveSeriesId(ctx.lake, id);
  if (stored !== null) return { seriesId: stored };
  const cat = catalogueSeries(id);
  if (cat) return cat.insteadOf ? { none: true } : { all: true };
  const raw = RAW_DATASETS.find((d) => d.series_id === id);
  if (raw) return { rawEventTypes: raw.eventTypes };
  // Options series exist only where the options data set has their venue and underlying (oneSeries: 404 else).
  if (parseOptionsSeries(id) && !isMarketSeries(await oneSeries(ctx, id))) return { none: true };
  throw new NotFound('Series not found');
}

/**
 * The page from the version's catalogue held in memory (src/markets/catalogue.ts). Only reading it — once per
 * lake version — scans the lake, so only then does the request take a 'query' slot (route admission 'handler');
 * null: the client left while it waited.
 */
async function listMarkets(ctx: RequestContext, res: Response, q: z.infer<typeof ListMarketsQuery>): Promise<Row[] | null> {
  const series = q.series_id === undefined ? undefined : await seriesScope(ctx, q.series_id);
  if (!catalogueHeld(ctx.lake, { series }) && res.locals.admit && !(await res.locals.admit())) return null;
  return listFromCatalogue(ctx.lake, {
    active: q.active,
    closed: q.closed,
    resolved: q.resolved,
    search: q.search,
    category: q.category,
    series,
    hasData: q.has_data,
    dataType: q.data_type,
    endingAfter: q.ending_after,
    endingBefore: q.ending_before,
    sortBy: q.sort_by,
    limit: q.limit,
    offset: q.offset,
  });
}

export const marketListRoutes: Route[] = [
  defineRoute({
    method: 'get',
    path: '/v1/markets',
    cost: 'query',
    admission: 'handler',
    auth: 'key',
    tag: 'markets',
    summary: 'List markets',
    query: ListMarketsQuery,
    response: z.array(MarketResponse),
    paged: true,
    handler: getMarkets,
  }),
];

async function getMarkets({ query: q, req, res }: RouteInput<{ query: typeof ListMarketsQuery }>, ctx: RequestContext) {
  // One market more than the page says whether the list goes on (the order is total: ties broken by id).
  const page = await listMarkets(ctx, res, { ...q, limit: q.limit + 1 });
  if (page === null) return undefined;
  const next = q.offset + q.limit;
  // Past the spec's offset bound no URL could ask for the rest: a narrower filter can.
  if (page.length > q.limit && next <= MAX_OFFSET) setNextLink(req, res, ctx.config, { offset: next });
  const shown = page.slice(0, q.limit);
  return sendJsonText(res, { json: `[${shown.map(marketJson).join(',')}]`, rows: shown.length });
}
