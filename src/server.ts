import { createServer, type RequestListener, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { accountAuthenticator } from './accounts/auth.js';
import { buildCore, type Core } from './compose.js';
import type { Config } from './config.js';
import { createApp } from './http/app.js';
import { answerClientError } from './http/errors.js';
import { createUpgradeHandler, type UpgradeHandler } from './http/upgrade.js';
import type { AppContext } from './http/context.js';
import type { Logger } from './log.js';
import { StartupError } from './errors.js';
import { failInterruptedDownloads, pendingDownloads } from './state/pulls.js';
import { downloadIdPrefix } from './accounts/usage.js';

/**
 * The `serve` role: the core services (src/compose.ts), the authenticator and the Express app on top. The
 * one place outside src/http/ that imports it (the composition root).
 */
async function buildServe(config: Config, log: Logger): Promise<{ core: Core; ctx: AppContext }> {
  const core = await buildCore(config, log);
  // Downloads cut off by this API process's crash or restart are refunded (fair-use bytes and rate-limit slot
  // released): a download lives and dies with the process that streams it. On a shared database only this
  // replica's own (their ids carry its name); the embedded file has one API process.
  const own = core.state.dialect === 'postgres' ? downloadIdPrefix(core.replica) : null;
  const cutOff = await pendingDownloads(core.state, own);
  await failInterruptedDownloads(core.state, new Date(), own);
  // With the download rate in Redis their slots are there: give them back too (best effort; if Redis is away
  // they age out of their window).
  const shared = core.limits.downloadRate;
  if (shared) await Promise.allSettled(cutOff.map((d) => shared.release(d.user_id, d.id)));
  const auth = accountAuthenticator(core.state, { secret: config.jwtSecret, jwksFile: config.jwksFile });
  const ctx: AppContext = {
    config: core.config,
    log: core.log,
    db: core.db,
    lakeSession: core.lakeSession,
    state: core.state,
    replica: core.replica,
    auth,
    meter: core.meter,
    streams: core.streams,
    limits: core.limits,
    markets: core.markets,
    exports: core.exports,
  };
  // The expiry and sweep timers, and the embedded export worker (it resumes jobs this process's restart cut off).
  core.exports.start({ worker: config.embeddedWorker });
  return { core, ctx };
}

/** Builds every service the app needs from the configuration. Tests call this too, on a temp lake and state. */
export async function createContext(config: Config, log: Logger): Promise<AppContext> {
  return (await buildServe(config, log)).ctx;
}

export type RunningServer = { server: Server; url: string; ctx: AppContext; close(): Promise<void> };

export async function startServer(config: Config, log: Logger): Promise<RunningServer> {
  // The address is taken before anything else: a second `serve` pointed at a busy port must stop before it
  // touches the state (it would fail the running server's downloads as cut off) or starts an export worker.
  let app: RequestListener | null = null;
  const server = createServer((req, res) => {
    if (app) return void app(req, res);
    res.writeHead(503, { 'content-type': 'application/json', 'retry-after': '1' }).end('{"detail":"Server starting; retry shortly"}');
  });
  // What Node's parser refuses (headers too large, a NUL in the path, …) never reaches the app: a JSON answer all the same.
  server.on('clientError', (err: Error & { code?: string }, socket) => {
    const status = answerClientError(err, socket);
    if (status !== null) log.info({ status, code: err.code }, 'request refused by the HTTP parser');
  });
  // WebSocket handshakes (the replay endpoints) arrive as upgrades, not requests: the same gate before the app is up.
  let upgrade: UpgradeHandler | null = null;
  server.on('upgrade', (req, socket, head) => {
    if (upgrade) return void upgrade(req, socket, head);
    socket.end(
      'HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nRetry-After: 1\r\nConnection: close\r\n\r\n{"detail":"Server starting; retry shortly"}',
    );
  });
  await listen(server, config.port, config.host);
  let built: Awaited<ReturnType<typeof buildServe>>;
  try {
    built = await buildServe(config, log);
  } catch (err) {
    await new Promise((r) => server.close(r));
    throw err;
  }
  const { core, ctx } = built;
  app = createApp(ctx);
  upgrade = createUpgradeHandler(ctx);
  const { port } = server.address() as AddressInfo;
  const url = `http://${hostPort(config.host, port)}`;
  return {
    server,
    url,
    ctx,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(async () => {
          await core.close();
          resolve();
        });
      }),
  };
}

function hostPort(host: string, port: number): string {
  return host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`;
}

/** Listens, or fails in words the operator acts on (the address taken, not on this machine, not allowed). */
function listen(server: Server, port: number, host: string): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    const onError = (err: NodeJS.ErrnoException): void => {
      const at = hostPort(host, port);
      const why: Record<string, string> = {
        EADDRINUSE: `address ${at} is already in use (another process listens there; set PORT or HOST)`,
        EADDRNOTAVAIL: `address ${at} is not available: no interface of this machine has that address (HOST)`,
        EACCES: `permission denied to listen on ${at} (ports below 1024 need privileges; set PORT)`,
      };
      const message = err.code ? why[err.code] : undefined;
      reject(message ? new StartupError(message) : err);
    };
    server.once('error', onError);
    server.listen(port, host, () => {
      server.off('error', onError);
      resolve();
    });
  });
}
