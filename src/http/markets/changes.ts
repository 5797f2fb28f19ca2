import { z } from 'zod';
import { defineRoute, type Route, type RouteInput } from '../route.js';
import type { RequestContext } from '../context.js';
import { checkWindow, instantParam, MarketPath, queryInt } from '../params.js';
import { setNextLink } from '../next-link.js';
import { decodeChangesCursor, definitionChanges, encodeChangesCursor, MAX_CHANGES_CURSOR } from '../../markets/definitions.js';
import { DEFINITION_FIELDS, DEFINITION_SOURCES } from '../../query/market-definitions.js';

/** GET /v1/markets/{market_id}/changes: what changed in the market's definition, when, by which source. */

const FieldChange = z.object({
  from: z.unknown().describe("The field's value before (null: not set, or the source's first observation)"),
  to: z.unknown().describe("The field's value from `at` on (null: no longer set)"),
});

export const MarketDefinitionChange = z
  .object({
    at: z.string().meta({ format: 'date-time' }).describe('When the change was observed: the poll page it was first seen on (its receive time)'),
    source: z.enum(DEFINITION_SOURCES).describe('gamma: Gamma markets and events; clob: CLOB markets'),
    changes: z
      .partialRecord(z.enum(DEFINITION_FIELDS), FieldChange)
      .describe("Only the fields that changed; a source's first observation lists every field it sets, each from null"),
  })
  .meta({ id: 'MarketDefinitionChange' });

// Checked whole here (src/markets/definitions.ts): a cursor reaching the statement is one it can bind.
const cursorParam = z
  .string()
  .max(MAX_CHANGES_CURSOR)
  .transform((v, ctx) => {
    const c = decodeChangesCursor(v);
    if (c === null) {
      ctx.addIssue({ code: 'custom', message: 'Input should be a cursor from a Link: rel="next" URL of this endpoint' });
      return z.NEVER;
    }
    return c;
  })
  .meta({ type: 'string' });

const ChangesQuery = z
  .object({
    from: instantParam.optional().describe('Only changes at or after this instant (ISO 8601, or epoch seconds / milliseconds)'),
    to: instantParam.optional().describe('Only changes before this instant (exclusive)'),
    limit: queryInt({ min: 1, max: 1000, default: 100 }),
    cursor: cursorParam.optional().describe('Where the page starts: the opaque value of the Link: rel="next" URL'),
  })
  .superRefine((v, ctx) => checkWindow({ start: v.from, end: v.to }, ctx, ['from', 'to']));

export const marketChangesRoutes: Route[] = [
  defineRoute({
    method: 'get',
    path: '/v1/markets/:market_id/changes',
    cost: 'cheap',
    auth: 'key',
    tag: 'markets',
    summary:
      "A market's definition changes (tick size, active, closed, accepting orders, neg-risk, end date, resolution and winner, …) as the catalogue poller recorded them, oldest first; 404 for a market never polled",
    params: MarketPath,
    query: ChangesQuery,
    response: z.array(MarketDefinitionChange),
    paged: true,
    handler: getMarketChanges,
  }),
];

async function getMarketChanges({ params, query: q, req, res }: RouteInput<{ params: typeof MarketPath; query: typeof ChangesQuery }>, ctx: RequestContext) {
  const r = await ctx.markets.resolve(ctx.lake, params.market_id);
  const cid = typeof r.market.condition_id === 'string' ? r.market.condition_id : null;
  const page = await definitionChanges(ctx.lake, String(r.market.id), cid, { from: q.from, to: q.to, after: q.cursor, limit: q.limit });
  if (page.next) setNextLink(req, res, ctx.config, { cursor: encodeChangesCursor(page.next) });
  res.locals.rows = page.changes.length;
  return page.changes;
}
