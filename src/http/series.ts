import { z } from 'zod';
import type { Route } from './route.js';
import type { AppContext } from './context.js';
import { StampedCache } from '../lake/stamp.js';
import { NotFound } from '../errors.js';
import { lakeSources, runOne, runQuery, type Row } from '../lake/runner.js';
import { seriesQuery } from '../query/series.js';
import { seriesRowsQuery } from '../query/estimate.js';
import { timeframeOf } from '../timeframe.js';
import { bytesFor, EstimateBody, pricingFor, SeriesEstimateResponse, type EstimateInput } from './estimates.js';

export const SeriesResponse = z
  .object({
    series_id: z.string(),
    broker: z.string(),
    broker_display: z.string(),
    asset_class: z.string(),
    category: z.string(),
    asset: z.string(),
    asset_symbol: z.string(),
    timeframe: z.string(),
    name: z.string(),
    description: z.string(),
    catalogued_markets: z.number().int().describe('Markets of the series in the catalogue'),
    shoppable_markets: z.number().int().describe('Of those, markets with trade or order-book data'),
    earliest: z.string().nullable(),
    latest: z.string().nullable(),
    data_current_through: z.string().nullable().describe('Date (UTC) of the newest data held for the series'),
    coming_soon: z.boolean(),
  })
  .meta({ id: 'SeriesResponse' });

const SeriesPath = z.object({ series_id: z.string().min(1).max(200) });

/** The venue this service archives: every series is one of its market families. */
const BROKER = 'polymarket';
const BROKER_DISPLAY = 'Polymarket';

function seriesOut(s: Row): Row {
  const latest = (s.latest as string | null) ?? null;
  return {
    series_id: String(s.series_id),
    broker: BROKER,
    broker_display: BROKER_DISPLAY,
    asset_class: (s.asset_class as string | null) ?? '',
    category: (s.category as string | null) ?? '',
    asset: (s.asset as string | null) ?? '',
    asset_symbol: (s.asset_symbol as string | null) ?? '',
    timeframe: (s.timeframe as string | null) ?? '',
    name: (s.name as string | null) ?? String(s.series_id),
    description: (s.description as string | null) ?? '',
    catalogued_markets: Number(s.catalogued_markets ?? 0),
    shoppable_markets: Number(s.shoppable_markets ?? 0),
    earliest: (s.earliest as string | null) ?? null,
    latest,
    data_current_through: latest ? latest.slice(0, 10) : null,
    coming_soon: false,
  };
}

/**
 * The series catalogue with its counts, computed once per lake stamp (src/lake/stamp.ts) and shared by the
 * list and the single-series routes: it joins the markets catalogue, so every call used to read both files.
 */
const catalogue = new StampedCache<{ list: Row[]; byId: Map<string, Row> }>({ maxEntries: 16 });

async function allSeries(ctx: AppContext): Promise<{ list: Row[]; byId: Map<string, Row> }> {
  const got = await catalogue.get(ctx.config.lakeDir, 'series', async () => {
    const list = (await runQuery(ctx.db, seriesQuery(lakeSources(ctx.config.lakeDir)))).map(seriesOut);
    return { list, byId: new Map(list.map((s) => [String(s.series_id), s])) };
  });
  return got.value;
}

async function oneSeries(ctx: AppContext, id: string): Promise<Row> {
  const s = (await allSeries(ctx)).byId.get(id);
  if (!s) throw new NotFound('Series not found');
  return s;
}

export const seriesRoutes: Route[] = [
  {
    method: 'get',
    path: '/v1/series',
    cost: 'cheap',
    auth: 'public',
    tag: 'series',
    summary: 'The series catalogue (no key needed)',
    response: z.array(SeriesResponse),
    handler: async (_req, res, ctx) => {
      const rows = (await allSeries(ctx)).list;
      res.locals.rows = rows.length;
      return rows;
    },
  },
  {
    method: 'get',
    path: '/v1/series/:series_id',
    cost: 'cheap',
    auth: 'public',
    tag: 'series',
    summary: 'One series (no key needed)',
    params: SeriesPath,
    response: SeriesResponse,
    handler: async (_req, res, ctx) => oneSeries(ctx, res.locals.params.series_id),
  },
  {
    method: 'post',
    path: '/v1/series/:series_id/estimate',
    cost: 'query',
    auth: 'public',
    tag: 'series',
    summary: 'Size of a pull over every market of a series (rows and bytes counted in the lake)',
    params: SeriesPath,
    body: EstimateBody,
    response: SeriesEstimateResponse,
    handler: async (req, res, ctx) => {
      const id = res.locals.params.series_id as string;
      await oneSeries(ctx, id);
      const b = res.locals.body as EstimateInput;
      const w = { start: b.start ?? undefined, end: b.end ?? undefined };
      const tf = b.data_type === 'ohlcv' ? (b.timeframe ?? timeframeOf(3600)) : undefined;
      const row = await runOne(ctx.db, seriesRowsQuery(lakeSources(ctx.config.lakeDir), b.data_type, id, w, tf));
      const rows = Number(row?.rows ?? 0);
      const bytes = await bytesFor(ctx, b.data_type, rows);
      return {
        series_id: id,
        data_type: b.data_type,
        markets_in_range: Number(row?.markets ?? 0),
        estimated_rows: rows,
        in_range: rows > 0,
        coming_soon: false,
        row_cap_applied: false,
        row_cap: null,
        ...(await pricingFor(ctx, b.data_type, bytes, req.principal)),
      };
    },
  },
];
