import type { Request, Response } from 'express';
import { z } from 'zod';
import { planOf, REFERENCE_RATE_PER_MB } from '../accounts/plans.js';
import { findRawDataset, rawDatasetsListing } from '../downloads/catalog.js';
import { sendBulk, BulkBody } from '../downloads/bulk.js';
import { planDownload, wrongDataType, type DownloadSpec } from '../downloads/plan.js';
import { sendCopy } from '../downloads/send.js';
import { lakeSources, runOne } from '../lake/runner.js';
import { rawEstimate } from '../query/downloads.js';
import type { AppContext } from './context.js';
import { checkWindow, isoDateTime, marketIdParam, timeframeParam } from './params.js';
import type { Route } from './route.js';

/**
 * /v1/download/*: files in csv, parquet or json, produced by DuckDB (`COPY … TO fifo`) and streamed with
 * back-pressure (src/lake/stream.ts, src/downloads/send.ts). Parameters, defaults and maxima follow the
 * anchor; every pull is metered (ctx.meter) and recorded in the caller's download history.
 */

const format = (dflt: 'csv' | 'json') => z.enum(['csv', 'parquet', 'json']).default(dflt).describe('Output format');
const optionalDate = isoDateTime.optional();
const rowLimit = (max: number, dflt: number) => z.coerce.number().int().min(1).max(max).default(dflt).describe('Max rows');

/** One market's rows in an optional window: the shape of the trades and order-book downloads. */
const marketWindowQuery = () =>
  z
    .object({
      market_id: marketIdParam,
      start: optionalDate,
      end: optionalDate,
      format: format('csv'),
      limit: rowLimit(1_000_000, 100_000),
    })
    .superRefine((v, ctx) => checkWindow(v, ctx));

const TradesQuery = marketWindowQuery();

const OhlcvQuery = z
  .object({
    market_id: marketIdParam,
    timeframe: timeframeParam.prefault('1h'),
    start: optionalDate,
    end: optionalDate,
    format: format('csv'),
    limit: rowLimit(2_000_000, 1_000_000),
  })
  .superRefine((v, ctx) => checkWindow(v, ctx));

const BookQuery = marketWindowQuery();

const TopOfBookQuery = z
  .object({
    market_id: marketIdParam,
    start: isoDateTime,
    end: isoDateTime,
    format: format('csv'),
    limit: rowLimit(1_000_000, 100_000),
  })
  .superRefine((v, ctx) => checkWindow(v, ctx));

const seriesId = z.string().min(1).max(128);
const instrumentPrefix = z.string().min(1).max(64).optional();

const OptionsQuery = z
  .object({
    series_id: seriesId.describe("Options series id, e.g. 'deribit:btc-options'"),
    start: optionalDate,
    end: optionalDate,
    format: format('csv'),
    data_type: z.enum(['trades', 'greeks', 'snapshots']).default('trades'),
    instrument_prefix: instrumentPrefix,
    limit: rowLimit(2_000_000, 500_000),
  })
  .superRefine((v, ctx) => checkWindow(v, ctx));

const SeriesQuery = z
  .object({
    series_id: seriesId,
    data_type: z.enum(['trades', 'snapshots', 'ohlcv']).default('trades'),
    timeframe: timeframeParam.optional(),
    start: optionalDate,
    end: optionalDate,
    format: format('csv'),
    instrument_prefix: instrumentPrefix,
    limit: rowLimit(2_000_000, 500_000),
  })
  .superRefine((v, ctx) => checkWindow(v, ctx));

const RawQuery = z
  .object({
    data_type: z.string().min(1).max(64).describe("Raw data set, e.g. 'polymarket_l2_deltas' (or its series id)"),
    market_id: marketIdParam.optional().describe('Optional: only frames of this market'),
    start: optionalDate,
    end: optionalDate,
    format: format('json'),
    shape: z.enum(['raw', 'normalized']).default('raw'),
    limit: rowLimit(2_000_000, 500_000),
  })
  .superRefine((v, ctx) => checkWindow(v, ctx));

const RawEstimateQuery = z
  .object({
    data_type: z.string().min(1).max(64),
    start: optionalDate,
    end: optionalDate,
    limit: rowLimit(2_000_000, 500_000),
  })
  .superRefine((v, ctx) => checkWindow(v, ctx));

async function download(req: Request, res: Response, ctx: AppContext, spec: DownloadSpec): Promise<undefined> {
  const plan = await planDownload(ctx, req.principal, spec);
  await sendCopy(req, res, ctx, {
    query: plan.query,
    format: plan.format,
    fileName: plan.fileName,
    emptyMessage: plan.emptyMessage,
    pull: {
      kind: 'download',
      dataset: plan.dataset,
      description: plan.description,
      // Unknown before the query runs; the meter reserves nothing and records the real bytes on commit.
      estimatedBytes: 0,
      marketId: plan.marketId,
      fileName: plan.fileName,
      timeframe: plan.timeframe,
      start: plan.start,
      end: plan.end,
    },
  });
  return undefined;
}

function fileRoute<S extends z.ZodType>(path: string, summary: string, q: S, toSpec: (v: z.infer<S>) => DownloadSpec): Route {
  return {
    method: 'get',
    path,
    cost: 'stream',
    auth: 'key',
    scope: 'download',
    limit: 'download',
    tag: 'Download',
    summary,
    query: q,
    handler: (req, res, ctx) => download(req, res, ctx, toSpec(res.locals.query as z.infer<S>)),
  };
}

type T<S extends z.ZodType> = z.infer<S>;

export const downloadRoutes: Route[] = [
  fileRoute('/v1/download/trades', 'Trades of a market as a file (both outcomes; a token id narrows to one)', TradesQuery, (v: T<typeof TradesQuery>) => ({
    kind: 'trades',
    ...v,
  })),
  fileRoute('/v1/download/ohlcv', 'OHLCV candles of a market at any timeframe as a file', OhlcvQuery, (v: T<typeof OhlcvQuery>) => ({ kind: 'ohlcv', ...v })),
  fileRoute('/v1/download/orderbook', 'Order-book snapshots of a market (rows keyed by condition id) as a file', BookQuery, (v: T<typeof BookQuery>) => ({
    kind: 'orderbook',
    ...v,
  })),
  fileRoute('/v1/download/top_of_book', 'Best bid/ask changes of a market as a file (Free plan: delayed)', TopOfBookQuery, (v: T<typeof TopOfBookQuery>) => ({
    kind: 'top_of_book',
    ...v,
  })),
  fileRoute('/v1/download/options', 'Crypto-options trades or per-trade Black-76 greeks as a file', OptionsQuery, (v: T<typeof OptionsQuery>) => ({
    kind: 'options',
    ...v,
  })),
  fileRoute('/v1/download/series', "A series' markets in one file (trades, ohlcv or book snapshots)", SeriesQuery, (v: T<typeof SeriesQuery>) => ({
    kind: 'series',
    ...v,
  })),
  {
    method: 'get',
    path: '/v1/download/raw/datasets',
    cost: 'cheap',
    auth: 'key',
    limit: 'download',
    tag: 'Download',
    summary: 'Catalogue of the raw tape data sets with time ranges and sizes',
    // One scan per lake stamp (src/downloads/catalog.ts); the route is 'cheap' because almost every call is a hit.
    handler: async (_req, _res, ctx) => rawDatasetsListing(ctx.db, ctx.config.lakeDir),
  },
  {
    method: 'get',
    path: '/v1/download/raw/estimate',
    cost: 'query',
    auth: 'key',
    limit: 'download',
    tag: 'Download',
    summary: 'Rows and bytes a raw pull would return (no charge, no download)',
    query: RawEstimateQuery,
    handler: async (req, res, ctx) => {
      const v = res.locals.query as T<typeof RawEstimateQuery>;
      const ds = findRawDataset(v.data_type);
      if (!ds) throw wrongDataType('unknown_raw_data_type', `unknown raw data_type '${v.data_type}'; see /v1/download/raw/datasets`);
      const r = await runOne(ctx.db, rawEstimate(lakeSources(ctx.config.lakeDir), ds.eventTypes, { start: v.start, end: v.end }));
      const rows = Number(r?.rows ?? 0);
      const capped = rows > v.limit;
      const outRows = Math.min(rows, v.limit);
      // JSON records {"recv_ts": <13 digits>, "frame": "<text>"}: about 30 bytes around each frame.
      const bytes = rows === 0 ? 0 : Math.round((Number(r?.frame_bytes ?? 0) / rows + 30) * outRows);
      const plan = planOf(req.principal?.plan ?? 'free');
      const mb = bytes / (1024 * 1024);
      const rate = REFERENCE_RATE_PER_MB.raw ?? 0;
      return {
        data_type: ds.data_type,
        series_id: ds.series_id,
        start: v.start === undefined ? null : new Date(Number(v.start / 1000n)).toISOString(),
        end: v.end === undefined ? null : new Date(Number(v.end / 1000n)).toISOString(),
        markets_in_range: null,
        estimated_rows: outRows,
        estimated_size_bytes: bytes,
        estimated_size_mb: Math.round(mb * 1000) / 1000,
        rate_per_mb: rate,
        estimated_cost_usd: Math.round(mb * rate * 100) / 100,
        row_cap: v.limit,
        row_cap_applied: capped,
        capped_by_limit: capped,
        pricing_model: 'subscription',
        included_in_plan: plan.datasets.includes('raw') ? plan.name : null,
        fair_use_share: plan.fair_use_bytes_month > 0 ? bytes / plan.fair_use_bytes_month : null,
        pricing_note: 'Included in the plan and counted against its monthly fair-use volume; the per-MB rate is a reference only.',
      };
    },
  },
  fileRoute('/v1/download/raw', 'Raw L2 tape: verbatim frames {recv_ts, frame} or flat per-level rows', RawQuery, (v: T<typeof RawQuery>) => ({
    kind: 'raw',
    ...v,
  })),
  {
    method: 'post',
    path: '/v1/download/bulk',
    cost: 'stream',
    auth: 'key',
    scope: 'download',
    limit: 'download',
    tag: 'Download',
    summary: 'Up to 25 downloads in one streamed ZIP with a manifest.json (item, rows, bytes, sha256)',
    body: BulkBody,
    handler: async (req, res, ctx) => {
      await sendBulk(req, res, ctx, res.locals.body as z.infer<typeof BulkBody>);
      return undefined;
    },
  },
];
