import { z } from 'zod';
import { defineRoute, type Route, type RouteInput } from '../route.js';
import type { RequestContext } from '../context.js';
import { HOME_CSP, homePage } from '../pages/home.js';
import { LANDED_SOURCES, type LakeVersion } from '../../lake/versions.js';

/**
 * GET / and GET /v1/status: what uptime probes and a status page call. The anchor documents no shape for either
 * (its root is "service name and version", its status a "curated public system status"), so these say only what
 * pmlake knows without a scan: that it answers, and which lake version it serves. A browser at / (it asks for
 * text/html first) gets a home page linking the same documents (src/http/pages/home.ts).
 */

/** The service's API version, as /health reports it. */
export const API_VERSION = '1.0.0';

/** The root's JSON, exactly as API clients have always had it. */
const ROOT = { name: 'pmlake', version: API_VERSION, docs: '/docs', openapi: '/v1/openapi.json', health: '/health', status: '/v1/status' };

const RootResponse = z
  .object({
    name: z.string(),
    version: z.string(),
    docs: z.string(),
    openapi: z.string(),
    health: z.string(),
    status: z.string(),
  })
  .meta({ id: 'RootResponse' });

const StatusResponse = z
  .object({
    status: z.enum(['operational', 'no_data']).describe('operational when the lake version served holds a market catalogue; no_data before the first ingest'),
    version: z.string(),
    components: z.array(
      z.object({
        name: z.enum(['api', 'lake']),
        status: z.enum(['operational', 'no_data']),
      }),
    ),
    lake_version: z.number().int().describe('The lake version this request read (0: none published yet)'),
    lake_published_at: z.string().meta({ format: 'date-time' }).nullable(),
    sources: z
      .array(
        z.object({
          name: z.enum(LANDED_SOURCES).describe('tape: the venue market channel as recorded and landed'),
          newest_landed_at: z
            .string()
            .meta({ format: 'date-time' })
            .nullable()
            .describe('The newest receive time this source has in the lake version served (null: none landed, or landed before it was recorded)'),
          lag_seconds: z.number().nullable().describe('checked_at minus newest_landed_at, in seconds'),
        }),
      )
      .describe('Freshness of each input the lake is fed from'),
    checked_at: z.string().meta({ format: 'date-time' }),
  })
  .meta({ id: 'StatusResponse' });

/** Read from the served version's manifest, where the ingest recorded it when it published: no scan per request. */
function freshness(lake: LakeVersion, now: number) {
  const landed = lake.manifest.landed_to ?? {};
  // Only the sources some ingest has landed; the tape is always listed, it is what the service is for.
  return LANDED_SOURCES.filter((s) => s === 'tape' || landed[s] !== undefined).map((name) => {
    const at = landed[name] ?? null;
    return { name, newest_landed_at: at, lag_seconds: at === null ? null : Math.max(0, (now - Date.parse(at)) / 1000) };
  });
}

export const statusRoutes: Route[] = [
  defineRoute({
    method: 'get',
    path: '/',
    cost: 'cheap',
    auth: 'public',
    // Like /health and /v1/stats (and the anchor's client says so of its root): a probe is never rate limited.
    limit: 'none',
    tag: 'System',
    summary: 'Service name and version, and where its documents are (a browser asking for text/html gets a home page linking them)',
    response: RootResponse,
    produces: ['text/html'],
    handler: getRoot,
  }),
  defineRoute({
    method: 'get',
    path: '/v1/status',
    cost: 'cheap',
    auth: 'public',
    // The spec rate-limits anonymous callers per IP (lines 173, 204); a status page polls well under 60 a minute.
    tag: 'System',
    summary: 'Public system status: the API and the lake version it serves (no key needed)',
    response: StatusResponse,
    handler: getStatus,
  }),
];

async function getRoot({ req, res }: RouteInput, ctx: RequestContext) {
  res.vary('Accept');
  // HTML only when the client ranks it above JSON, as a browser's Accept does; */*, application/json, an
  // unrelated type or no Accept at all keep the JSON (a tie that the client's list leaves open goes to JSON).
  if (req.accepts(['application/json', 'text/html']) !== 'text/html') return ROOT;
  const lake = ctx.lake.version;
  res.setHeader('Content-Type', 'text/html; charset=utf-8');
  res.setHeader('Content-Security-Policy', HOME_CSP);
  res.send(homePage(API_VERSION, { ...ROOT, charts: '/charts' }, { version: lake.version, publishedAt: lake.publishedAt }));
  return undefined;
}

async function getStatus(_input: RouteInput, ctx: RequestContext) {
  const lake = ctx.lake.version;
  const now = Date.now();
  const lakeStatus = lake.hasFiles('markets') ? 'operational' : 'no_data';
  return {
    status: lakeStatus,
    version: API_VERSION,
    components: [
      { name: 'api', status: 'operational' },
      { name: 'lake', status: lakeStatus },
    ],
    lake_version: lake.version,
    lake_published_at: lake.publishedAt,
    sources: freshness(lake, now),
    checked_at: new Date(now).toISOString(),
  };
}
