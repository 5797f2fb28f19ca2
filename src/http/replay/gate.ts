import { STATUS_CODES, type IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import type { z } from 'zod';
import type { UsageTicket } from '../../accounts/meter.js';
import type { Principal } from '../../accounts/principal.js';
import type { LiveStream } from '../../accounts/streams.js';
import { Forbidden, parse, ServiceError, Unauthorized, Unavailable } from '../../errors.js';
import type { AppContext } from '../context.js';
import { statusOf } from '../errors.js';
import { countUpgrade } from '../ratelimit.js';

/**
 * What a replay's handshake passes before it is upgraded, the same rules as a download of the raw tape: its
 * query parsed by zod (422 naming the parameter), the credentials (`X-API-Key`, or the `api_key` query parameter
 * a browser's WebSocket must use; 401), the caller's request rate (counted in the same bucket as its HTTP
 * requests; 429), the `download` scope (403), the user's open streams (`PMLAKE_STREAMS_PER_USER`: 429 with
 * Retry-After), the process's replays (overload: 503), then the usage meter's `begin` — the plan covers the
 * data set (402), the download rate (429 with Retry-After), fair use left (429). A refusal is an ordinary HTTP
 * answer with the JSON `detail`, written on the socket before any upgrade; nothing is charged.
 */
export type ReplayGrant<Q> = {
  principal: Principal;
  query: Q;
  ticket: UsageTicket;
  /** The replay among the user's streams: fair use taken frame by frame, stopped when no longer allowed. */
  live: LiveStream;
};

export type ReplayGateSpec<S extends z.ZodType> = {
  query: S;
  /** The plan data set the replay bills, as downloads name it (`raw` for the venue's own frames). */
  dataset: string | ((q: z.infer<S>) => string);
  /** Every plan data set the replay serves (the billed one first), when more than `dataset`: its standing is checked against each. */
  datasets?(q: z.infer<S>): string[];
  /**
   * More refusals before the meter's `begin`, thrown as the core's errors: each further data set's plan
   * (`ctx.meter.authorize`), assets the lake must know. Runs after the key and scope checks.
   */
  authorize?(q: z.infer<S>, principal: Principal, ctx: AppContext): Promise<void>;
  describe(q: z.infer<S>): { description: string; start: string | null; end: string | null };
};

/** Replays running in this process at most at once: each holds a socket and a lake reader for its whole window. */
export const MAX_CONCURRENT_REPLAYS = 200;

export async function admitReplay<S extends z.ZodType>(
  ctx: AppContext,
  req: IncomingMessage,
  spec: ReplayGateSpec<S>,
  running: number,
): Promise<ReplayGrant<z.infer<S>>> {
  const url = new URL(req.url ?? '/', 'http://replay');
  const raw = Object.fromEntries(url.searchParams);
  const { api_key: queryKey, ...rest } = raw;
  const query = parse('query', spec.query, rest);
  const header = req.headers['x-api-key'];
  const apiKey = (Array.isArray(header) ? header[0] : header) ?? queryKey;
  const authorization = req.headers.authorization;
  const principal = apiKey !== undefined || authorization !== undefined ? await ctx.auth.authenticate({ apiKey, authorization }) : null;
  if (!principal) throw new Unauthorized('Invalid API key');
  const refund = ctx.config.rateLimits ? await countUpgrade(ctx.limits, principal) : () => {};
  try {
    return await admitKnown(ctx, spec, query, principal, running);
  } catch (err) {
    // As for any request: a refusal of the caller's (4xx) keeps its hit, a failure of the server's gives it back.
    if (!(err instanceof ServiceError) || statusOf(err) >= 500) refund();
    throw err;
  }
}

async function admitKnown<S extends z.ZodType>(
  ctx: AppContext,
  spec: ReplayGateSpec<S>,
  query: z.infer<S>,
  principal: Principal,
  running: number,
): Promise<ReplayGrant<z.infer<S>>> {
  if (!principal.scopes.includes('download')) throw new Forbidden("This API key lacks the 'download' scope");
  const dataset = typeof spec.dataset === 'string' ? spec.dataset : spec.dataset(query);
  // The user's share first (429), then the process's overload cap (503).
  const live = ctx.streams.admit(principal, spec.datasets?.(query) ?? [dataset]);
  try {
    if (running >= MAX_CONCURRENT_REPLAYS) throw new Unavailable('Server busy: too many replays in progress; retry shortly', 5);
    await spec.authorize?.(query, principal, ctx);
    const d = spec.describe(query);
    const ticket = await ctx.meter.begin(principal, {
      kind: 'download',
      dataset,
      description: d.description,
      // Unknown before the client subscribes: the stream reserves its bytes as it goes (LiveStream.take).
      estimatedBytes: 0,
      format: 'websocket',
      start: d.start,
      end: d.end,
    });
    live.bind(ticket);
    return { principal, query, ticket, live };
  } catch (err) {
    live.close();
    throw err;
  }
}

/** A refusal as the HTTP answer every other endpoint gives: status, JSON `detail`, the error's headers. */
export function refuseUpgrade(socket: Duplex, err: unknown): void {
  const known = err instanceof ServiceError;
  const status = known ? statusOf(err) : 500;
  const body = JSON.stringify({ detail: known ? err.detail : 'Internal server error' });
  const headers = [
    `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? ''}`,
    'Content-Type: application/json',
    `Content-Length: ${Buffer.byteLength(body)}`,
    'Connection: close',
  ];
  if (known) for (const [k, v] of Object.entries(err.headers)) headers.push(`${k}: ${v}`);
  if (!socket.destroyed) socket.end(`${headers.join('\r\n')}\r\n\r\n${body}`);
}
