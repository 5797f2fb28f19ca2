/**
 * The venue's market channel, client side, shared by pmlake's replay (src/http/replay/) and the simulated venue
 * (sim/simulate/). What a client may send on the market channel (docs.polymarket.com/asyncapi.json, channel `market`): the text
 * `PING`; once, right after connecting, the subscription `{"assets_ids":[…],"type":"market",
 * "custom_feature_enabled":true}` (`initial_dump` false skips the books); later `{"assets_ids":[…],"operation":
 * "subscribe"|"unsubscribe"}`. Anything else is answered with the venue's `INVALID OPERATION`.
 */
export type ClientMessage =
  | { kind: 'ping' }
  | { kind: 'initial'; assets: string[]; custom: boolean; initialDump: boolean }
  | { kind: 'update'; subscribe: boolean; assets: string[]; initialDump: boolean }
  | { kind: 'invalid' };

/** The venue's answer to a request it refuses (a malformed message, a second initial subscription, too many assets). */
export const INVALID_OPERATION = 'INVALID OPERATION';

export function parseClientMessage(text: string): ClientMessage {
  if (text === 'PING') return { kind: 'ping' };
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch {
    return { kind: 'invalid' };
  }
  if (typeof v !== 'object' || v === null || Array.isArray(v)) return { kind: 'invalid' };
  const o = v as Record<string, unknown>;
  const ids = o.assets_ids ?? [];
  if (!Array.isArray(ids) || !ids.every((x): x is string => typeof x === 'string')) return { kind: 'invalid' };
  const initialDump = o.initial_dump !== false;
  if (typeof o.type === 'string' && o.type.toLowerCase() === 'market' && o.operation === undefined) {
    return { kind: 'initial', assets: ids, custom: o.custom_feature_enabled === true, initialDump };
  }
  if (o.operation === 'subscribe' || o.operation === 'unsubscribe') {
    return { kind: 'update', subscribe: o.operation === 'subscribe', assets: ids, initialDump };
  }
  return { kind: 'invalid' };
}
