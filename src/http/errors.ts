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
    super(typeof detail === 'string' ? detail : JSON.stringify(detail));
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
      // Echo short inputs only: a hostile megabyte string is named, not reflected.
      if (value !== undefined && (typeof value !== 'string' || value.length <= 200)) issue.input = value;
      return issue;
    }),
  );
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
  const status = typeof err?.status === 'number' && err.status >= 400 && err.status < 500 ? err.status : 500;
  if (status < 500) {
    const detail = err?.type === 'entity.parse.failed' ? 'Malformed JSON body' : String(err?.expose ? err.message : 'Bad request');
    res.status(status === 400 ? 422 : status).json({ detail: status === 400 ? [{ loc: ['body'], msg: detail, type: 'json_invalid' }] : detail });
    return;
  }
  req.log?.error({ err }, 'unhandled error');
  res.status(500).json({ detail: 'Internal server error' });
};
