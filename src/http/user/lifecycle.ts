import type { Request } from 'express';
import { z } from 'zod';
import { cancelDeletion, confirmDeletion, exportMyData, originOf, privacyEvents, requestDeletion } from '../../accounts/lifecycle.js';
import { defineRoute, type Route, type RouteInput } from '../route.js';
import type { AppContext } from '../context.js';

/**
 * The account lifecycle, as the anchor serves it: data export, the privacy-event log and deletion request with
 * the dashboard bearer token only (an API key is refused: a leaked key must not read out or delete the
 * account); confirm and cancel authenticated by the one-time token in the body, since the user may be signed
 * out by then.
 */

const PrivacyEventsQuery = z.object({
  limit: z.coerce.number().int().min(1).max(200).default(50),
  offset: z.coerce.number().int().min(0).default(0),
});

// Strict (the anchor ignores unknown fields): with no required field, a mistyped or foreign body would
// otherwise open a deletion request unnoticed; the anchor's clients send only `reason`.
const DeleteAccountRequest = z.strictObject({ reason: z.string().max(2000).nullish() }).meta({ id: 'DeleteAccountRequest' });

// Real tokens are 49 characters; the bound keeps a hostile body from being hashed at length.
const DeleteConfirmRequest = z.object({ token: z.string().min(1).max(200) }).meta({ id: 'DeleteConfirmRequest' });

const PrivacyEventResponse = z
  .object({
    id: z.string(),
    event: z.string(),
    metadata: z.record(z.string(), z.unknown()),
    created_at: z.string().meta({ format: 'date-time' }),
    ip_hash: z.string().nullable(),
    user_agent: z.string().nullable(),
  })
  .meta({ id: 'PrivacyEventResponse' });

const origin = (req: Request) => originOf(req.ip, req.get('user-agent'));

export const userLifecycleRoutes: Route[] = [
  defineRoute({
    method: 'get',
    path: '/v1/user/data-export',
    cost: 'cheap',
    auth: 'key',
    credentials: 'jwt',
    tag: 'User',
    summary: 'Export my data: every record held about the signed-in user as one JSON document (no key hashes)',
    handler: exportUserData,
  }),
  defineRoute({
    method: 'get',
    path: '/v1/user/privacy-events',
    cost: 'cheap',
    auth: 'key',
    credentials: 'jwt',
    tag: 'User',
    summary: "The signed-in user's privacy audit trail (data exports, deletion requests, keys revoked by deletion), newest first",
    query: PrivacyEventsQuery,
    response: z.array(PrivacyEventResponse),
    handler: listPrivacyEvents,
  }),
  defineRoute({
    method: 'post',
    path: '/v1/user/delete-request',
    cost: 'cheap',
    auth: 'key',
    credentials: 'jwt',
    tag: 'User',
    summary: 'Request account deletion: returns a one-time token (24 h) for delete-confirm or delete-cancel',
    body: DeleteAccountRequest,
    handler: postDeleteRequest,
  }),
  defineRoute({
    method: 'post',
    path: '/v1/user/delete-confirm',
    cost: 'cheap',
    auth: 'public',
    tag: 'User',
    summary:
      'Confirm account deletion with the token: revokes every key and earlier dashboard token at once, erases personal data and export files, keeps billing records',
    body: DeleteConfirmRequest,
    handler: postDeleteConfirm,
  }),
  defineRoute({
    method: 'post',
    path: '/v1/user/delete-cancel',
    cost: 'cheap',
    auth: 'public',
    tag: 'User',
    summary: 'Cancel a pending account deletion with its token',
    body: DeleteConfirmRequest,
    handler: postDeleteCancel,
  }),
];

async function exportUserData({ req }: RouteInput, ctx: AppContext) {
  const p = req.principal!;
  req.log.info({ user: p.userId }, 'data export');
  return await exportMyData(ctx.state, p.userId, origin(req));
}

async function listPrivacyEvents({ query: q, req }: RouteInput<{ query: typeof PrivacyEventsQuery }>, ctx: AppContext) {
  return await privacyEvents(ctx.state, req.principal!.userId, q.limit, q.offset);
}

async function postDeleteRequest({ body, req }: RouteInput<{ body: typeof DeleteAccountRequest }>, ctx: AppContext) {
  const p = req.principal!;
  const out = await requestDeletion(ctx.state, p.userId, body.reason ?? null, origin(req));
  req.log.info({ user: p.userId, request_id: out.request_id }, 'account deletion requested');
  return out;
}

async function postDeleteConfirm({ body, req }: RouteInput<{ body: typeof DeleteConfirmRequest }>, ctx: AppContext) {
  const out = await confirmDeletion(ctx.state, body.token);
  req.log.info({ request_id: out.request_id, keys_revoked: out.keys_revoked }, 'account deleted');
  // Its export files go before the answer (the export service's sweep retries what the store refuses now).
  await ctx.exports.purgeDeleted();
  return out;
}

async function postDeleteCancel({ body, req }: RouteInput<{ body: typeof DeleteConfirmRequest }>, ctx: AppContext) {
  const out = await cancelDeletion(ctx.state, body.token, origin(req));
  req.log.info({ request_id: out.request_id }, 'account deletion cancelled');
  return out;
}
