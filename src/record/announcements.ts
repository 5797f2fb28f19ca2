import { isTokenId } from '../token-id.js';

/**
 * The token ids a `new_market` message announces on the market channel (custom features on). A frame is a
 * message object or an array of them; `assets_ids` and `clob_token_ids` both list the market's tokens (the
 * latter may come as an array encoded in a string, as the venue's catalogue spells it).
 */
export function announcedAssets(text: string): string[] {
  // Most frames are price changes: parse only the ones that can hold an announcement.
  if (!text.includes('new_market')) return [];
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    return [];
  }
  const out = new Set<string>();
  for (const msg of Array.isArray(parsed) ? parsed : [parsed]) {
    if (!msg || typeof msg !== 'object' || (msg as { event_type?: unknown }).event_type !== 'new_market') continue;
    const m = msg as { assets_ids?: unknown; clob_token_ids?: unknown };
    for (const list of [m.assets_ids, m.clob_token_ids]) for (const id of idList(list)) out.add(id);
  }
  return [...out];
}

function idList(v: unknown): string[] {
  if (typeof v === 'string') {
    try {
      return idList(JSON.parse(v));
    } catch {
      return [];
    }
  }
  // A token the venue cannot have (ten million digits) is not subscribed to: it would be written into every
  // capture's subscription lines.
  return Array.isArray(v) ? v.filter((x): x is string => typeof x === 'string' && isTokenId(x)) : [];
}
