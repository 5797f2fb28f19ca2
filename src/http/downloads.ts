import { bulkDownloadRoute } from './download-bulk.js';
import { fileDownloadRoutes } from './download-files.js';
import { rawDownloadRoutes } from './download-raw.js';
import type { Route } from './route.js';

/**
 * /v1/download/*: files in csv, parquet or json, produced by DuckDB (`COPY … TO fifo`) and streamed with
 * back-pressure (src/lake/stream.ts, src/downloads/send.ts). Every pull is metered (ctx.meter) and recorded
 * in the caller's download history. One file per sub-resource: market and series files
 * (./download-files.ts), the raw tape (./download-raw.ts), bulk ZIPs (./download-bulk.ts).
 */
export const downloadRoutes: Route[] = [...fileDownloadRoutes, ...rawDownloadRoutes, bulkDownloadRoute];
