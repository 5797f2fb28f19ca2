import { z } from 'zod';
import { defineRoute, type Route, type RouteInput } from './route.js';
import { BadRequest } from '../errors.js';
import { allSeries, oneSeries } from './series-catalogue.js';
import { parseOptionsSeries } from '../downloads/catalog.js';
import { optionsRowsQuery, seriesRowsQuery, type SeriesEstimateDataType } from '../query/estimate.js';
import { timeframeOf } from '../timeframe.js';
import { catalogueSeries } from '../markets/series-ids.js';
import { checkCatalogue } from '../downloads/plan.js';
import { venueRowsQuery } from '../query/series.js';
import type { RequestContext } from './context.js';
import type { Principal } from '../accounts/principal.js';
import { bytesFor, estimateCoverage, pricingFor, SeriesEstimateBody, SeriesEstimateResponse } from './estimates.js';
import type { PullCoverage } from '../downloads/coverage.js';

export const SeriesResponse = z
  .object({
    series_id: z.string(),
    broker: z.string(),
    broker_display: z.string(),
    asset_class: z.string(),
    category: z.string().meta({ default: '' }),
    asset: z.string(),
    asset_symbol: z.string(),
    timeframe: z.string(),
    name: z.string(),
    description: z.string(),
    catalogued_markets: z.number().int().describe('Markets of the series in the catalogue'),
    shoppable_markets: z.number().int().describe('Of those, markets with trade or order-book data'),
    earliest: z.string().meta({ format: 'date-time' }).nullable(),
    latest: z.string().meta({ format: 'date-time' }).nullable(),
    data_current_through: z.string().nullable().describe('Date (UTC) of the newest data held for the series'),
    coming_soon: z.boolean().meta({ default: false }),
  })
  .meta({ id: 'SeriesResponse' });

const SeriesPath = z.object({ series_id: z.string().min(1).max(200) });

export const seriesRoutes: Route[] = [
  defineRoute({
    method: 'get',
    path: '/v1/series',
    cost: 'cheap',
    auth: 'public',
    tag: 'series',
    summary: 'The series catalogue (no key needed)',
    response: z.array(SeriesResponse),
    handler: listSeries,
  }),
  defineRoute({
    method: 'get',
    path: '/v1/series/:series_id',
    cost: 'cheap',
    auth: 'public',
    tag: 'series',
    summary: 'One series (no key needed)',
    params: SeriesPath,
    response: SeriesResponse,
    handler: getSeries,
  }),
  defineRoute({
    method: 'post',
    path: '/v1/series/:series_id/estimate',
    cost: 'query',
    auth: 'public',
    tag: 'series',
    summary: 'Size of a pull over every market of a series (rows and bytes counted in the lake)',
    params: SeriesPath,
    body: SeriesEstimateBody.meta({ id: 'EstimateRequest' }),
    response: SeriesEstimateResponse,
    handler: estimateSeries,
  }),
];

async function listSeries({ res }: RouteInput, ctx: RequestContext) {
  const rows = (await allSeries(ctx)).list;
  res.locals.rows = rows.length;
  return rows;
}

async function getSeries({ params }: RouteInput<{ params: typeof SeriesPath }>, ctx: RequestContext) {
  return oneSeries(ctx, params.series_id);
}

async function estimateSeries({ params, body: b, req }: RouteInput<{ params: typeof SeriesPath; body: typeof SeriesEstimateBody }>, ctx: RequestContext) {
  const series = await oneSeries(ctx, params.series_id as string);
  const id = String(series.series_id);
  const w = { start: b.start ?? undefined, end: b.end ?? undefined };
  const lake = ctx.lake.sources;
  const cat = catalogueSeries(id);
  if (cat) {
    checkCatalogue(cat, b.data_type, b.data_type === 'ohlcv' ? b.timeframe?.seconds : undefined);
    const tf = timeframeOf(cat.timeframeSeconds ?? 3600);
    const r = await ctx.lake.one(venueRowsQuery(lake, cat.dataType, w, tf));
    return estimateOut(ctx, req.principal, id, b.data_type, Number(r?.rows ?? 0), Number(r?.markets ?? 0));
  }
  if (series.asset_class === 'raw') throw new BadRequest(`'${id}' is a raw tape series; size it with /v1/download/raw/estimate`);
  let row;
  // Options rows are priced as the options data set whatever the type (its trades and greeks are one row per trade).
  let priced: SeriesEstimateDataType = b.data_type;
  if (series.asset_class === 'options') {
    // The options data set holds trades only: greeks are derived per trade; no book or ticker is captured.
    if (b.data_type !== 'trades' && b.data_type !== 'greeks') {
      throw new BadRequest({
        code: 'options_data_type_unavailable',
        message: `data_type '${b.data_type}' is not captured for ${id}; use trades or greeks`,
      });
    }
    row = await ctx.lake.one(optionsRowsQuery(lake, parseOptionsSeries(id)!, w));
    priced = 'greeks';
  } else {
    // The anchor: "greeks is only valid for crypto-options series … the estimator rejects it for Polymarket".
    if (b.data_type === 'greeks') {
      throw new BadRequest({
        code: 'wrong_data_type',
        message: `greeks exist only for crypto-options series (e.g. deribit:btc-options); '${id}' is not one`,
      });
    }
    const tf = b.data_type === 'ohlcv' ? (b.timeframe ?? timeframeOf(3600)) : undefined;
    row = await ctx.lake.one(seriesRowsQuery(lake, b.data_type, id, w, tf));
  }
  // Options come from another venue's trades; a market series' book data is the tape of its markets' tokens.
  const coverage = series.asset_class === 'options' ? null : await estimateCoverage(ctx, b.data_type, { seriesId: id }, w);
  return estimateOut(ctx, req.principal, id, priced, Number(row?.rows ?? 0), Number(row?.markets ?? 0), b.data_type, coverage);
}

/** The EstimateResponse of a series pull of `rows` rows over `markets` markets, priced as `priced`. */
async function estimateOut(
  ctx: RequestContext,
  principal: Principal | undefined,
  id: string,
  priced: SeriesEstimateDataType,
  rows: number,
  markets: number,
  dataType: string = priced,
  coverage: PullCoverage | null = null,
) {
  const bytes = await bytesFor(ctx, priced, rows);
  return {
    series_id: id,
    data_type: dataType,
    markets_in_range: markets,
    estimated_rows: rows,
    in_range: rows > 0,
    coming_soon: false,
    row_cap_applied: false,
    row_cap: null,
    ...(await pricingFor(ctx, priced, bytes, principal)),
    coverage,
  };
}
