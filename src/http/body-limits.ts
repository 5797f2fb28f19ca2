import type { IncomingHttpHeaders } from 'node:http';
import { BadRequest, PayloadTooLarge } from '../errors.js';

/** The largest JSON body a route reads (express.json's limit): no request body of the API comes near it. */
export const MAX_JSON_BODY_BYTES = 1024 * 1024;

export const BODY_TOO_LARGE = `JSON body larger than ${MAX_JSON_BODY_BYTES} bytes (1 MiB)`;

/**
 * A body whose Content-Length says it is over the limit is refused before anything else may refuse the request
 * (the gate calls this before authorization): the answer is then the 413 the body earns whoever sends it, not a
 * 401 or 403 that says nothing about the size. A body sent without a length (chunked) is measured by the JSON
 * step as it is read, after the gate.
 */
export function assertDeclaredBodyFits(headers: IncomingHttpHeaders): void {
  if (Number(headers['content-length']) > MAX_JSON_BODY_BYTES) throw new PayloadTooLarge(BODY_TOO_LARGE);
}

/**
 * Limits on what a JSON body may be, checked on the raw bytes before JSON.parse runs. V8's JSON.parse takes
 * a 200 KB `[[[…]]]` happily, but everything after it that walks the value recursively (zod, the validation
 * error's echo, JSON.stringify of the answer) overflowed the stack: a 500, and 5xx answers refund the rate
 * limit, so one key could repeat it forever. No request body of the API nests deeper than 4 levels (orders:
 * body → items → item → field); 32 leaves room without letting recursion anywhere near the stack's limit.
 */
export const MAX_JSON_DEPTH = 32;

const OPEN_BRACKET = 0x5b,
  CLOSE_BRACKET = 0x5d,
  OPEN_BRACE = 0x7b,
  CLOSE_BRACE = 0x7d,
  QUOTE = 0x22,
  BACKSLASH = 0x5c;

/** The deepest nesting of arrays and objects in JSON text, stopping early once it passes `limit`. */
export function jsonDepthExceeds(buf: Uint8Array, limit: number = MAX_JSON_DEPTH): boolean {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < buf.length; i++) {
    const c = buf[i];
    if (inString) {
      if (c === BACKSLASH) i++;
      else if (c === QUOTE) inString = false;
    } else if (c === QUOTE) inString = true;
    else if (c === OPEN_BRACKET || c === OPEN_BRACE) {
      if (++depth > limit) return true;
    } else if (c === CLOSE_BRACKET || c === CLOSE_BRACE) depth--;
  }
  return false;
}

/** For express.json's `verify`: refuses a too-deep body with a 400 before it is parsed. */
export function assertJsonDepth(buf: Uint8Array): void {
  if (jsonDepthExceeds(buf)) {
    throw new BadRequest(`JSON body nested deeper than ${MAX_JSON_DEPTH} levels`);
  }
}
