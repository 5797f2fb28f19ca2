import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import { WebSocketServer, type WebSocket } from 'ws';
import type { z } from 'zod';
import { ServiceError } from '../../errors.js';
import type { ReadCounters } from '../../replay/frames.js';
import type { AppContext } from '../context.js';
import { admitReplay, refuseUpgrade, type ReplayGateSpec, type ReplayGrant } from './gate.js';
import { marketReplayGate, runMarketReplay } from './market.js';
import { normalizedReplayGate, runNormalizedReplay } from './normalized.js';
import type { ReplayStreamEnd } from './stream.js';

export { serveReplayStream, close, CLOSE, type ReplayStreamItem, type ReplayStreamOptions, type ReplayStreamEnd } from './stream.js';
export { admitReplay, refuseUpgrade, type ReplayGrant, type ReplayGateSpec } from './gate.js';

/** The replay server's own figures: what tests and a bench read to see it keep memory bounded and stop on time. */
export type ReplayCounters = ReadCounters & {
  /** Connections upgraded, and those still open. */
  accepted: number;
  open: number;
  framesSent: number;
  bytesSent: number;
  /** Replays that ended because the client left (the lake read stopped with them). */
  left: number;
};

export type ReplayServer = {
  /** Handles an upgrade whose path is one of `paths`; false when the path is not a replay's. */
  handle(req: IncomingMessage, socket: Duplex, head: Buffer, path: string): boolean;
  readonly paths: readonly string[];
  readonly counters: ReplayCounters;
};

/**
 * One replay endpoint: its gate (what the handshake must pass) and what runs on the socket once it is upgraded.
 * `run` resolves with what it sent (`refused` when it closed the socket before sending anything): the ticket is
 * then settled once — the bytes sent committed, or refunded when nothing went out or the server failed.
 */
export type ReplayEndpointSpec<S extends z.ZodType> = {
  gate: ReplayGateSpec<S>;
  run(ws: WebSocket, grant: ReplayGrant<z.infer<S>>, counters: ReplayCounters): Promise<ReplayStreamEnd | { reason: 'refused' }>;
};

/** An endpoint with its query type sealed in: the gate's grant goes only to its own `run`. */
export type ReplayEndpoint = {
  admit(ctx: AppContext, req: IncomingMessage, running: number): Promise<SealedGrant>;
};

/** A granted replay: its ticket and principal, and its run with the parsed query bound. */
type SealedGrant = {
  grant: Pick<ReplayGrant<unknown>, 'principal' | 'ticket' | 'live'>;
  run(ws: WebSocket, counters: ReplayCounters): Promise<ReplayStreamEnd | { reason: 'refused' }>;
};

export function replayEndpoint<S extends z.ZodType>(e: ReplayEndpointSpec<S>): ReplayEndpoint {
  return {
    async admit(ctx, req, running) {
      const grant = await admitReplay(ctx, req, e.gate, running);
      return { grant, run: (ws, counters) => e.run(ws, grant, counters) };
    },
  };
}

/** The replay endpoints of `serve`, each on its path: the table below, and `extra` (another stream: `replayEndpoint({ gate, run })` whose run calls serveReplayStream). */
export function createReplayServer(ctx: AppContext, extra: Record<string, ReplayEndpoint> = {}): ReplayServer {
  const wss = new WebSocketServer({ noServer: true, perMessageDeflate: false, maxPayload: 1 << 20 });
  const counters: ReplayCounters = { accepted: 0, open: 0, framesSent: 0, bytesSent: 0, framesRead: 0, pages: 0, left: 0 };
  const endpoints: Record<string, ReplayEndpoint> = {
    '/v1/replay/ws/market': replayEndpoint({
      gate: marketReplayGate,
      run: (ws, grant, c) =>
        runMarketReplay(ws, grant.query, {
          session: ctx.lakeSession(),
          markets: ctx.markets,
          counters: c,
          live: grant.live,
          onSent: (n) => {
            c.framesSent++;
            c.bytesSent += n;
          },
        }),
    }),
    '/v1/replay/ws/normalized': replayEndpoint({
      gate: normalizedReplayGate({ session: () => ctx.lakeSession(), markets: ctx.markets }),
      run: (ws, grant, c) =>
        runNormalizedReplay(ws, grant.query, {
          session: ctx.lakeSession(),
          markets: ctx.markets,
          principal: grant.principal,
          live: grant.live,
          onSent: (n) => {
            c.framesSent++;
            c.bytesSent += n;
          },
        }),
    }),
    ...extra,
  };
  let running = 0;

  const serve = async (endpoint: ReplayEndpoint, req: IncomingMessage, socket: Duplex, head: Buffer): Promise<void> => {
    socket.on('error', () => {});
    // Counted from the handshake on, so handshakes admitted at once cannot pass the limit together.
    running++;
    try {
      let sealed: SealedGrant;
      try {
        sealed = await endpoint.admit(ctx, req, running - 1);
      } catch (err) {
        if (!(err instanceof ServiceError)) ctx.log.error({ err, url: req.url }, 'replay refused by a failure');
        return refuseUpgrade(socket, err);
      }
      await upgraded(sealed, req, socket, head);
    } finally {
      running--;
    }
  };

  /** Runs a granted replay on its upgraded socket and settles its ticket once. */
  const upgraded = async (sealed: SealedGrant, req: IncomingMessage, socket: Duplex, head: Buffer): Promise<void> => {
    const { grant } = sealed;
    try {
      await runUpgraded(sealed, req, socket, head);
    } finally {
      grant.live.close();
    }
  };

  const runUpgraded = async (sealed: SealedGrant, req: IncomingMessage, socket: Duplex, head: Buffer): Promise<void> => {
    const { grant } = sealed;
    if (socket.destroyed) return void (await grant.ticket.refund('client left before the upgrade'));
    // A handshake ws refuses (no Sec-WebSocket-Key, a wrong version) is answered 400 by it and never upgraded.
    const ws = await new Promise<WebSocket | null>((resolve) => {
      socket.once('close', () => resolve(null));
      wss.handleUpgrade(req, socket, head, resolve);
    });
    if (!ws) return void (await grant.ticket.refund('handshake failed'));
    ws.on('error', () => {});
    counters.accepted++;
    counters.open++;
    let end: ReplayStreamEnd | { reason: 'refused' };
    try {
      end = await sealed.run(ws, counters);
    } catch (err) {
      end = { reason: 'error', frames: 0, bytes: 0, pacing: { paced: 0, lateMsMax: 0, lateMsMean: 0 }, error: err };
      ws.terminate();
    } finally {
      counters.open--;
    }
    if (end.reason === 'left') counters.left++;
    if (end.reason === 'refused' || end.reason === 'error' || end.bytes === 0) {
      await grant.ticket.refund(end.reason === 'error' ? 'replay failed' : 'nothing sent');
    } else {
      await grant.ticket.commit({ bytes: end.bytes, rows: end.frames });
    }
    if (end.reason === 'error') ctx.log.error({ err: end.error, url: req.url }, 'replay failed');
    else ctx.log.info({ url: req.url, user: grant.principal.userId, ...end }, 'replay ended');
  };

  const server: ReplayServer = {
    paths: Object.keys(endpoints),
    counters,
    handle(req, socket, head, path) {
      const endpoint = endpoints[path];
      if (!endpoint) return false;
      void serve(endpoint, req, socket, head).catch((err: unknown) => {
        ctx.log.error({ err, url: req.url }, 'replay crashed');
        socket.destroy();
      });
      return true;
    },
  };
  servers.set(ctx, server);
  return server;
}

const servers = new WeakMap<AppContext, ReplayServer>();

/** The replay server of a running `serve` (its counters), by the server's context. */
export function replayServerOf(ctx: AppContext): ReplayServer | undefined {
  return servers.get(ctx);
}
