import type { Request, RequestHandler, Response } from 'express';
import { ipKeyGenerator, MemoryStore, rateLimit, type Store } from 'express-rate-limit';
import { planOf } from '../accounts/plans.js';

/**
 * Request rate limiting. One limiter per family, each with its own store from `makeStore` — the single place to
 * swap the in-memory store for a Redis-compatible one (e.g. rate-limit-redis) when pmlake runs several replicas.
 *
 * - default: the plan's requests per minute (60) per API key, per user for dashboard JWTs, per IP when anonymous.
 * - orders: 5 per minute for placing orders and starting checkouts, on top of the default bucket.
 * Fixed one-minute windows; a 5xx response gives its slot back (the spec: a failed request is refunded).
 */
export const ORDERS_PER_MINUTE = 5;
const WINDOW_MS = 60_000;

export function makeStore(): Store {
  return new MemoryStore();
}

export type RateLimiters = { default: RequestHandler; orders: RequestHandler };

/** Whose bucket a request counts against. Runs after the credentials were resolved (req.principal). */
export function rateKey(req: Request): string {
  const p = req.principal;
  if (p) return p.keyId ? `key:${p.keyId}` : `user:${p.userId}`;
  return `ip:${ipKeyGenerator(req.ip ?? req.socket.remoteAddress ?? 'unknown')}`;
}

function limiter(limit: (req: Request) => number, prefix: string): RequestHandler {
  return rateLimit({
    windowMs: WINDOW_MS,
    limit: (req: Request) => limit(req),
    keyGenerator: (req: Request) => `${prefix}:${rateKey(req)}`,
    store: makeStore(),
    legacyHeaders: true,
    standardHeaders: false,
    skipFailedRequests: true,
    // 4xx answers still count (a client hammering with bad requests is limited); only 5xx give the slot back.
    requestWasSuccessful: (_req: Request, res: Response) => res.statusCode < 500,
    handler: (_req: Request, res: Response) => {
      res.status(429).json({ detail: 'Rate limit exceeded' });
    },
    validate: { trustProxy: false, xForwardedForHeader: false },
  });
}

export function createRateLimiters(): RateLimiters {
  return {
    default: limiter((req) => (req.principal ? planOf(req.principal.plan).requests_per_minute : 60), 'default'),
    orders: limiter(() => ORDERS_PER_MINUTE, 'orders'),
  };
}
