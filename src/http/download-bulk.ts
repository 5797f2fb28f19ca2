import { z } from 'zod';
import { BULK_KINDS } from '../catalogue/kinds.js';
import { sendBulk, type BulkItem } from '../downloads/bulk.js';
import { planDeps } from './download-send.js';
import { depthParam, intervalParam } from './download-files.js';
import { contentDisposition } from '../downloads/disposition.js';
import { SocketDelivery } from './delivery.js';
import { checkWindow, isoDateTime, timeframeParam } from './params.js';
import { defineRoute, type Route, type RouteInput } from './route.js';
import type { RequestContext } from './context.js';

/**
 * POST /v1/download/bulk: 1–25 line items, each mirroring one GET /v1/download/* call, streamed as one ZIP
 * with a manifest.json (src/downloads/bulk.ts). Every item is planned and metered before the headers, so an
 * invalid item or a refused pull is a proper error answer and nothing is charged.
 */
const BulkLine = z
  .object({
    kind: z.enum(BULK_KINDS),
    market_id: z.string().min(1).max(200).nullish(),
    series_id: z.string().min(1).max(128).nullish(),
    data_type: z.string().min(1).max(64).nullish(),
    timeframe: timeframeParam.nullish(),
    interval: intervalParam.nullish(),
    depth: depthParam.nullish(),
    instrument_prefix: z.string().min(1).max(64).nullish(),
    shape: z.enum(['raw', 'normalized']).default('raw'),
    start: isoDateTime.nullish(),
    end: isoDateTime.nullish(),
    format: z.enum(['csv', 'parquet', 'json']).default('csv'),
    limit: z.number().int().min(1).max(2_000_000).default(100_000),
  })
  .transform((v) => ({ ...v, start: v.start ?? undefined, end: v.end ?? undefined }))
  .superRefine((v, ctx) => checkWindow(v, ctx));

export const BulkBody = z.object({
  items: z
    .array(BulkLine.meta({ id: 'BulkDownloadItem' }))
    .min(1)
    .max(25),
});

export function bulkItem(it: z.infer<typeof BulkLine>): BulkItem {
  return {
    spec: {
      kind: it.kind,
      market_id: it.market_id ?? undefined,
      series_id: it.series_id ?? undefined,
      data_type: it.data_type ?? undefined,
      timeframe: (it.kind === 'book_snapshot_interval' ? it.interval : it.timeframe) ?? undefined,
      depth: it.depth ?? undefined,
      instrument_prefix: it.instrument_prefix ?? undefined,
      shape: it.shape,
      start: it.start,
      end: it.end,
      format: it.format,
      limit: it.limit,
    },
    // The manifest echoes each item as sent (nulls included); bulk.ts puts start, end and timeframe as text.
    echo: it,
  };
}

export const bulkDownloadRoute: Route = defineRoute({
  method: 'post',
  path: '/v1/download/bulk',
  cost: 'stream',
  auth: 'key',
  scope: 'download',
  limit: 'download',
  tag: 'Download',
  summary: 'Up to 25 downloads in one streamed ZIP with a manifest.json (item, rows, bytes, sha256)',
  body: BulkBody.meta({ id: 'BulkDownloadRequest' }),
  handler: sendBulkDownload,
});

async function sendBulkDownload({ body, req, res }: RouteInput<{ body: typeof BulkBody }>, ctx: RequestContext) {
  const r = await sendBulk({ ...planDeps(ctx), meter: ctx.meter, streams: ctx.streams }, req.principal!, body.items.map(bulkItem), {
    out: res,
    delivery: () => new SocketDelivery(res.socket!),
    begin() {
      res.status(200);
      res.setHeader('Content-Type', 'application/zip');
      res.setHeader('Content-Disposition', contentDisposition(`pmlake_bulk_${new Date().toISOString().replace(/[:.]/g, '-')}.zip`));
      res.setHeader('Cache-Control', 'no-store');
    },
  });
  if (r.error !== undefined) {
    req.log.error({ err: r.error }, 'bulk download failed');
    // Nothing written yet (the first COPY failed to start): still a proper error answer.
    if (!res.headersSent) throw r.error;
    res.destroy();
  } else if (r.complete) {
    res.locals.rows = r.rows;
    res.locals.bytes = r.bytes;
  }
  return undefined;
}
