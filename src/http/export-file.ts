import { pipeline } from 'node:stream/promises';
import { z } from 'zod';
import { contentDisposition } from '../downloads/disposition.js';
import { parseRange } from '../exports/range.js';
import { CONTENT_TYPES, type CopyFormat } from '../lake/stream.js';
import { ServiceError } from '../errors.js';
import { defineRoute, type Route, type RouteInput } from './route.js';
import type { AppContext } from './context.js';

/**
 * GET /v1/exports/{job_id}/file?expires=…&signature=…: the bytes of a finished export in the default (local)
 * store, for whoever holds the link that GET /v1/exports/{job_id}/url handed out — no API key, like an S3
 * presigned GET. The link is checked by ExportService.openLinked (src/exports/links.ts): forged, altered,
 * expired or another job's → 403; past retention → 410. Finished exports are re-usable links, so the answer
 * carries Content-Length, ETag and Last-Modified, and serves one byte range (206 / 416) to resume a download.
 */
const FileParams = z.object({ job_id: z.string().min(1).max(64) });
const FileQuery = z.object({
  expires: z.string().optional().describe('Unix time (seconds) after which the link is refused; covered by the signature'),
  signature: z.string().optional().describe('HMAC-SHA256 of the link, hex'),
});

export const exportFileRoutes: Route[] = [
  defineRoute({
    method: 'get',
    path: '/v1/exports/:job_id/file',
    cost: 'stream',
    auth: 'public',
    tag: 'Exports',
    summary: 'Download a finished export through the signed link from /v1/exports/{job_id}/url (no API key; Range supported)',
    params: FileParams,
    query: FileQuery,
    produces: ['application/vnd.apache.parquet', 'text/csv', 'application/json'],
    handler: getExportFile,
  }),
];

async function getExportFile({ query: q, params: { job_id }, req, res }: RouteInput<{ query: typeof FileQuery; params: typeof FileParams }>, ctx: AppContext) {
  const { job, object } = await ctx.exports.openLinked(job_id, q.expires, q.signature);
  let streaming = false;
  try {
    res.setHeader('Content-Type', CONTENT_TYPES[job.format as CopyFormat] ?? 'application/octet-stream');
    res.setHeader('Content-Disposition', contentDisposition(job.file_name));
    res.setHeader('Accept-Ranges', 'bytes');
    res.setHeader('ETag', object.etag);
    res.setHeader('Last-Modified', object.mtime.toUTCString());
    // The link is the credential: no shared cache may keep the file for others.
    res.setHeader('Cache-Control', 'private, no-cache');
    if (req.get('if-none-match') === object.etag) {
      res.status(304).end();
      return undefined;
    }
    const range = parseRange(req.get('range'), object.size, req.get('if-range'), object.etag);
    if (range === 'unsatisfiable') {
      throw new ServiceError('range_not_satisfiable', 'Range Not Satisfiable', { 'Content-Range': `bytes */${object.size}` });
    }
    const start = range?.start ?? 0;
    const end = range?.end ?? object.size - 1;
    const length = Math.max(0, end - start + 1);
    res.status(range ? 206 : 200);
    if (range) res.setHeader('Content-Range', `bytes ${start}-${end}/${object.size}`);
    res.setHeader('Content-Length', String(length));
    if (req.method === 'HEAD' || length === 0) {
      res.end();
      return undefined;
    }
    res.locals.bytes = length;
    streaming = true;
    // The read stream owns the file handle from here (closed when it ends or is destroyed).
    await pipeline(object.file.createReadStream({ start, end }), res).catch((err: NodeJS.ErrnoException) => {
      // A client that hangs up mid-file is not a server error.
      if (err.code !== 'ERR_STREAM_PREMATURE_CLOSE') req.log.warn({ err, export_job: job.id }, 'export file stream failed');
    });
    return undefined;
  } finally {
    if (!streaming) await object.file.close();
  }
}
