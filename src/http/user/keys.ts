import { z } from 'zod';
import { listKeys, revokeKey, rotateKey } from '../../state/accounts.js';
import { Forbidden, NotFound } from '../../errors.js';
import { defineRoute, type Route, type RouteInput } from '../route.js';
import type { AppContext } from '../context.js';
import { ApiKeyCreatedResponse, ApiKeyResponse } from '../account-schemas.js';
import { createdView, keyView } from './key-views.js';

/** /v1/user/keys: list, create, revoke and rotate the caller's API keys. */

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

export const userKeyRoutes: Route[] = [
  defineRoute({
    method: 'get',
    path: '/v1/user/keys',
    cost: 'cheap',
    auth: 'key',
    tag: 'User',
    summary: 'List API keys (prefix only; the plaintext is shown once, at creation)',
    response: z.array(ApiKeyResponse),
    handler: listUserKeys,
  }),
  defineRoute({
    method: 'post',
    path: '/v1/user/keys',
    cost: 'cheap',
    auth: 'key',
    tag: 'User',
    summary: 'Create an API key',
    body: CreateKeyBody.meta({ id: 'CreateKeyRequest' }),
    status: 201,
    response: ApiKeyCreatedResponse,
    handler: createUserKey,
  }),
  defineRoute({
    method: 'delete',
    path: '/v1/user/keys/:key_id',
    cost: 'cheap',
    auth: 'key',
    tag: 'User',
    summary: 'Revoke an API key (effective on the very next request)',
    params: KeyIdParams,
    handler: revokeUserKey,
  }),
  defineRoute({
    method: 'post',
    path: '/v1/user/keys/:key_id/rotate',
    cost: 'cheap',
    auth: 'key',
    tag: 'User',
    summary: 'Rotate an API key: a new key now, the old one stops after a 7-day grace window',
    params: KeyIdParams,
    response: ApiKeyCreatedResponse,
    handler: rotateUserKey,
  }),
];

async function listUserKeys({ req }: RouteInput, ctx: AppContext) {
  return (await listKeys(ctx.state, req.principal!.userId)).map(keyView);
}

async function createUserKey({ body, req }: RouteInput<{ body: typeof CreateKeyBody }>, ctx: AppContext) {
  const p = req.principal!;
  const scopes = [...new Set(body.scopes ?? p.scopes)];
  // Scopes only narrow: a read-only key cannot mint a download key.
  const wider = scopes.filter((s) => !p.scopes.includes(s));
  if (wider.length > 0) throw new Forbidden(`A key cannot grant scopes it lacks: ${wider.join(', ')}`);
  const expiresAt = body.expires_in_days ? new Date(Date.now() + body.expires_in_days * DAY_MS).toISOString() : null;
  const { row, plaintext } = await ctx.state.createApiKey({ userId: p.userId, name: body.name, prefix: ctx.config.keyPrefix, scopes, expiresAt });
  req.log.info({ key_id: row.id, user: p.userId }, 'api key created');
  return createdView(row, plaintext);
}

async function revokeUserKey({ params: { key_id }, req }: RouteInput<{ params: typeof KeyIdParams }>, ctx: AppContext) {
  const row = await revokeKey(ctx.state, req.principal!.userId, key_id);
  if (!row) throw new NotFound('API key not found');
  req.log.info({ key_id, user: req.principal!.userId }, 'api key revoked');
  return { id: row.id, status: 'revoked', revoked_at: row.revoked_at };
}

async function rotateUserKey({ params: { key_id }, req }: RouteInput<{ params: typeof KeyIdParams }>, ctx: AppContext) {
  const out = await rotateKey(ctx.state, req.principal!.userId, key_id, ctx.config.keyPrefix);
  if (!out) throw new NotFound('API key not found');
  req.log.info({ key_id, new_key_id: out.row.id }, 'api key rotated');
  return { ...createdView(out.row, out.plaintext), rotated_from: key_id, old_key_revokes_at: out.old.scheduled_revoke_at };
}
