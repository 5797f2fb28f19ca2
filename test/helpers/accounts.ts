import type { RunningServer } from '../../src/server.js';

/** Small fetch wrappers for the accounts tests: JSON in, status + headers + JSON out. */
export type Reply = { status: number; headers: Headers; body: any };

export async function call(
  srv: RunningServer | string,
  method: string,
  path: string,
  opts: { key?: string; bearer?: string; body?: unknown; headers?: Record<string, string> } = {},
): Promise<Reply> {
  const base = typeof srv === 'string' ? srv : srv.url;
  const headers: Record<string, string> = { ...(opts.headers ?? {}) };
  if (opts.key) headers['X-API-Key'] = opts.key;
  if (opts.bearer) headers.Authorization = `Bearer ${opts.bearer}`;
  if (opts.body !== undefined) headers['Content-Type'] = 'application/json';
  const res = await fetch(`${base}${path}`, {
    method,
    headers,
    ...(opts.body !== undefined ? { body: JSON.stringify(opts.body) } : {}),
    redirect: 'manual',
  });
  const text = await res.text();
  let body: any = text;
  try {
    body = text ? JSON.parse(text) : null;
  } catch {
    // HTML pages and empty bodies stay text.
  }
  return { status: res.status, headers: res.headers, body };
}

import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Config } from '../../src/config.js';
import { createLogger } from '../../src/log.js';
import { createContext } from '../../src/server.js';
import { createApp } from '../../src/http/app.js';
import type { Route } from '../../src/http/route.js';

/** Like startServer, but with a route table of the test's choosing (test-only routes, e.g. one that fails). */
export async function startWithTable(config: Config, table: Route[]): Promise<RunningServer> {
  const ctx = await createContext(config, createLogger(config.logLevel));
  const app = createApp(ctx, table);
  const server = await new Promise<Server>((resolve) => {
    const s = app.listen(0, '127.0.0.1', () => resolve(s));
  });
  const { port } = server.address() as AddressInfo;
  return {
    server,
    url: `http://127.0.0.1:${port}`,
    ctx,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(async () => {
          // As the core's close does: the export worker stops first, then the databases it used.
          await ctx.exports.close();
          ctx.db.closeSync();
          await ctx.state.close();
          resolve();
        });
      }),
  };
}
