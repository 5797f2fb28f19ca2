import { z } from 'zod';
import type { Route } from '../route.js';
import type { AppContext } from '../context.js';
import { NotFound } from '../../errors.js';
import { lakeSources, runQuery, type Row } from '../../lake/runner.js';
import { listMarketsQuery, SORT_BY, type SortBy } from '../../query/markets.js';
import { resolveSeriesId } from '../../markets/series-ids.js';
import { checkWindow, isoDateTime, queryBool, queryInt } from '../params.js';
import { MarketResponse, marketOut } from './view.js';

/** GET /v1/markets: the catalogue, filtered, searched and sorted (src/query/markets.ts). */

const ListMarketsQuery = z
  .object({
    active: queryBool.optional().describe('Filter by active status'),
    closed: queryBool.optional().describe('Filter by closed status'),
    resolved: queryBool.optional().describe('Filter by resolution status'),
    category: z.string().max(200).optional().describe('Filter by category (case-insensitive exact match)'),
    has_data: queryBool.optional().describe('true: only markets with trade or order-book data; false or unset: no filter'),
    data_type: z.enum(['trades', 'ohlcv', 'orderbook']).optional().describe('Only markets that have this data type'),
    search: z.string().max(1000).optional().describe('Case-insensitive substring of the question; % and _ match literally'),
    series_id: z.string().min(1).max(80).optional().describe('Only markets in this series (ids from GET /v1/series); unknown series → 404'),
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
    offset: queryInt({ min: 0, max: 1_000_000, default: 0 }),
  })
  .superRefine((v, ctx) => checkWindow({ start: v.ending_after, end: v.ending_before }, ctx, ['ending_after', 'ending_before']));

async function listMarkets(ctx: AppContext, q: z.infer<typeof ListMarketsQuery>): Promise<Row[]> {
  const lake = lakeSources(ctx.config.lakeDir);
  // The anchor's `polymarket:btc-15m` and the stored slug name the same series (src/markets/series-ids.ts).
  const seriesId = q.series_id === undefined ? undefined : await resolveSeriesId(ctx.db, ctx.config.lakeDir, q.series_id);
  if (seriesId === null) throw new NotFound('Series not found');
  return runQuery(
    ctx.db,
    listMarketsQuery(lake, {
      active: q.active,
      closed: q.closed,
      resolved: q.resolved,
      search: q.search,
      category: q.category,
      seriesId,
      hasData: q.has_data,
      dataType: q.data_type,
      endingAfter: q.ending_after,
      endingBefore: q.ending_before,
      sortBy: q.sort_by,
      limit: q.limit,
      offset: q.offset,
    }),
  );
}

export const marketListRoutes: Route[] = [
  {
    method: 'get',
    path: '/v1/markets',
    cost: 'cheap',
    auth: 'key',
    tag: 'markets',
    summary: 'List markets',
    query: ListMarketsQuery,
    response: z.array(MarketResponse),
    handler: async (_req, res, ctx) => {
      const rows = (await listMarkets(ctx, res.locals.query)).map(marketOut);
      res.locals.rows = rows.length;
      return rows;
    },
  },
];
