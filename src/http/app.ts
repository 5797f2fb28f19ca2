import crypto from 'node:crypto';
import express, { type Express, type NextFunction, type Request, type Response } from 'express';
import type { AppContext } from './context.js';
import { errorHandler, Forbidden, notFoundHandler, parse, Unauthorized } from './errors.js';
import type { Route } from './route.js';
import { routes } from './routes.js';
import { createRateLimiters, type RateLimiters } from './ratelimit.js';
import { requestCounterFor, type RequestCounter } from '../accounts/requests.js';

declare module 'express-serve-static-core' {
  interface Request {
    log: AppContext['log'];
    /** The exact request body bytes, kept only for webhook routes (signatures are over the raw bytes). */
    rawBody?: Buffer;
  }
  interface Locals {
    /** Rows and bytes a handler served, for the request log line and usage records. */
    rows?: number;
    bytes?: number;
  }
}

/** Builds the Express app: request logging, every route of the table, then 404 and the error mapper. */
export function createApp(ctx: AppContext, table: Route[] = routes): Express {
  const app = express();
  app.disable('x-powered-by');
  app.set('trust proxy', false);
  app.set('query parser', 'extended');
  app.use(requestLog(ctx));
  app.use(
    express.json({
      limit: '1mb',
      verify: (req, _res, buf) => {
        if ((req as Request).url?.startsWith('/v1/billing/webhook/')) (req as Request).rawBody = Buffer.from(buf);
      },
    }),
  );

  app.get('/health', (_req, res) => {
    res.json({ status: 'ok', version: '1.0.0' });
  });

  const limiters = ctx.config.rateLimits ? createRateLimiters() : null;
  const counter = requestCounterFor(ctx.state);
  for (const route of table) {
    app[route.method](route.path, identify(ctx), ...limitsFor(limiters, route), authorize(route), countRequest(counter), handlerFor(ctx, route));
  }

  app.use(notFoundHandler);
  app.use(errorHandler);
  return app;
}

function requestLog(ctx: AppContext) {
  return (req: Request, res: Response, next: NextFunction): void => {
    const id = (req.header('x-request-id') ?? '').slice(0, 64) || crypto.randomUUID();
    req.id = id;
    req.log = ctx.log.child({ req_id: id });
    res.setHeader('X-Request-Id', id);
    const started = process.hrtime.bigint();
    res.on('close', () => {
      const ms = Number(process.hrtime.bigint() - started) / 1e6;
      req.log.info(
        {
          method: req.method,
          route: req.route?.path ?? req.path,
          status: res.statusCode,
          duration_ms: Math.round(ms * 100) / 100,
          rows: res.locals.rows,
          bytes: res.locals.bytes,
          user: req.principal?.userId,
          aborted: !res.writableFinished,
        },
        'request',
      );
    });
    next();
  };
}

/** Resolves credentials when any are sent, so the rate limiter can key on them (bad ones count per IP). */
function identify(ctx: AppContext) {
  return async (req: Request, _res: Response, next: NextFunction): Promise<void> => {
    if (req.header('x-api-key') || req.header('authorization')) req.principal = (await ctx.auth.authenticate(req)) ?? undefined;
    next();
  };
}

/** The default bucket for every route but 'none'; orders and checkouts also take the orders bucket. */
function limitsFor(limiters: RateLimiters | null, route: Route) {
  if (!limiters || route.limit === 'none') return [];
  return route.limit === 'orders' ? [limiters.default, limiters.orders] : [limiters.default];
}

function authorize(route: Route) {
  return (req: Request, _res: Response, next: NextFunction): void => {
    // Public routes still recognise a key when one is sent (per-key rate limits, plan-aware answers).
    if (route.auth === 'public') return next();
    const principal = req.principal;
    if (!principal) throw new Unauthorized('Invalid API key');
    // Bearer-only routes refuse an API key before validating anything (the OpenAPI document says so too).
    if (route.credentials === 'jwt' && principal.authMethod !== 'jwt') throw new Forbidden('This endpoint needs the dashboard bearer token');
    const needed = route.scope ?? 'read';
    if (!principal.scopes.includes(needed)) throw new Forbidden(`This API key lacks the '${needed}' scope`);
    next();
  };
}

/** Counts a caller's request for GET /v1/user/usage once it is answered; 5xx answers are not counted. */
function countRequest(counter: RequestCounter) {
  return (req: Request, res: Response, next: NextFunction): void => {
    const p = req.principal;
    if (p) res.once('finish', () => res.statusCode < 500 && counter.count(p.userId, p.keyId));
    next();
  };
}

function handlerFor(ctx: AppContext, route: Route) {
  return async (req: Request, res: Response): Promise<void> => {
    // Validation happens here, once, with the route's own schemas; handlers read the parsed values.
    if (route.params) res.locals.params = parse('path', route.params, req.params);
    if (route.query) res.locals.query = parse('query', route.query, req.query);
    if (route.body) res.locals.body = parse('body', route.body, req.body ?? {});
    const out = await route.handler(req, res, ctx);
    if (out !== undefined && !res.headersSent) res.status(route.status ?? 200).json(out);
  };
}
