import type { Request, Response } from 'express';
import type { z } from 'zod';
import type { RequestContext } from './context.js';
import type { CostClass } from './admission.js';

/** The zod schemas a route validates its query, path and body with (each optional). */
export type RouteSchemas = { query?: z.ZodType; params?: z.ZodType; body?: z.ZodType };

/** The value a schema of S parses to, or undefined when the route has no such schema. */
type Parsed<S, K extends keyof RouteSchemas> = S extends { [k in K]: infer T extends z.ZodType } ? z.output<T> : undefined;

/**
 * What a handler receives: the request's query, path parameters and body as the gate (src/http/app.ts) parsed
 * them with the route's own schemas, plus the request and response. Declared from the schemas, e.g.
 * `RouteInput<{ query: typeof ListQuery; params: typeof MarketParams }>`.
 */
export type RouteInput<S = object> = {
  query: Parsed<S, 'query'>;
  params: Parsed<S, 'params'>;
  body: Parsed<S, 'body'>;
  req: Request;
  res: Response;
};

/** A route handler: returns a JSON body, or undefined when it wrote the response itself (streams, redirects). */
export type Handler<S = object> = (input: RouteInput<S>, ctx: RequestContext) => Promise<unknown>;

/**
 * One endpoint: its method, path, who may call it and the zod schemas its handler's input is parsed with. The
 * same schemas generate /v1/openapi.json, so the description cannot drift from what is enforced.
 */
export type RouteMeta = {
  method: 'get' | 'post' | 'delete';
  /** Express path, e.g. /v1/markets/:market_id */
  path: string;
  /** 'public': no key; 'key': X-API-Key (or the dashboard bearer JWT where the accounts module allows it). */
  auth: 'public' | 'key';
  /**
   * Credentials a keyed route takes (for the OpenAPI document): 'any' (default) = X-API-Key or the legacy
   * dashboard bearer JWT (src/accounts/auth.ts accountAuthenticator); 'jwt' = the bearer token only (the handler
   * refuses an API key).
   */
  credentials?: 'any' | 'jwt';
  /** Scope a key needs beyond 'read' (downloads and exports need 'download'). */
  scope?: 'read' | 'download';
  /**
   * Cost class for load shedding (src/http/admission.ts): 'cheap' = catalogue, account and metadata lookups
   * that never scan big Parquet (unbounded by default); 'query' = scans of the lake (trades, OHLCV, books,
   * estimates); 'stream' = downloads and other long responses. Bounded classes queue FIFO, then answer 503.
   */
  cost: CostClass;
  /**
   * When the class's slot is taken: 'gate' (default) before the handler runs; 'handler' when the handler calls
   * `res.locals.admit()`, just before its scan — so an answer it already holds (a kept page) waits for no slot.
   */
  admission?: 'gate' | 'handler';
  /** Rate-limit family; defaults to the general request limit. */
  limit?: 'default' | 'download' | 'orders' | 'none';
  tag: string;
  summary: string;
  /** Schema of a JSON success response, for the OpenAPI document. */
  response?: z.ZodType;
  /** Status of a successful response (default 200). */
  status?: number;
  /**
   * A list that pages: it answers `Link: <…>; rel="next"` when it stopped at its limit while more rows match
   * (./next-link.ts), and the OpenAPI document says so on its success response.
   */
  paged?: boolean;
  /** Media types of a success response that is not (only) JSON, e.g. ['text/html'] or ['text/csv', 'application/vnd.apache.parquet']; for the OpenAPI document. */
  produces?: string[];
};

/** A row of the route table (src/http/routes.ts); rows are made with defineRoute, which types the handler. */
export type Route = RouteMeta &
  RouteSchemas & {
    /**
     * Method syntax on purpose: its parameter is checked bivariantly, so a handler typed for its own schemas'
     * outputs fits the table's common row. Sound because the gate parses with these very schemas.
     */
    handler(input: { query: unknown; params: unknown; body: unknown; req: Request; res: Response }, ctx: RequestContext): Promise<unknown>;
  };

/**
 * A route whose handler receives its query, path and body typed as the outputs of the route's schemas, with no
 * cast: `defineRoute({ method: 'get', path: '/v1/x', query: XQuery, …, handler: listX })`.
 */
export function defineRoute<
  Q extends z.ZodType | undefined = undefined,
  P extends z.ZodType | undefined = undefined,
  B extends z.ZodType | undefined = undefined,
>(route: RouteMeta & { query?: Q; params?: P; body?: B; handler: Handler<NoInfer<{ query: Q; params: P; body: B }>> }): Route {
  return route;
}
