import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { loadConfig, type Config } from '../../src/config.js';
import { createLogger, type Logger } from '../../src/log.js';
import { startServer, type RunningServer } from '../../src/server.js';

/** A fresh temporary directory, removed by the returned cleanup. */
export function tempDir(prefix = 'pmlake-test-'): { dir: string; cleanup(): void } {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
  return { dir, cleanup: () => fs.rmSync(dir, { recursive: true, force: true }) };
}

/** Configuration for a test: the given lake and state dirs, an ephemeral port, quiet logs. */
export function testConfig(overrides: Record<string, string> & { PMLAKE_LAKE: string; PMLAKE_STATE: string }): Config {
  return loadConfig({ PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'silent', PMLAKE_DUCKDB_THREADS: '2', ...overrides });
}

/** The real app on a real loopback port. */
export async function startTestServer(config: Config, log: Logger = createLogger(config.logLevel)): Promise<RunningServer> {
  return startServer(config, log);
}

/** A real key in the test server's state store, created the way `pmlake keys create` does. */
export async function createTestKey(
  srv: RunningServer,
  opts: { email?: string; plan?: 'free' | 'professional'; name?: string; scopes?: ('read' | 'download')[] } = {},
): Promise<string> {
  const store = srv.ctx.state;
  const user = await store.upsertUser(opts.email ?? 'pro@example.com', opts.plan ?? 'professional');
  const { plaintext } = await store.createApiKey({
    userId: user.id,
    name: opts.name ?? 'test',
    prefix: srv.ctx.config.keyPrefix,
    ...(opts.scopes ? { scopes: opts.scopes } : {}),
  });
  return plaintext;
}
