import { z } from 'zod';
import { OPTIONS_DOWNLOAD_KINDS, SERIES_DOWNLOAD_KINDS } from '../catalogue/kinds.js';
import type { PullSpec } from '../downloads/spec.js';
import { sendDownload } from './download-send.js';
import { checkWindow, isoDateTime, marketIdParam, timeframeParam } from './params.js';
import { defineRoute, type Route, type RouteInput } from './route.js';
import type { RequestContext } from './context.js';

/**
 * GET /v1/download/{trades,ohlcv,orderbook,top_of_book,options,series}: one market's or series' rows as a
 * file. Parameters, defaults and maxima follow the anchor; each query is parsed here, once, into a PullSpec.
 */

export const format = (dflt: 'csv' | 'json') =>
  z
    .enum(['csv', 'parquet', 'json'])
    .default(dflt)
    .describe(
      'Output format. Every format holds the same rows in the same order, oldest first; csv and json write timestamps as the JSON endpoints do (ISO 8601 UTC: whole seconds for trades and OHLCV, milliseconds for venue-clock data: books, the tape, options), parquet as TIMESTAMP',
    );
export const optionalDate = isoDateTime.optional();
export const rowLimit = (max: number, dflt: number) => z.coerce.number().int().min(1).max(max).default(dflt).describe('Max rows');

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

/** A window of one market's tape, as a file: top of book, and the computed kinds built on it. */
const tapeWindow = {
  start: isoDateTime,
  end: isoDateTime,
  format: format('csv'),
  limit: rowLimit(1_000_000, 100_000),
};

const TopOfBookQuery = z.object({ market_id: marketIdParam, ...tapeWindow }).superRefine((v, ctx) => checkWindow(v, ctx));

/** The computed kinds' parameters (src/query/computed.ts), shared by their GET routes, bulk items and exports. */
export const intervalParam = timeframeParam.describe(
  'Interval between book snapshots, in the OHLCV timeframe vocabulary (1s, 10s, 1m, 5m, 1h, …; 1s to 4w); boundaries are aligned to it from 1970-01-01 UTC',
);
export const depthParam = z.coerce.number().int().min(1).max(100).describe('Levels a side in each snapshot, best first (1–100)');

const IntervalBookQuery = z
  .object({ market_id: marketIdParam, interval: intervalParam.prefault('1m'), depth: depthParam.default(10), ...tapeWindow })
  .superRefine((v, ctx) => checkWindow(v, ctx));

/** tbbo takes what a top-of-book file takes. */
const TbboQuery = TopOfBookQuery;

const seriesId = z.string().min(1).max(128);
const instrumentPrefix = z.string().min(1).max(64).optional();

const OptionsQuery = z
  .object({
    series_id: seriesId.describe("Options series id, e.g. 'deribit:btc-options'"),
    start: optionalDate,
    end: optionalDate,
    format: format('csv'),
    data_type: z.enum(OPTIONS_DOWNLOAD_KINDS).default('trades'),
    instrument_prefix: instrumentPrefix,
    limit: rowLimit(2_000_000, 500_000),
  })
  .superRefine((v, ctx) => checkWindow(v, ctx));

const SeriesQuery = z
  .object({
    series_id: seriesId,
    data_type: z.enum(SERIES_DOWNLOAD_KINDS).default('trades'),
    timeframe: timeframeParam.optional(),
    start: optionalDate,
    end: optionalDate,
    format: format('csv'),
    instrument_prefix: instrumentPrefix,
    limit: rowLimit(2_000_000, 500_000),
  })
  .superRefine((v, ctx) => checkWindow(v, ctx));

/** A GET route whose validated query becomes one PullSpec, streamed as a file. */
export function fileRoute<S extends z.ZodType>(path: string, summary: string, q: S, toSpec: (v: z.infer<S>) => PullSpec): Route {
  async function sendFile({ query, req, res }: RouteInput<{ query: S }>, ctx: RequestContext): Promise<unknown> {
    return sendDownload(req, res, ctx, toSpec(query));
  }
  return defineRoute({
    method: 'get',
    path,
    cost: 'stream',
    auth: 'key',
    scope: 'download',
    limit: 'download',
    tag: 'Download',
    summary,
    query: q,
    handler: sendFile,
  });
}

type T<S extends z.ZodType> = z.infer<S>;

export const fileDownloadRoutes: Route[] = [
  fileRoute(
    '/v1/download/trades',
    'Trades of a market as a file: each outcome oldest first, outcome by outcome (a token id narrows to one)',
    TradesQuery,
    (v: T<typeof TradesQuery>) => ({
      kind: 'trades',
      ...v,
    }),
  ),
  fileRoute(
    '/v1/download/ohlcv',
    'OHLCV candles of a market at any timeframe as a file, oldest first, every outcome (a token id narrows to one)',
    OhlcvQuery,
    (v: T<typeof OhlcvQuery>) => ({ kind: 'ohlcv', ...v }),
  ),
  fileRoute('/v1/download/orderbook', 'Order-book snapshots of a market (rows keyed by condition id) as a file', BookQuery, (v: T<typeof BookQuery>) => ({
    kind: 'orderbook',
    ...v,
  })),
  fileRoute('/v1/download/top_of_book', 'Best bid/ask changes of a market as a file (Free plan: delayed)', TopOfBookQuery, (v: T<typeof TopOfBookQuery>) => ({
    kind: 'top_of_book',
    ...v,
  })),
  fileRoute(
    '/v1/download/book_snapshot_interval',
    'The order book of every outcome at each interval boundary of a window, to a depth, as a file (computed from the tape)',
    IntervalBookQuery,
    ({ interval, ...v }: T<typeof IntervalBookQuery>) => ({ kind: 'book_snapshot_interval', timeframe: interval, ...v }),
  ),
  fileRoute(
    '/v1/download/tbbo',
    "Every venue trade print of a market with the best bid and ask in force just before it (Databento's TBBO), as a file",
    TbboQuery,
    (v: T<typeof TbboQuery>) => ({ kind: 'tbbo', ...v }),
  ),
  fileRoute('/v1/download/options', 'Crypto-options trades or per-trade Black-76 greeks as a file', OptionsQuery, (v: T<typeof OptionsQuery>) => ({
    kind: 'options',
    ...v,
  })),
  fileRoute('/v1/download/series', "A series' markets in one file (trades, ohlcv or book snapshots)", SeriesQuery, (v: T<typeof SeriesQuery>) => ({
    kind: 'series',
    ...v,
  })),
];
