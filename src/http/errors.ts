import type { ErrorRequestHandler, RequestHandler } from 'express';
import { NotFound, ServiceError, type ErrorKind } from '../errors.js';
import { BODY_TOO_LARGE } from './body-limits.js';
import { afterBody } from './unread-body.js';

/**
 * The one place errors become HTTP. The core throws ServiceErrors (src/errors.ts) naming a kind; this maps the
 * kind to a status and formats the spec's `{ "detail": ... }` body. Nothing else in the service writes an
 * error response.
 */
const STATUS: Record<ErrorKind, number> = {
  bad_request: 400,
  unauthorized: 401,
  payment_required: 402,
  forbidden: 403,
  not_found: 404,
  conflict: 409,
  gone: 410,
  payload_too_large: 413,
  range_not_satisfiable: 416,
  unprocessable: 422,
  rate_limited: 429,
  quota_exceeded: 429,
  upstream_failed: 502,
  unavailable: 503,
};

export function statusOf(err: ServiceError): number {
  return STATUS[err.kind];
}

export const notFoundHandler: RequestHandler = (_req, _res, next) => next(new NotFound('Not Found'));

export const errorHandler: ErrorRequestHandler = (err, req, res, _next) => {
  void _next;
  // A refusal before the body was read is answered once the body is in (./unread-body.ts), so the client sees it.
  afterBody(req, res, () => {
    try {
      sendError(err, req, res);
    } catch (failed) {
      // Formatting the error failed (it never should): still a JSON answer, never Express's HTML stack page.
      req.log?.error({ err: failed, cause: err }, 'error while answering an error');
      if (res.headersSent) res.destroy();
      else res.status(500).type('application/json').end('{"detail":"Internal server error"}');
    }
  });
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
  if (err instanceof ServiceError) {
    for (const [k, v] of Object.entries(err.headers)) res.setHeader(k, v);
    res.status(STATUS[err.kind]).json({ detail: err.detail });
    return;
  }
  // express.json() failures carry a status; report them without internals.
  const e = (err ?? {}) as { status?: unknown; type?: unknown; expose?: unknown; message?: unknown };
  const status = typeof e.status === 'number' && e.status >= 400 && e.status < 500 ? e.status : 500;
  if (status < 500) {
    // The JSON step's own 413 (a body sent without a length, found too large as it was read) says what the gate's does.
    if (e.type === 'entity.too.large') return void res.status(413).json({ detail: BODY_TOO_LARGE });
    const detail = e.type === 'entity.parse.failed' ? 'Malformed JSON body' : String(e.expose ? e.message : 'Bad request');
    res.status(status === 400 ? 422 : status).json({ detail: status === 400 ? [{ loc: ['body'], msg: detail, type: 'json_invalid' }] : detail });
    return;
  }
  req.log?.error({ err }, 'unhandled error');
  res.status(500).json({ detail: 'Internal server error' });
}
