import { STATUS_CODES } from 'node:http';
import type { Duplex } from 'node:stream';
import type { ErrorRequestHandler, RequestHandler } from 'express';
import { NotFound, ServiceError, type ErrorKind } from '../errors.js';
import { BODY_TOO_LARGE } from './body-limits.js';
import { afterBody } from './unread-body.js';

/**
 * The one place errors become HTTP. The core throws ServiceErrors (src/errors.ts) naming a kind; this maps the
 * kind to a status and formats the spec's `{ "detail": ... }` body. Nothing else in the service writes an
 * error response: what Node's HTTP parser refuses before Express sees a request is answered here too
 * (answerClientError).
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

/** Parser errors with a status of their own; any other is a malformed request (400, with the parser's reason). */
const PARSER_ANSWERS: Record<string, { status: number; detail: string }> = {
  HPE_HEADER_OVERFLOW: { status: 431, detail: "Request header fields too large: the request line and headers exceed the server's limit" },
  HPE_CHUNK_EXTENSIONS_OVERFLOW: { status: 413, detail: "Chunk extensions too large: they exceed the server's limit" },
  ERR_HTTP_REQUEST_TIMEOUT: { status: 408, detail: 'Request timeout: the whole request did not arrive in time' },
};

const answered = new WeakSet<Duplex>();

/** How long a refused connection stays open for the client to read the answer before it is closed. */
const PARSER_LINGER_MS = 1000;

/**
 * For the HTTP server's 'clientError' event: a request Node's parser refused (headers too large, a NUL or a
 * space in the path, a malformed request line or chunk, the request timeout) gets the same `{ "detail": … }`
 * JSON as every other error instead of Node's bare status line, then the connection closes (the parser cannot
 * go on after an error). Not when the peer is gone or an answer on this socket already began: as Node's own
 * handler, which this replaces, it then only closes the connection.
 */
export function answerClientError(err: Error & { code?: string; reason?: unknown }, socket: Duplex): number | null {
  // The errored parser refuses every later chunk of the same connection again: the answer is already on its way.
  if (answered.has(socket)) return null;
  const inFlight = (socket as Duplex & { _httpMessage?: { headersSent?: boolean } })._httpMessage;
  if (err.code === 'ECONNRESET' || !socket.writable || inFlight?.headersSent) {
    socket.destroy();
    return null;
  }
  answered.add(socket);
  // The parser's reason is one of its own fixed phrases ("Invalid char in url path"), never the request's bytes.
  const reason = typeof err.reason === 'string' ? err.reason.slice(0, 200) : (err.code ?? 'not HTTP/1.1');
  const { status, detail } = PARSER_ANSWERS[err.code ?? ''] ?? { status: 400, detail: `Malformed HTTP request: ${reason}` };
  const body = JSON.stringify({ detail });
  socket.end(
    `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
  );
  // Half closed, so the answer is not lost to a reset while the client still writes; fully closed soon after.
  const linger = setTimeout(() => socket.destroy(), PARSER_LINGER_MS).unref();
  socket.once('close', () => clearTimeout(linger));
  return status;
}
