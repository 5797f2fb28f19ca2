import { z } from 'zod';
import { listPulls, type PullRow } from '../../state/pulls.js';
import { defineRoute, type Route, type RouteInput } from '../route.js';
import type { AppContext } from '../context.js';
import { DownloadHistoryResponse } from '../account-schemas.js';

/** GET /v1/user/downloads: the caller's download and export history. */

const DownloadsQuery = z.object({
  limit: z.coerce.number().int().min(1).max(500).default(50),
  offset: z.coerce.number().int().min(0).max(1_000_000).default(0),
  status: z
    .string()
    .regex(/^[a-z_]{1,32}$/)
    .nullish(),
});

/** DownloadHistoryResponse. */
function downloadView(p: PullRow) {
  return {
    id: p.id,
    market_id: p.market_id ?? '',
    data_type: p.dataset,
    format: p.format ?? '',
    file_name: p.file_name ?? '',
    record_count: p.rows,
    size_bytes: p.status === 'completed' ? p.bytes : p.status === 'pending' ? null : 0,
    // Pulls are included in the plan: nothing is charged per download.
    cost: 0,
    status: p.status,
    timeframe: p.timeframe,
    start_date: p.start_date,
    end_date: p.end_date,
    created_at: p.created_at,
    kind: p.kind,
    description: p.description,
    finished_at: p.finished_at,
  };
}

export const userHistoryRoutes: Route[] = [
  defineRoute({
    method: 'get',
    path: '/v1/user/downloads',
    cost: 'cheap',
    auth: 'key',
    tag: 'User',
    summary: 'Download history: every download and export with rows, bytes and status, newest first',
    query: DownloadsQuery,
    response: z.array(DownloadHistoryResponse),
    handler: listUserDownloads,
  }),
];

async function listUserDownloads({ query: q, req }: RouteInput<{ query: typeof DownloadsQuery }>, ctx: AppContext) {
  return (await listPulls(ctx.state, req.principal!.userId, { limit: q.limit, offset: q.offset, status: q.status ?? undefined })).map(downloadView);
}
