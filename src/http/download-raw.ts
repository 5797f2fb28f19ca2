import { z } from 'zod';
import { planOf, REFERENCE_RATE_PER_MB } from '../accounts/plans.js';
import { findRawDataset, rawDatasetsListing } from '../downloads/catalog.js';
import { planDownload } from '../downloads/plan.js';
import type { DatasetName } from '../lake/layout.js';
import { pullCoverage } from '../downloads/coverage.js';
import { pullRowsQuery } from '../query/downloads.js';
import { planDeps } from './download-send.js';
import { fileRoute, format, optionalDate, rowLimit } from './download-files.js';
import { checkWindow, marketIdParam } from './params.js';
import { defineRoute, type Route, type RouteInput } from './route.js';
import type { RequestContext } from './context.js';

/** /v1/download/raw*: the raw tape — its catalogue, a free size estimate, and the file itself. */

/** What selects a raw pull's rows: the download and its estimate take the same ones (the download adds format). */
const rawSelectors = {
  data_type: z.string().min(1).max(64).describe("Raw data set, e.g. 'polymarket_l2_deltas' (or its series id)"),
  market_id: marketIdParam.optional().describe('Optional: only frames of this market'),
  start: optionalDate,
  end: optionalDate,
  shape: z
    .enum(['raw', 'normalized'])
    .default('raw')
    .describe(
      "'raw' = verbatim venue frames {recv_ts (epoch ms), frame}. 'normalized' (polymarket_l2_deltas, polymarket_trades) = flat rows; for the L2 tape the anchor's per-level depth rows (recv_ts in epoch ms, coin = token id, side, level = position in its message, price, size, n_orders = null: not given by the venue) then timestamp, market_id (condition id), is_snapshot, after_gap (first rows after a detected gap), hash, seq",
    ),
  limit: rowLimit(2_000_000, 500_000),
};

const RawQuery = z.object({ ...rawSelectors, format: format('json') }).superRefine((v, ctx) => checkWindow(v, ctx));

const RawEstimateQuery = z.object(rawSelectors).superRefine((v, ctx) => checkWindow(v, ctx));

type T<S extends z.ZodType> = z.infer<S>;

export const rawDownloadRoutes: Route[] = [
  defineRoute({
    method: 'get',
    path: '/v1/download/raw/datasets',
    cost: 'cheap',
    auth: 'key',
    limit: 'download',
    tag: 'Download',
    summary: 'Catalogue of the raw tape data sets with time ranges and sizes',
    // One scan per lake stamp (src/downloads/catalog.ts); the route is 'cheap' because almost every call is a hit.
    handler: listRawDatasets,
  }),
  defineRoute({
    method: 'get',
    path: '/v1/download/raw/estimate',
    cost: 'query',
    auth: 'key',
    limit: 'download',
    tag: 'Download',
    summary: 'Rows and bytes a raw pull would return (no charge, no download)',
    query: RawEstimateQuery,
    handler: estimateRawDownload,
  }),
  fileRoute('/v1/download/raw', 'Raw L2 tape: verbatim frames {recv_ts, frame} or flat per-level rows', RawQuery, (v: T<typeof RawQuery>) => ({
    kind: 'raw',
    ...v,
  })),
];

async function listRawDatasets(_input: RouteInput, ctx: RequestContext) {
  return rawDatasetsListing(ctx.lake);
}

async function estimateRawDownload({ query: v, req }: RouteInput<{ query: typeof RawEstimateQuery }>, ctx: RequestContext) {
  // The download's own plan (same refusals: unknown data type or market, shape not offered) without its row
  // cap: the rows counted are the ones it would send, for one market as for the whole venue.
  const pull = await planDownload(planDeps(ctx), req.principal, { kind: 'raw', ...v, format: 'json', limit: null });
  const ds = findRawDataset(v.data_type)!;
  const r = await ctx.lake.one(pullRowsQuery(pull.query, v.shape === 'raw' ? 'frame' : undefined));
  const rows = Number(r?.rows ?? 0);
  const capped = rows > v.limit;
  const outRows = Math.min(rows, v.limit);
  // Frames: JSON records {"recv_ts": <13 digits>, "frame": "<text>"}, about 30 bytes around each frame. Flat
  // rows: what the data set stores per row, as the market estimates price them.
  let bytes = 0;
  if (v.shape === 'normalized') {
    const flat: DatasetName = ds.normalized === 'last_trades' ? 'last_trades' : 'l2';
    bytes = Math.round(outRows * (await ctx.lake.bytesPerRow(flat)));
  } else if (rows > 0) bytes = Math.round((Number(r?.text_bytes ?? 0) / rows + 30) * outRows);
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
    // The market's tokens, or for the undivided tape every market: each day's worst token.
    coverage: await pullCoverage(ctx.lake, pull.coverage?.scope ?? { all: true }, { start: v.start, end: v.end }),
  };
}
