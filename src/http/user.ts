import { z } from 'zod';
import { entitlementOf } from '../accounts/entitlements.js';
import { fairUseStatus } from '../accounts/fairuse.js';
import { REFERENCE_RATE_PER_MB } from '../accounts/plans.js';
import { requestCounterFor } from '../accounts/requests.js';
import { getKey, listKeys, provisionKey, revokeKey, rotateKey } from '../state/accounts.js';
import { dailyPullTotals, listPulls, type PullRow } from '../state/pulls.js';
import type { ApiKeyRow } from '../state/store.js';
import { dailyRequestCounts, requestCountsByKey } from '../state/usage.js';
import { Forbidden, NotFound, Unauthorized } from '../errors.js';
import type { Route } from './route.js';
import { ApiKeyCreatedResponse, ApiKeyResponse, DownloadHistoryResponse, UsageResponse } from './account-schemas.js';

/** /v1/user/*: profile, API keys, usage and download history. Shapes follow the anchor's User schemas. */

const MB = 1024 * 1024;
const DAY_MS = 86_400_000;

const KeyIdParams = z.object({ key_id: z.string().regex(/^[A-Za-z0-9_-]{1,64}$/, 'not a key id') });

const CreateKeyBody = z.object({
  name: z.string().min(1).max(100),
  notify_email: z.boolean().optional(),
  expires_in_days: z.number().int().min(1).max(365).nullish(),
  // A closed set, non-empty: scopes can only narrow a key's power.
  scopes: z
    .array(z.enum(['read', 'download']))
    .min(1)
    .max(2)
    .nullish(),
});

const ProvisionBody = z.object({
  email: z.string().min(3).max(320),
  name: z.string().min(1).max(100).default('Default'),
});

const UsageQuery = z.object({
  start_date: z.iso.date().nullish(),
  end_date: z.iso.date().nullish(),
});

const DownloadsQuery = z.object({
  limit: z.coerce.number().int().min(1).max(500).default(50),
  offset: z.coerce.number().int().min(0).max(1_000_000).default(0),
  status: z
    .string()
    .regex(/^[a-z_]{1,32}$/)
    .nullish(),
});

function scopesOf(row: ApiKeyRow): string[] {
  return row.scopes.split(',').filter(Boolean);
}

/** ApiKeyResponse: never the hash, never the plaintext. */
export function keyView(row: ApiKeyRow) {
  return {
    id: row.id,
    name: row.name,
    key_prefix: row.key_prefix,
    created_at: row.created_at,
    last_used_at: row.last_used_at,
    scheduled_revoke_at: row.scheduled_revoke_at ?? null,
    expires_at: row.expires_at,
    permissions: scopesOf(row),
  };
}

function createdView(row: ApiKeyRow, plaintext: string) {
  return {
    id: row.id,
    name: row.name,
    key: plaintext,
    key_prefix: row.key_prefix,
    created_at: row.created_at,
    expires_at: row.expires_at,
    permissions: scopesOf(row),
  };
}

/** DownloadHistoryResponse. */
export function downloadView(p: PullRow) {
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

export const userRoutes: Route[] = [
  {
    method: 'get',
    path: '/v1/user/me',
    cost: 'cheap',
    auth: 'key',
    tag: 'User',
    summary: 'The caller: user, plan, credential, permissions, limits',
    handler: async (req, _res, ctx) => {
      const p = req.principal!;
      const user = ctx.state.getUser(p.userId);
      if (!user) throw new Unauthorized();
      const ent = entitlementOf(ctx.state, user);
      const key = p.keyId ? getKey(ctx.state, p.userId, p.keyId) : undefined;
      return {
        id: user.id,
        user_id: user.id,
        email: user.email,
        created_at: user.created_at,
        plan: ent.plan.id,
        plan_name: ent.plan.name,
        auth_method: p.authMethod ?? (p.keyId ? 'api_key' : 'jwt'),
        key_id: key?.id ?? null,
        key_name: key?.name ?? null,
        key_prefix: key?.key_prefix ?? null,
        permissions: [...p.scopes],
        rate_limit: {
          requests_per_minute: ent.plan.requests_per_minute,
          downloads_per_hour: ent.plan.downloads_per_hour,
          downloads_per_minute: ent.plan.downloads_per_minute,
        },
        subscription: ent.subscription
          ? {
              tier: ent.subscription.tier,
              status: ent.subscription.status,
              current_period_end: ent.subscription.current_period_end,
              cancel_at_period_end: ent.subscription.cancel_at_period_end === 1,
            }
          : null,
        fair_use: fairUseStatus(ctx.state, user.id),
      };
    },
  },
  {
    method: 'get',
    path: '/v1/user/keys',
    cost: 'cheap',
    auth: 'key',
    tag: 'User',
    summary: 'List API keys (prefix only; the plaintext is shown once, at creation)',
    response: z.array(ApiKeyResponse),
    handler: async (req, _res, ctx) => listKeys(ctx.state, req.principal!.userId).map(keyView),
  },
  {
    method: 'post',
    path: '/v1/user/keys',
    cost: 'cheap',
    auth: 'key',
    tag: 'User',
    summary: 'Create an API key',
    body: CreateKeyBody,
    status: 201,
    response: ApiKeyCreatedResponse,
    handler: async (req, res, ctx) => {
      const body = res.locals.body as z.infer<typeof CreateKeyBody>;
      const p = req.principal!;
      const scopes = [...new Set(body.scopes ?? p.scopes)];
      // Scopes only narrow: a read-only key cannot mint a download key.
      const wider = scopes.filter((s) => !p.scopes.includes(s));
      if (wider.length > 0) throw new Forbidden(`A key cannot grant scopes it lacks: ${wider.join(', ')}`);
      const expiresAt = body.expires_in_days ? new Date(Date.now() + body.expires_in_days * DAY_MS).toISOString() : null;
      const { row, plaintext } = ctx.state.createApiKey({ userId: p.userId, name: body.name, prefix: ctx.config.keyPrefix, scopes, expiresAt });
      req.log.info({ key_id: row.id, user: p.userId }, 'api key created');
      return createdView(row, plaintext);
    },
  },
  {
    method: 'delete',
    path: '/v1/user/keys/:key_id',
    cost: 'cheap',
    auth: 'key',
    tag: 'User',
    summary: 'Revoke an API key (effective on the very next request)',
    params: KeyIdParams,
    handler: async (req, res, ctx) => {
      const { key_id } = res.locals.params as z.infer<typeof KeyIdParams>;
      const row = revokeKey(ctx.state, req.principal!.userId, key_id);
      if (!row) throw new NotFound('API key not found');
      req.log.info({ key_id, user: req.principal!.userId }, 'api key revoked');
      return { id: row.id, status: 'revoked', revoked_at: row.revoked_at };
    },
  },
  {
    method: 'post',
    path: '/v1/user/keys/:key_id/rotate',
    cost: 'cheap',
    auth: 'key',
    tag: 'User',
    summary: 'Rotate an API key: a new key now, the old one stops after a 7-day grace window',
    params: KeyIdParams,
    response: ApiKeyCreatedResponse,
    handler: async (req, res, ctx) => {
      const { key_id } = res.locals.params as z.infer<typeof KeyIdParams>;
      const out = rotateKey(ctx.state, req.principal!.userId, key_id, ctx.config.keyPrefix);
      if (!out) throw new NotFound('API key not found');
      req.log.info({ key_id, new_key_id: out.row.id }, 'api key rotated');
      return { ...createdView(out.row, out.plaintext), rotated_from: key_id, old_key_revokes_at: out.old.scheduled_revoke_at };
    },
  },
  {
    method: 'post',
    path: '/v1/user/provision',
    cost: 'cheap',
    auth: 'key',
    credentials: 'jwt',
    tag: 'User',
    summary: "Dashboard login: replace the user's auto-provisioned key (bearer JWT only; email must match the token)",
    body: ProvisionBody,
    response: ApiKeyCreatedResponse,
    handler: async (req, res, ctx) => {
      const body = res.locals.body as z.infer<typeof ProvisionBody>;
      const p = req.principal!;
      // Only the identity provider's token may do this: an API key must not mint keys by email.
      if (p.authMethod !== 'jwt') throw new Forbidden('This endpoint needs the dashboard bearer token');
      if (body.email.trim().toLowerCase() !== p.email) throw new Forbidden("The email does not match the token's email claim");
      const { row, plaintext } = provisionKey(ctx.state, p.userId, body.name, ctx.config.keyPrefix);
      req.log.info({ key_id: row.id, user: p.userId }, 'api key provisioned');
      return createdView(row, plaintext);
    },
  },
  {
    method: 'get',
    path: '/v1/user/usage',
    cost: 'cheap',
    auth: 'key',
    tag: 'User',
    summary: 'Usage: requests, bytes and MB over a period (default: the current fair-use month), per day',
    query: UsageQuery,
    response: UsageResponse,
    handler: async (req, res, ctx) => {
      const q = res.locals.query as z.infer<typeof UsageQuery>;
      const p = req.principal!;
      const user = ctx.state.getUser(p.userId);
      if (!user) throw new Unauthorized();
      const ent = entitlementOf(ctx.state, user);
      const start = q.start_date ? new Date(`${q.start_date}T00:00:00Z`) : ent.period.start;
      // end_date is inclusive (a whole day); the default ends with the fair-use period.
      const end = q.end_date ? new Date(Date.parse(`${q.end_date}T00:00:00Z`) + DAY_MS) : ent.period.end;
      // Include this very minute's requests, not only the last flushed batch.
      requestCounterFor(ctx.state).flush();
      const [fromDay, toDay] = [start.toISOString().slice(0, 10), new Date(end.getTime() - 1).toISOString().slice(0, 10)];
      const reqs = dailyRequestCounts(ctx.state, user.id, fromDay, toDay);
      const pulls = dailyPullTotals(ctx.state, user.id, start, end);
      const days = new Map<string, { date: string; requests: number; bytes: number; mb: number; downloads: number; estimated_cost: number }>();
      const day = (d: string) => {
        let e = days.get(d);
        if (!e) days.set(d, (e = { date: d, requests: 0, bytes: 0, mb: 0, downloads: 0, estimated_cost: 0 }));
        return e;
      };
      for (const r of reqs) day(r.day).requests = r.requests;
      for (const r of pulls) {
        const e = day(r.day);
        e.bytes = r.bytes;
        e.mb = round(r.bytes / MB, 6);
        e.downloads = r.downloads;
        // Reference cost at the per-MB rates: reported, not charged (pulls are included in the plan).
        const perSet = JSON.parse(r.dataset_bytes) as Record<string, number>;
        e.estimated_cost = round(
          Object.entries(perSet).reduce((s, [ds, b]) => s + (b / MB) * (REFERENCE_RATE_PER_MB[ds] ?? 1), 0),
          2,
        );
      }
      const daily = [...days.values()].sort((a, b) => a.date.localeCompare(b.date));
      const totalBytes = daily.reduce((s, d) => s + d.bytes, 0);
      return {
        user_id: user.id,
        period: {
          start: start.toISOString(),
          end: end.toISOString(),
          plan: ent.plan.id,
          fair_use: fairUseStatus(ctx.state, user.id),
        },
        total_requests: daily.reduce((s, d) => s + d.requests, 0),
        total_bytes: totalBytes,
        total_mb: round(totalBytes / MB, 6),
        total_downloads: daily.reduce((s, d) => s + d.downloads, 0),
        estimated_cost: round(
          daily.reduce((s, d) => s + d.estimated_cost, 0),
          2,
        ),
        daily,
        requests_by_key: requestCountsByKey(ctx.state, user.id, fromDay, toDay).map((r) => ({ key_id: r.key_id || null, requests: r.requests })),
      };
    },
  },
  {
    method: 'get',
    path: '/v1/user/downloads',
    cost: 'cheap',
    auth: 'key',
    tag: 'User',
    summary: 'Download history: every download and export with rows, bytes and status, newest first',
    query: DownloadsQuery,
    response: z.array(DownloadHistoryResponse),
    handler: async (req, res, ctx) => {
      const q = res.locals.query as z.infer<typeof DownloadsQuery>;
      return listPulls(ctx.state, req.principal!.userId, { limit: q.limit, offset: q.offset, status: q.status ?? undefined }).map(downloadView);
    },
  },
];

function round(x: number, digits: number): number {
  const f = 10 ** digits;
  return Math.round(x * f) / f;
}
