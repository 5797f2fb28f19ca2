import type { ApiKeyRow } from '../../state/store.js';

/** How a stored API key is shown: ApiKeyResponse (listing) and ApiKeyCreatedResponse (the one time with its plaintext). */

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

/** ApiKeyCreatedResponse: the plaintext, shown this once. */
export function createdView(row: ApiKeyRow, plaintext: string) {
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
