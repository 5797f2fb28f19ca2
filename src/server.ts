import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { accountAuthenticator } from './accounts/auth.js';
import { buildCore, type Core } from './compose.js';
import type { Config } from './config.js';
import { createApp } from './http/app.js';
import type { AppContext } from './http/context.js';
import type { Logger } from './log.js';
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
    state: core.state,
    replica: core.replica,
    auth,
    meter: core.meter,
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
  const { core, ctx } = await buildServe(config, log);
  const app = createApp(ctx);
  const server = await new Promise<Server>((resolve, reject) => {
    const s = app.listen(config.port, config.host, () => resolve(s));
    s.once('error', reject);
  }).catch(async (err: unknown) => {
    // Port taken, address unavailable: nothing listens, so nothing may keep running either.
    await core.close();
    throw err;
  });
  const { port } = server.address() as AddressInfo;
  const url = `http://${config.host}:${port}`;
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
