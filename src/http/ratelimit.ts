import type { Request, Response } from 'express';
import { ipKeyGenerator } from 'express-rate-limit';
import { planOf } from '../accounts/plans.js';
import type { Principal } from '../accounts/principal.js';
import { RateLimited } from '../errors.js';
import type { CounterStore, Hits, Limits } from '../limits/index.js';

/**
 * Request rate limiting. One limiter per family, each counting in a store of the core's limits (src/limits/):
 * in this process's memory by default, in Redis shared by every replica when PMLAKE_REDIS_URL is set (then the
 * 61st request of a minute is refused whichever replica serves it). A store that cannot be reached rejects with
 * the core's Unavailable: the request is answered 503 by the error mapper, counted nowhere, never let through.
 *
 * - default: the plan's requests per minute (60) per API key, per user for dashboard JWTs, per IP when anonymous.
 * - orders: 5 per minute for placing orders and starting checkouts, on top of the default bucket.
 * Fixed one-minute windows starting at a bucket's first hit; a 5xx response, or a request whose answer never
 * went out, gives its slot back (the spec: a failed request is refunded). Headers as express-rate-limit's
 * legacy set: X-RateLimit-Limit, -Remaining, -Reset (epoch seconds), and Retry-After (seconds) on a 429.
 *
 * The limiter is our own rather than express-rate-limit's middleware: with refunds on, that one allocates three
 * promises and three response listeners per request and awaits five times, which was a tenth of the busy time
 * of `GET /v1/markets/{id}` under load. This one does a Map lookup and adds one listener.
 */
export const ORDERS_PER_MINUTE = 5;
const WINDOW_MS = 60_000;

// The counters live in the core (src/limits/): in memory by default, in Redis across replicas. Re-exported for
// the store's own tests.
export { MemoryCounterStore, type CounterStore, type Hits } from '../limits/index.js';

/**
 * A limiter counts the request and sets the X-RateLimit-* headers; it answers 429 itself and returns false
 * when the bucket is over its limit, true when the request may go on. Asynchronous only with a shared store.
 */
export type Limiter = (req: Request, res: Response) => boolean | Promise<boolean>;
export type RateLimiters = { default: Limiter; orders: Limiter };

/** Whose bucket a request counts against. Runs after the credentials were resolved (req.principal). */
export function rateKey(req: Request): string {
  const p = req.principal;
  if (p) return principalKey(p);
  return `ip:${ipKeyGenerator(req.ip ?? req.socket.remoteAddress ?? 'unknown')}`;
}

function principalKey(p: Principal): string {
  return p.keyId ? `key:${p.keyId}` : `user:${p.userId}`;
}

/**
 * A WebSocket handshake (a replay) counted in the caller's default bucket like any request. It is no Express
 * request, so the replay's gate counts it here, once the caller is known, and a refusal is the same 429 with the
 * same headers. The returned function gives the slot back, for a handshake refused with a 5xx.
 */
export async function countUpgrade(limits: Limits, principal: Principal): Promise<() => void> {
  const store = limits.counters('default', WINDOW_MS);
  const key = principalKey(principal);
  const got = await store.increment(key, Date.now());
  const limit = planOf(principal.plan).requests_per_minute;
  if (got.hits > limit) {
    throw new RateLimited((got.resetAt - Date.now()) / 1000, {
      'X-RateLimit-Limit': String(limit),
      'X-RateLimit-Remaining': '0',
      'X-RateLimit-Reset': String(Math.ceil(got.resetAt / 1000)),
    });
  }
  return () => {
    const done = store.decrement(key, got.resetAt);
    if (done instanceof Promise) done.catch(() => {});
  };
}

function limiter(limitOf: (req: Request) => number, store: CounterStore): Limiter {
  const apply = (req: Request, res: Response, key: string, got: Hits): boolean => {
    const limit = limitOf(req);
    // Read now: the store's window object keeps counting later requests.
    const hits = got.hits;
    if (!res.headersSent) {
      res.setHeader('X-RateLimit-Limit', String(limit));
      res.setHeader('X-RateLimit-Remaining', String(Math.max(limit - hits, 0)));
      res.setHeader('X-RateLimit-Reset', String(Math.ceil(got.resetAt / 1000)));
    }
    if (hits > limit) {
      // The refused request keeps its hit (a 429 is not a failure), as with express-rate-limit.
      res.setHeader('Retry-After', String(Math.max(0, Math.ceil((got.resetAt - Date.now()) / 1000))));
      res.status(429).json({ detail: 'Rate limit exceeded' });
      return false;
    }
    // 'close' is emitted once per response; `on` spares the once-wrapper.
    res.on('close', () => {
      // 4xx answers still count (a client hammering with bad requests is limited); only 5xx, or an answer
      // that never went out (client gone, handler crashed), give the slot back.
      if (!res.writableEnded || res.statusCode >= 500) {
        const done = store.decrement(key, got.resetAt);
        if (done instanceof Promise) done.catch(() => {});
      }
    });
    return true;
  };
  return (req, res) => {
    // Each family counts in its own store (namespaced by family in a shared one): the key is the caller's.
    const key = rateKey(req);
    const got = store.increment(key, Date.now());
    return got instanceof Promise ? got.then((g) => apply(req, res, key, g)) : apply(req, res, key, got);
  };
}

export function createRateLimiters(limits: Limits): RateLimiters {
  return {
    default: limiter((req) => (req.principal ? planOf(req.principal.plan).requests_per_minute : 60), limits.counters('default', WINDOW_MS)),
    orders: limiter(() => ORDERS_PER_MINUTE, limits.counters('orders', WINDOW_MS)),
  };
}
