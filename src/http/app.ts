import crypto from 'node:crypto';
import express, { type Express, type NextFunction, type Request, type Response } from 'express';
import type { AppContext } from './context.js';
import { errorHandler, notFoundHandler } from './errors.js';
import { Forbidden, parse, Unauthorized } from '../errors.js';
import type { Route } from './route.js';
import type { Principal } from '../accounts/principal.js';
import { assertDeclaredBodyFits, assertJsonDepth, MAX_JSON_BODY_BYTES } from './body-limits.js';
import { Admission } from './admission.js';
import { routes } from './routes.js';
import { currentVersion } from '../lake/versions.js';
import { createRateLimiters, type Limiter, type RateLimiters } from './ratelimit.js';
import { requestCounterFor, type RequestCounter } from '../accounts/requests.js';

declare module 'express-serve-static-core' {
  interface Request {
    /** Who is calling: attached by the gate for every keyed route. */
    principal?: Principal;
    id?: string;
    log: AppContext['log'];
    /** The exact request body bytes, kept only for webhook routes (signatures are over the raw bytes). */
    rawBody?: Buffer;
  }
  interface Locals {
    /** Rows and bytes a handler served, for the request log line and usage records. */
    rows?: number;
    bytes?: number;
    /** Set once a request passed authorization: it is counted in the caller's usage when answered. */
    countRequest?: boolean;
    /** Routes admitted by their handler (Route.admission 'handler'): takes the class's slot, false if the client left. */
    admit?: () => Promise<boolean>;
    /** Milliseconds the request waited for a slot of its cost class (src/http/admission.ts), for the log line. */
    queuedMs?: number;
  }
}

/** Builds the Express app: request logging, every route of the table, then 404 and the error mapper. */
export function createApp(ctx: AppContext, table: Route[] = routes): Express {
  const app = express();
  app.disable('x-powered-by');
  app.set('trust proxy', false);
  app.set('query parser', 'extended');
  // req.log, the request's child logger, is made on first use: most requests only log their end line, and
  // a pino child per request showed in the profile under load.
  Object.defineProperty(app.request, 'log', {
    configurable: true,
    get(this: Request) {
      const log = ctx.log.child({ req_id: this.id });
      Object.defineProperty(this, 'log', { value: log, writable: true, configurable: true });
      return log;
    },
    set(this: Request, log: AppContext['log']) {
      Object.defineProperty(this, 'log', { value: log, writable: true, configurable: true });
    },
  });
  const counter = requestCounterFor(ctx.state);
  app.use(requestLog(ctx, counter));
  const json = express.json({
    limit: MAX_JSON_BODY_BYTES,
    verify: (req, _res, buf) => {
      assertJsonDepth(buf);
      if ((req as Request).url?.startsWith('/v1/billing/webhook/')) (req as Request).rawBody = Buffer.from(buf);
    },
  });

  app.get('/health', (_req, res) => {
    const lake = currentVersion(ctx.config.lakeDir);
    res.json({ status: 'ok', version: '1.0.0', lake_version: lake.version, lake_published_at: lake.publishedAt });
  });

  const limiters = ctx.config.rateLimits ? createRateLimiters(ctx.limits) : null;
  const admission = new Admission(ctx.config.admission);
  // For operators' introspection and the tests: slots in use and requests queued per class.
  app.locals.admission = admission;
  for (const route of table) {
    // The body is read after the gate: a refused body (malformed, too deep, too large) is then counted
    // against the caller's limits like any other 4xx, and no route reads a GET body at all. One too large by
    // its Content-Length is refused in the gate, before authorization can answer something else.
    const steps = route.method === 'get' ? [] : [json];
    app[route.method](route.path, gate(ctx, limitsFor(limiters, route), route, admission), ...steps, handlerFor(ctx, route));
  }

  app.use(notFoundHandler);
  app.use(errorHandler);
  return app;
}

/**
 * One 'close' listener per request does both end-of-request jobs: the log line, and counting the request
 * for GET /v1/user/usage when countRequest marked it (an answered request, 5xx excluded).
 */
function requestLog(ctx: AppContext, counter: RequestCounter) {
  return (req: Request, res: Response, next: NextFunction): void => {
    const id = (req.header('x-request-id') ?? '').slice(0, 64) || crypto.randomUUID();
    req.id = id;
    res.setHeader('X-Request-Id', id);
    const started = process.hrtime.bigint();
    res.on('close', () => {
      const p = req.principal;
      // writableFinished: the whole answer went out ('finish' was emitted), as the count has always required.
      if (p && res.locals.countRequest && res.writableFinished && res.statusCode < 500) counter.count(p.userId, p.keyId);
      const ms = Number(process.hrtime.bigint() - started) / 1e6;
      // The parent logger with req_id as a field: the same line the child logger would write.
      ctx.log.info(
        {
          req_id: id,
          method: req.method,
          route: req.route?.path ?? req.path,
          status: res.statusCode,
          duration_ms: Math.round(ms * 100) / 100,
          rows: res.locals.rows,
          bytes: res.locals.bytes,
          queued_ms: res.locals.queuedMs,
          user: p?.userId,
          aborted: !res.writableFinished,
        },
        'request',
      );
    });
    next();
  };
}

/**
 * Everything before a route's handler, in one middleware (each Express layer costs a dispatch): resolve the
 * credentials when any are sent, so the rate limiter can key on them (bad ones count per IP); the rate
 * limits; then a body whose Content-Length is over the limit (413); then authorization; then admission into
 * the route's cost class (a slot, or a wait in its queue, or 503; a request that takes no slot waits for its
 * turn of the event loop while scans are busy: src/http/admission.ts); then mark the request to be counted in
 * the caller's usage.
 */
function gate(ctx: AppContext, limits: Limiter[], route: Route, admission: Admission) {
  return async (req: Request, res: Response, next: NextFunction): Promise<void> => {
    if (req.headers['x-api-key'] !== undefined || req.headers.authorization !== undefined) {
      req.principal = (await ctx.auth.authenticate({ apiKey: req.header('x-api-key'), authorization: req.header('authorization') })) ?? undefined;
    }
    for (const limit of limits) {
      const allowed = limit(req, res);
      // A refused request was answered (429) by the limiter.
      if (allowed === false || (allowed !== true && !(await allowed))) return;
    }
    // After the limits (counted like any refused body), before a 401 or 403 that would say nothing of the size.
    if (route.method !== 'get') assertDeclaredBodyFits(req.headers);
    authorize(route, req);
    // False: the client left while it waited for a slot or its turn; nothing to answer. A handler-admitted
    // route takes no slot until it must scan, so until then it waits for its turn like a cheap request.
    if (route.admission === 'handler') {
      const turn = admission.pace(res);
      if (turn !== true && !(await turn)) return;
      res.locals.admit = () => admission.admit(route.cost, req, res);
    } else if (!(await admission.admit(route.cost, req, res))) return;
    res.locals.countRequest = true;
    next();
  };
}

/** The default bucket for every route but 'none'; orders and checkouts also take the orders bucket. */
function limitsFor(limiters: RateLimiters | null, route: Route): Limiter[] {
  if (!limiters || route.limit === 'none') return [];
  return route.limit === 'orders' ? [limiters.default, limiters.orders] : [limiters.default];
}

function authorize(route: Route, req: Request): void {
  // Public routes still recognise a key when one is sent (per-key rate limits, plan-aware answers).
  if (route.auth === 'public') return;
  const principal = req.principal;
  if (!principal) throw new Unauthorized('Invalid API key');
  // Bearer-only routes refuse an API key before validating anything (the OpenAPI document says so too).
  if (route.credentials === 'jwt' && principal.authMethod !== 'jwt') throw new Forbidden('This endpoint needs the dashboard bearer token');
  const needed = route.scope ?? 'read';
  if (!principal.scopes.includes(needed)) throw new Forbidden(`This API key lacks the '${needed}' scope`);
}

function handlerFor(ctx: AppContext, route: Route) {
  return async (req: Request, res: Response): Promise<void> => {
    // Validation happens here, once, with the route's own schemas; the handler receives the parsed values.
    const params = route.params ? parse('path', route.params, req.params) : undefined;
    const query = route.query ? parse('query', route.query, req.query) : undefined;
    const body = route.body ? parse('body', route.body, req.body ?? {}) : undefined;
    // One lake session for the whole request (src/lake/session.ts): every statement it builds reads one version's files.
    const out = await route.handler({ query, params, body, req, res }, { ...ctx, lake: ctx.lakeSession() });
    if (out !== undefined && !res.headersSent) res.status(route.status ?? 200).json(out);
  };
}
