import { z } from 'zod';
import { planOf, REFERENCE_RATE_PER_MB } from '../accounts/plans.js';
import { findRawDataset, rawDatasetsListing } from '../downloads/catalog.js';
import { wrongDataType } from '../downloads/plan.js';
import { lakeSources, runOne } from '../lake/runner.js';
import { pullCoverage } from '../downloads/coverage.js';
import { rawEstimate } from '../query/downloads.js';
import { fileRoute, format, optionalDate, rowLimit } from './download-files.js';
import { checkWindow, marketIdParam } from './params.js';
import type { Route } from './route.js';

/** /v1/download/raw*: the raw tape — its catalogue, a free size estimate, and the file itself. */

const RawQuery = z
  .object({
    data_type: z.string().min(1).max(64).describe("Raw data set, e.g. 'polymarket_l2_deltas' (or its series id)"),
    market_id: marketIdParam.optional().describe('Optional: only frames of this market'),
    start: optionalDate,
    end: optionalDate,
    format: format('json'),
    shape: z
      .enum(['raw', 'normalized'])
      .default('raw')
      .describe(
        "'raw' = verbatim venue frames {recv_ts (epoch ms), frame}. 'normalized' (polymarket_l2_deltas, polymarket_trades) = flat rows; for the L2 tape the anchor's per-level depth rows (recv_ts in epoch ms, coin = token id, side, level = position in its message, price, size, n_orders = null: not given by the venue) then timestamp, market_id (condition id), is_snapshot, after_gap (first rows after a detected gap), hash, seq",
      ),
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

type T<S extends z.ZodType> = z.infer<S>;

export const rawDownloadRoutes: Route[] = [
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
        // The undivided frame tape spans every market: each day's worst token.
        coverage: await pullCoverage({ db: ctx.db, lakeDir: ctx.config.lakeDir }, { all: true }, { start: v.start, end: v.end }),
      };
    },
  },
  fileRoute('/v1/download/raw', 'Raw L2 tape: verbatim frames {recv_ts, frame} or flat per-level rows', RawQuery, (v: T<typeof RawQuery>) => ({
    kind: 'raw',
    ...v,
  })),
];
