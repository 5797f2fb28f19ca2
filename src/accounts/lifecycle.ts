import crypto from 'node:crypto';
import { BadRequest, Conflict, Gone } from '../errors.js';
import {
  cancelDeletionRequest,
  confirmDeletion as confirmDeletionTx,
  exportUserRecords,
  listPrivacyEvents,
  openDeletionRequest,
  type DeletionSummary,
  type Origin,
  type PrivacyEventRow,
  type TokenLookup,
} from '../state/lifecycle.js';
import type { StateStore } from '../state/store.js';
import { requestCounterFor } from './requests.js';

/**
 * The account lifecycle (GDPR access and erasure): a JSON export of everything the state store holds about the
 * user, the privacy-event log, and deletion by a one-time token (request → confirm or cancel). The anchor
 * mails the token as a second factor; pmlake has no mail, so the request hands it to the signed-in caller.
 */

/** The anchor's confirmation window. */
export const DELETION_TOKEN_TTL_MS = 24 * 3_600_000;

export type { Origin };

/** The caller's origin as the log keeps it: the IP only as its SHA-256, the user agent cut to 512 characters. */
export function originOf(ip: string | undefined, userAgent: string | undefined): Origin {
  return {
    ipHash: ip ? crypto.createHash('sha256').update(ip, 'utf8').digest('hex') : null,
    userAgent: userAgent ? userAgent.slice(0, 512) : null,
  };
}

function hashToken(token: string): string {
  return crypto.createHash('sha256').update(token, 'utf8').digest('hex');
}

function parseJson(text: unknown): unknown {
  if (typeof text !== 'string') return text ?? null;
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

/** PrivacyEventResponse. */
export function privacyEventView(e: PrivacyEventRow) {
  return {
    id: e.id,
    event: e.event,
    metadata: parseJson(e.metadata) as Record<string, unknown>,
    created_at: e.created_at,
    ip_hash: e.ip_hash,
    user_agent: e.user_agent,
  };
}

/** Everything about the user, as JSON. Secrets never leave: no key hash, no deletion token hash. */
export async function exportMyData(store: StateStore, userId: string, origin: Origin, at: Date = new Date()) {
  // Request counts are buffered in memory: write them so the export holds this process's latest.
  await requestCounterFor(store).flush();
  const r = await exportUserRecords(store, userId, origin, at);
  const items = new Map<string, Record<string, unknown>[]>();
  for (const it of r.order_items) {
    const list = items.get(it.order_id as string) ?? [];
    list.push({ ...it, cost: (it.cost_cents as number) / 100 });
    items.set(it.order_id as string, list);
  }
  return {
    exported_at: at.toISOString(),
    format_version: 1,
    user: r.user ? { id: r.user.id, email: r.user.email, plan: r.user.plan, created_at: r.user.created_at, deleted_at: r.user.deleted_at ?? null } : null,
    api_keys: r.api_keys.map((k) => ({
      id: k.id,
      name: k.name,
      key_prefix: k.key_prefix,
      scopes: String(k.scopes).split(','),
      created_at: k.created_at,
      last_used_at: k.last_used_at,
      expires_at: k.expires_at,
      revoked_at: k.revoked_at,
      scheduled_revoke_at: k.scheduled_revoke_at ?? null,
    })),
    subscriptions: r.subscriptions.map((s) => ({ ...s, cancel_at_period_end: Boolean(s.cancel_at_period_end) })),
    credit_account: r.credit_account ?? null,
    credit_ledger: r.ledger.map((l) => ({ ...l, metadata: parseJson(l.metadata) })),
    checkouts: r.checkouts,
    orders: r.orders.map((o) => ({
      ...o,
      total_cost: (o.total_cost_cents as number) / 100,
      minimum_applied: Boolean(o.minimum_applied),
      items: items.get(o.id as string) ?? [],
    })),
    downloads: r.pulls,
    // The store's object key and upload id are internal; the spec is the job's request, parsed back to JSON.
    export_jobs: r.export_jobs.map(({ object_key: _k, upload_id: _u, ...j }) => ({ ...j, spec: parseJson(j.spec) })),
    usage_daily: r.usage_daily,
    privacy_events: r.privacy_events.map(privacyEventView),
    deletion_requests: r.deletion_requests.map(({ token_hash: _h, ...d }) => d),
  };
}

export async function privacyEvents(store: StateStore, userId: string, limit: number, offset: number) {
  return (await listPrivacyEvents(store, userId, limit, offset)).map(privacyEventView);
}

/** Opens a deletion request and returns its token: shown once, only its SHA-256 is stored. */
export async function requestDeletion(store: StateStore, userId: string, reason: string | null, origin: Origin, at: Date = new Date()) {
  const token = `pmdel_${crypto.randomBytes(32).toString('base64url')}`;
  const row = await openDeletionRequest(store, {
    userId,
    tokenHash: hashToken(token),
    reason,
    expiresAt: new Date(at.getTime() + DELETION_TOKEN_TTL_MS),
    origin,
    at,
  });
  return {
    status: 'pending',
    request_id: row.id,
    token,
    expires_at: row.expires_at,
    message: 'Deletion requested. POST the token to /v1/user/delete-confirm to delete the account, or to /v1/user/delete-cancel to keep it.',
  };
}

/** The token refused, saying why; every refusal is a 4xx with a detail. */
function refuse(found: TokenLookup): never {
  if (found.outcome === 'unknown') throw new BadRequest('Invalid deletion token');
  if (found.outcome === 'expired') throw new Gone('Deletion token expired; request a new one');
  throw new Conflict(`Deletion token already used: the request was ${found.outcome === 'used' ? found.row.status : 'resolved'}`);
}

export async function confirmDeletion(
  store: StateStore,
  token: string,
  at: Date = new Date(),
): Promise<{ status: 'deleted'; request_id: string; deleted_at: string } & DeletionSummary> {
  // Buffered request counts first, so the erasure removes them too rather than a later flush bringing them back.
  await requestCounterFor(store).flush();
  const out = await confirmDeletionTx(store, hashToken(token), at);
  if (out.outcome !== 'pending' || !out.summary) refuse(out);
  return { status: 'deleted', request_id: out.row.id, deleted_at: at.toISOString(), ...out.summary };
}

export async function cancelDeletion(store: StateStore, token: string, origin: Origin, at: Date = new Date()) {
  const out = await cancelDeletionRequest(store, hashToken(token), origin, at);
  if (out.outcome !== 'pending') refuse(out);
  return { status: 'cancelled', request_id: out.row.id, cancelled_at: at.toISOString() };
}
