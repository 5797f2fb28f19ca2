import type { ErrorRequestHandler, RequestHandler } from 'express';
import { z } from 'zod';

/**
 * The one place errors become HTTP. Handlers throw these; the middleware below formats them as the spec's
 * `{ "detail": ... }` bodies. Nothing else in the service writes an error response.
 */
export type Detail = string | { code: string; message: string; [k: string]: unknown } | ValidationIssue[];

export type ValidationIssue = { loc: (string | number)[]; msg: string; type: string; input?: unknown };

export class HttpError extends Error {
  constructor(
    readonly status: number,
    readonly detail: Detail,
    readonly headers: Record<string, string> = {},
  ) {
    // Not JSON.stringify(detail): a detail may carry (bounded) echoes of input; the message is for logs.
    super(typeof detail === 'string' ? detail : Array.isArray(detail) ? `${detail.length} validation issue(s)` : detail.message);
  }
}

export class BadRequest extends HttpError {
  constructor(detail: Detail) {
    super(400, detail);
  }
}
export class Unauthorized extends HttpError {
  constructor(detail: Detail = 'Invalid API key') {
    super(401, detail);
  }
}
export class Forbidden extends HttpError {
  constructor(detail: Detail) {
    super(403, detail);
  }
}
export class NotFound extends HttpError {
  constructor(detail: Detail = 'Not found') {
    super(404, detail);
  }
}
export class Conflict extends HttpError {
  constructor(detail: Detail) {
    super(409, detail);
  }
}
export class Gone extends HttpError {
  constructor(detail: Detail) {
    super(410, detail);
  }
}
export class PaymentRequired extends HttpError {
  constructor(detail: Detail) {
    super(402, detail);
  }
}
export class RateLimited extends HttpError {
  constructor(retryAfterSeconds: number, headers: Record<string, string> = {}) {
    super(429, 'Rate limit exceeded', { 'Retry-After': String(Math.max(1, Math.ceil(retryAfterSeconds))), ...headers });
  }
}
export class QuotaExceeded extends HttpError {
  constructor(message: string) {
    // No Retry-After: retrying does not help until the next billing date.
    super(429, { code: 'fair_use_cap', message });
  }
}
export class Unprocessable extends HttpError {
  constructor(issues: ValidationIssue[]) {
    super(422, issues);
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

/** Parses a request part with a zod schema or throws a 422 naming the parameter. */
export function parse<S extends z.ZodType>(where: 'query' | 'path' | 'body' | 'header', schema: S, input: unknown): z.infer<S> {
  const r = schema.safeParse(input);
  if (!r.success) throw fromZod(where, r.error, input);
  return r.data;
}

export const notFoundHandler: RequestHandler = (_req, _res, next) => next(new NotFound('Not Found'));

export const errorHandler: ErrorRequestHandler = (err, req, res, _next) => {
  void _next;
  try {
    sendError(err, req, res);
  } catch (failed) {
    // Formatting the error failed (it never should): still a JSON answer, never Express's HTML stack page.
    req.log?.error({ err: failed, cause: err }, 'error while answering an error');
    if (res.headersSent) res.destroy();
    else res.status(500).type('application/json').end('{"detail":"Internal server error"}');
  }
};

type Req = Parameters<ErrorRequestHandler>[1];
type Res = Parameters<ErrorRequestHandler>[2];

function sendError(err: unknown, req: Req, res: Res): void {
  if (res.headersSent) {
    // A stream already started: the only honest signal left is to cut the connection.
    req.log?.error({ err }, 'error after headers were sent');
    res.destroy(err instanceof Error ? err : undefined);
    return;
  }
  if (err instanceof HttpError) {
    for (const [k, v] of Object.entries(err.headers)) res.setHeader(k, v);
    res.status(err.status).json({ detail: err.detail });
    return;
  }
  // express.json() failures carry a status; report them without internals.
  const e = (err ?? {}) as { status?: unknown; type?: unknown; expose?: unknown; message?: unknown };
  const status = typeof e.status === 'number' && e.status >= 400 && e.status < 500 ? e.status : 500;
  if (status < 500) {
    const detail = e.type === 'entity.parse.failed' ? 'Malformed JSON body' : String(e.expose ? e.message : 'Bad request');
    res.status(status === 400 ? 422 : status).json({ detail: status === 400 ? [{ loc: ['body'], msg: detail, type: 'json_invalid' }] : detail });
    return;
  }
  req.log?.error({ err }, 'unhandled error');
  res.status(500).json({ detail: 'Internal server error' });
}
