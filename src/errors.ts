import type { z } from 'zod';

/**
 * The service's errors, for every layer: the core (lake, query, downloads, exports, accounts) throws these and
 * knows nothing of HTTP. Each names a `kind`; the one HTTP error middleware (src/http/errors.ts) maps a kind to a
 * status and formats the spec's `{ "detail": ... }` body. A background export job reads the same `detail` into
 * the job's error text.
 */
export type Detail = string | { code: string; message: string; [k: string]: unknown } | ValidationIssue[];

export type ValidationIssue = { loc: (string | number)[]; msg: string; type: string; input?: unknown };

export type ErrorKind =
  | 'bad_request'
  | 'unauthorized'
  | 'payment_required'
  | 'forbidden'
  | 'not_found'
  | 'conflict'
  | 'gone'
  | 'payload_too_large'
  | 'range_not_satisfiable'
  | 'unprocessable'
  | 'rate_limited'
  | 'quota_exceeded'
  | 'upstream_failed'
  | 'unavailable';

/**
 * A process cannot start for a reason its operator fixes (the listen address is taken): the CLI prints the
 * message alone on stderr and exits 1. Not a ServiceError: no request is being answered.
 */
export class StartupError extends Error {}

export class ServiceError extends Error {
  constructor(
    readonly kind: ErrorKind,
    readonly detail: Detail,
    /** Protocol-neutral hints the edge passes on (Retry-After, Content-Range, X-RateLimit-*). */
    readonly headers: Record<string, string> = {},
  ) {
    // Not JSON.stringify(detail): a detail may carry (bounded) echoes of input; the message is for logs.
    super(typeof detail === 'string' ? detail : Array.isArray(detail) ? `${detail.length} validation issue(s)` : detail.message);
  }
}

export class BadRequest extends ServiceError {
  constructor(detail: Detail) {
    super('bad_request', detail);
  }
}
export class Unauthorized extends ServiceError {
  constructor(detail: Detail = 'Invalid API key') {
    super('unauthorized', detail);
  }
}
export class Forbidden extends ServiceError {
  constructor(detail: Detail) {
    super('forbidden', detail);
  }
}
export class NotFound extends ServiceError {
  constructor(detail: Detail = 'Not found') {
    super('not_found', detail);
  }
}
export class Conflict extends ServiceError {
  constructor(detail: Detail) {
    super('conflict', detail);
  }
}
export class Gone extends ServiceError {
  constructor(detail: Detail) {
    super('gone', detail);
  }
}
export class PayloadTooLarge extends ServiceError {
  constructor(detail: Detail) {
    super('payload_too_large', detail);
  }
}
export class PaymentRequired extends ServiceError {
  constructor(detail: Detail) {
    super('payment_required', detail);
  }
}
export class RateLimited extends ServiceError {
  constructor(retryAfterSeconds: number, headers: Record<string, string> = {}, detail: Detail = 'Rate limit exceeded') {
    super('rate_limited', detail, { 'Retry-After': String(Math.max(1, Math.ceil(retryAfterSeconds))), ...headers });
  }
}
export class QuotaExceeded extends ServiceError {
  constructor(detail: Detail) {
    // No Retry-After: retrying does not help until the next billing date.
    super('quota_exceeded', typeof detail === 'string' ? { code: 'fair_use_cap', message: detail } : detail);
  }
}
export class Unprocessable extends ServiceError {
  constructor(issues: ValidationIssue[]) {
    super('unprocessable', issues);
  }
}
/** A dependency (payment provider) failed; nothing was changed. */
export class UpstreamFailed extends ServiceError {
  constructor(detail: Detail) {
    super('upstream_failed', detail);
  }
}
/** The service cannot take this now (overload, no provider configured); `retryAfterSeconds` when retrying helps. */
export class Unavailable extends ServiceError {
  constructor(detail: Detail, retryAfterSeconds?: number) {
    super('unavailable', detail, retryAfterSeconds === undefined ? {} : { 'Retry-After': String(Math.max(1, Math.ceil(retryAfterSeconds))) });
  }
}

/** zod issues → the anchor's HTTPValidationError shape: a list naming where each bad value was. */
export function fromZod(where: 'query' | 'path' | 'body' | 'header', err: z.ZodError, input: unknown): Unprocessable {
  return new Unprocessable(
    err.issues.map((i) => {
      const loc: (string | number)[] = [where, ...i.path.map((p) => (typeof p === 'symbol' ? String(p) : p))];
      let value: unknown = input;
      for (const p of i.path) value = value && typeof value === 'object' ? (value as Record<PropertyKey, unknown>)[p] : undefined;
      const issue: ValidationIssue = { loc, msg: i.message, type: i.code };
      if (value !== undefined && isSmallEcho(value)) issue.input = value;
      return issue;
    }),
  );
}

/**
 * Whether an input is small enough to echo in a validation error. Hostile input is named, not reflected: a
 * megabyte string, a 100,000-element array or a deeply nested value would make the answer as large as the
 * request (and walking a deep one recursively overflowed the stack). Iterative, with a budget, so the check
 * itself is cheap whatever it is given.
 */
const ECHO_MAX_NODES = 64;
const ECHO_MAX_DEPTH = 4;
const ECHO_MAX_CHARS = 200;

export function isSmallEcho(value: unknown): boolean {
  const stack: [unknown, number][] = [[value, 0]];
  let nodes = 0;
  while (stack.length > 0) {
    const [v, depth] = stack.pop()!;
    if (++nodes > ECHO_MAX_NODES || depth > ECHO_MAX_DEPTH) return false;
    if (typeof v === 'string') {
      if (v.length > ECHO_MAX_CHARS) return false;
    } else if (Array.isArray(v)) {
      if (v.length > ECHO_MAX_NODES) return false;
      for (const x of v) stack.push([x, depth + 1]);
    } else if (v !== null && typeof v === 'object') {
      const keys = Object.keys(v);
      if (keys.length > ECHO_MAX_NODES) return false;
      for (const k of keys) {
        if (k.length > ECHO_MAX_CHARS) return false;
        stack.push([(v as Record<string, unknown>)[k], depth + 1]);
      }
    } else if (typeof v === 'bigint' || typeof v === 'function' || typeof v === 'symbol') return false;
  }
  return true;
}

/** Parses a value with a zod schema or throws a 422-kind error naming where the value came from. */
export function parse<S extends z.ZodType>(where: 'query' | 'path' | 'body' | 'header', schema: S, input: unknown): z.infer<S> {
  const r = schema.safeParse(input);
  if (!r.success) throw fromZod(where, r.error, input);
  return r.data;
}
