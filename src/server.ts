import fs from 'node:fs';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Config } from './config.js';
import { openLakeDb } from './lake/duckdb.js';
import type { Logger } from './log.js';
import { createApp } from './http/app.js';
import type { AppContext } from './http/context.js';
import { keyAuthenticator } from './http/auth.js';
import { StateStore } from './state/store.js';
import { openMeter } from './accounts/meter.js';

/** Builds every service the app needs from the configuration. Tests call this too, on a temp lake and state. */
export async function createContext(config: Config, log: Logger): Promise<AppContext> {
  fs.mkdirSync(config.lakeDir, { recursive: true });
  fs.mkdirSync(config.stateDir, { recursive: true });
  const db = await openLakeDb({
    allowedDirectories: [config.lakeDir, config.stateDir],
    threads: config.duckdbThreads,
    memoryLimit: config.duckdbMemory,
  });
  const state = StateStore.open(config.stateDir);
  return { config, db, log, state, auth: keyAuthenticator(state), meter: openMeter };
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
        server.close(() => {
          ctx.db.closeSync();
          ctx.state.close();
          resolve();
        });
      }),
  };
}
