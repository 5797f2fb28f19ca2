import { z } from 'zod';
import { EXPORT_KINDS } from '../catalogue/kinds.js';
import { findRawDataset } from '../downloads/catalog.js';
import type { PullSpec } from '../downloads/spec.js';
import type { ExportService } from '../exports/service.js';
import { getOwnExport, listExports, type ExportJobRow } from '../state/exports.js';
import type { AppContext, RequestContext } from './context.js';
import { Conflict, Gone, NotFound, Unprocessable } from '../errors.js';
import { isoDateTime, marketIdParam, timeframeParam } from './params.js';
import { defineRoute, type Route, type RouteInput } from './route.js';
import { exportFileRoutes } from './export-file.js';
import { depthParam, intervalParam } from './download-files.js';
import { jobView } from './export-view.js';
import { publicBase } from './public-url.js';

/**
 * /v1/exports: submit (202, the job itself), list ({data, meta}), poll, and a fresh signed link per call
 * ({data: {download_url, expires_in, …job}}). These are the wire shapes the anchor's client checks. The link
 * is the S3 store's presigned GET when PMLAKE_S3_ENDPOINT is set, else pmlake's own (./export-file.ts).
 * Another caller's job is answered exactly like an unknown one: 404 "Export job not found".
 */
export const CreateExport = z
  .object({
    kind: z.enum(EXPORT_KINDS),
    market_id: marketIdParam.max(128).nullish(),
    series_id: z.string().min(1).max(128).nullish(),
    timeframe: timeframeParam.nullish(),
    interval: intervalParam.nullish(),
    depth: depthParam.nullish(),
    shape: z.enum(['raw', 'normalized']).default('raw'),
    start: isoDateTime.nullish(),
    end: isoDateTime.nullish(),
    format: z.enum(['parquet', 'csv', 'json']).default('parquet'),
    idempotency_key: z.string().min(1).max(128).nullish(),
  })
  .superRefine((v, ctx) => {
    if (v.kind === 'raw' && !v.series_id) {
      ctx.addIssue({ code: 'custom', path: ['series_id'], message: "a raw export needs series_id, e.g. 'polymarket:l2-delta-tape'" });
    }
    if (v.kind !== 'raw' && !v.market_id) ctx.addIssue({ code: 'custom', path: ['market_id'], message: `a ${v.kind} export needs market_id` });
    if (v.kind !== 'raw' && v.series_id) ctx.addIssue({ code: 'custom', path: ['series_id'], message: `series_id does not apply to a ${v.kind} export` });
    if (v.start != null && v.end != null && v.end <= v.start) ctx.addIssue({ code: 'custom', path: ['end'], message: 'end must be after start' });
  });

const JobParams = z.object({ job_id: z.string().min(1).max(64) });
const ListQuery = z.object({ limit: z.coerce.number().int().min(1).max(200).default(50) });
const UrlQuery = z.object({ ttl: z.coerce.number().int().min(60).max(3600).default(300).describe('Signed-URL lifetime in seconds') });

function service(ctx: AppContext): ExportService {
  return ctx.exports;
}

/** The body of POST /v1/exports as a pull: no row cap; the raw tape's series id names the data set. */
export function exportSpec(b: z.infer<typeof CreateExport>): PullSpec {
  return {
    kind: b.kind,
    ...(b.market_id ? { market_id: b.market_id } : {}),
    ...(b.series_id ? { series_id: b.series_id } : {}),
    ...(b.timeframe ? { timeframe: b.timeframe } : {}),
    ...(b.kind === 'book_snapshot_interval' && b.interval ? { timeframe: b.interval } : {}),
    ...(b.depth != null ? { depth: b.depth } : {}),
    ...(b.kind === 'raw' ? { shape: b.shape } : {}),
    ...(b.start != null ? { start: b.start } : {}),
    ...(b.end != null ? { end: b.end } : {}),
    format: b.format,
    limit: null,
  };
}

async function ownJob(ctx: AppContext, userId: string, id: string): Promise<ExportJobRow> {
  const job = await getOwnExport(ctx.state, userId, id);
  if (!job) throw new NotFound('Export job not found');
  return service(ctx).refresh(job);
}

export const exportRoutes: Route[] = [
  defineRoute({
    method: 'post',
    path: '/v1/exports',
    cost: 'cheap',
    auth: 'key',
    scope: 'download',
    tag: 'Exports',
    summary: 'Submit an export job (202); the same idempotency_key returns the same job',
    body: CreateExport.meta({ id: 'CreateExportRequest' }),
    status: 202,
    handler: createExport,
  }),
  defineRoute({
    method: 'get',
    path: '/v1/exports',
    cost: 'cheap',
    auth: 'key',
    tag: 'Exports',
    summary: "The caller's export jobs, newest first",
    query: ListQuery,
    handler: getExports,
  }),
  defineRoute({
    method: 'get',
    path: '/v1/exports/:job_id',
    cost: 'cheap',
    auth: 'key',
    tag: 'Exports',
    summary: 'One export job: status, progress, record_count, size_bytes, error, timestamps',
    params: JobParams,
    handler: getExport,
  }),
  defineRoute({
    method: 'get',
    path: '/v1/exports/:job_id/url',
    cost: 'cheap',
    auth: 'key',
    tag: 'Exports',
    summary: 'A fresh signed GET link to a finished export (re-usable until it expires; no API key needed)',
    params: JobParams,
    query: UrlQuery,
    handler: getExportUrl,
  }),
  ...exportFileRoutes,
];

async function createExport({ body: b, req }: RouteInput<{ body: typeof CreateExport }>, ctx: RequestContext) {
  if (b.kind === 'raw') {
    if (!findRawDataset(b.series_id!)) {
      throw new Unprocessable([
        { loc: ['body', 'series_id'], msg: 'unknown raw series; see /v1/download/raw/datasets', type: 'value_error', input: b.series_id },
      ]);
    }
  }
  return jobView(await service(ctx).submit(ctx.lake, req.principal!, exportSpec(b), b.idempotency_key ?? undefined));
}

async function getExports({ query: { limit }, req }: RouteInput<{ query: typeof ListQuery }>, ctx: AppContext) {
  const data = await Promise.all((await listExports(ctx.state, req.principal!.userId, limit)).map(async (j) => jobView(await service(ctx).refresh(j))));
  return { data, meta: { count: data.length } };
}

async function getExport({ params, req }: RouteInput<{ params: typeof JobParams }>, ctx: AppContext) {
  return jobView(await ownJob(ctx, req.principal!.userId, params.job_id));
}

async function getExportUrl({ query: { ttl }, params, req }: RouteInput<{ query: typeof UrlQuery; params: typeof JobParams }>, ctx: AppContext) {
  const job = await ownJob(ctx, req.principal!.userId, params.job_id);
  if (job.status === 'expired') throw new Gone('Export has expired; submit it again');
  if (job.status !== 'succeeded') throw new Conflict(`Export is not ready (status: ${job.status})`);
  const url = await service(ctx).downloadUrl(job, ttl, publicBase(ctx.config, req));
  return { data: { ...jobView(job), download_url: url, expires_in: ttl, url_expires_at: new Date(Date.now() + ttl * 1000).toISOString() } };
}
