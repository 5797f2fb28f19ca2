import fs from 'node:fs';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Config } from './config.js';
import { openLakeDb } from './lake/duckdb.js';
import type { Logger } from './log.js';
import { createApp } from './http/app.js';
import type { AppContext } from './http/context.js';
import { accountAuthenticator } from './accounts/auth.js';
import { StateStore } from './state/store.js';
import { sqliteMeter } from './accounts/usage.js';
import { failInterruptedDownloads } from './state/pulls.js';
import { fifoRoot } from './lake/stream.js';
import { ExportService } from './exports/service.js';
import { MarketResolver } from './markets/resolver.js';

/** Builds every service the app needs from the configuration. Tests call this too, on a temp lake and state. */
export async function createContext(config: Config, log: Logger): Promise<AppContext> {
  fs.mkdirSync(config.lakeDir, { recursive: true });
  fs.mkdirSync(config.stateDir, { recursive: true });
  const db = await openLakeDb({
    // fifoRoot(): the private directory of the download/export FIFOs that DuckDB's COPY writes into.
    allowedDirectories: [config.lakeDir, config.stateDir, fifoRoot()],
    threads: config.duckdbThreads,
    memoryLimit: config.duckdbMemory,
  });
  const state = StateStore.open(config.stateDir);
  // Downloads cut off by a crash or restart are refunded (fair-use bytes and rate-limit slot released).
  failInterruptedDownloads(state, new Date());
  const auth = accountAuthenticator(state, { secret: config.jwtSecret, jwksFile: config.jwksFile });
  const ctx = { config, db, log, state, auth, meter: sqliteMeter(state, { log }), markets: new MarketResolver({ db, lakeDir: config.lakeDir }) } as AppContext;
  // Export jobs need the finished context (they plan pulls like downloads do); start() resumes persisted jobs.
  ctx.exports = new ExportService({ ...ctx, lakeDir: config.lakeDir });
  ctx.exports.start();
  return ctx;
}

export type RunningServer = { server: Server; url: string; ctx: AppContext; close(): Promise<void> };

export async function startServer(config: Config, log: Logger): Promise<RunningServer> {
  const ctx = await createContext(config, log);
  const app = createApp(ctx);
  const server = await new Promise<Server>((resolve, reject) => {
    const s = app.listen(config.port, config.host, () => resolve(s));
    s.once('error', reject);
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
          await ctx.exports.close();
          ctx.db.closeSync();
          ctx.state.close();
          resolve();
        });
      }),
  };
}
