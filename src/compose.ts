import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { DuckDBInstance } from '@duckdb/node-api';
import type { UsageMeter } from './accounts/meter.js';
import { StreamRegistry } from './accounts/streams.js';
import { downloadIdPrefix, sqliteMeter } from './accounts/usage.js';
import type { Config } from './config.js';
import { ExportService } from './exports/service.js';
import { openLakeDb } from './lake/duckdb.js';
import { LakeSession } from './lake/session.js';
import { closeIdleConnections } from './lake/runner.js';
import { holdFifoRoot } from './lake/stream.js';
import { openLimits, type Limits } from './limits/index.js';
import type { Logger } from './log.js';
import { MarketResolver } from './markets/resolver.js';
import { StateStore } from './state/store.js';

/**
 * The core services of a pmlake process, whatever its role: the lake database, the state store, the usage
 * meter, market resolution and the export service. Each is built once, here, in dependency order, from the
 * configuration; nothing in them knows of HTTP. A role adds its own on top: `serve` (src/server.ts) the
 * authenticator, the Express app and (unless PMLAKE_EMBEDDED_WORKER=off) an export worker; `worker`
 * (src/worker.ts) only the export worker.
 */
export type Core = {
  readonly config: Config;
  readonly log: Logger;
  readonly db: DuckDBInstance;
  /**
   * A new lake session (src/lake/session.ts): the lake database and one version, pinned at first use. The HTTP
   * gate opens one per request, the export worker one per job.
   */
  readonly lakeSession: () => LakeSession;
  /** The state database: the embedded SQLite file, or PostgreSQL shared by every replica (PMLAKE_DATABASE_URL). */
  readonly state: StateStore;
  /** The replica's name: PMLAKE_REPLICA_ID, else host and port (src/accounts/usage.ts downloadIdPrefix). */
  readonly replica: string;
  readonly meter: UsageMeter;
  /** The long-lived answers in flight (src/accounts/streams.ts): per-user caps, fair use across them, standing. */
  readonly streams: StreamRegistry;
  /** Where limits count (src/limits/): this process's memory, or Redis shared by every replica (PMLAKE_REDIS_URL). */
  readonly limits: Limits;
  /** market_id → market and tokens, cached per lake version (src/markets/resolver.ts). */
  readonly markets: MarketResolver;
  /** Export jobs (src/exports/service.ts): queue, object store, signed links. Not started: the role starts it. */
  readonly exports: ExportService;
  /**
   * Stops the export jobs, then closes the lake database, the state store and the limits' connection, and lets
   * go of the FIFO folder.
   */
  close(): Promise<void>;
};

export async function buildCore(config: Config, log: Logger, role: 'serve' | 'worker' = 'serve'): Promise<Core> {
  fs.mkdirSync(config.lakeDir, { recursive: true });
  fs.mkdirSync(config.stateDir, { recursive: true });
  if (isWithin(config.stateDir, config.lakeDir)) {
    log.warn(
      { lake: config.lakeDir, state: config.stateDir },
      'the state directory is inside the lake: DuckDB can read the accounts database; move PMLAKE_STATE out of PMLAKE_LAKE',
    );
  }
  // DuckDB may touch the lake and this process's private FIFO folder (COPY writes there), nothing else: not
  // the state directory (accounts database, link secret, the local export store, whose parts Node writes from
  // the FIFO's read side), not the rest of the temp directory.
  const fifos = holdFifoRoot();
  let db: DuckDBInstance;
  try {
    db = await openLakeDb({ allowedDirectories: [config.lakeDir, fifos.dir], threads: config.duckdbThreads, memoryLimit: config.duckdbMemory });
  } catch (err) {
    fifos.release();
    throw err;
  }
  let state: StateStore | null = null;
  let limits: Limits | null = null;
  try {
    // PostgreSQL unreachable at start: the process does not start (migrations must be applied first).
    state = await StateStore.connect({ stateDir: config.stateDir, databaseUrl: config.databaseUrl, log, role });
    log.info({ state: state.dialect }, 'state database');
    // Never fails on an unreachable Redis: the service starts and limited routes answer 503 until it is back.
    limits = await openLimits(config.redisUrl, log);
    log.info({ limits: limits.where }, 'limits');
    const replica = config.replicaId ?? `${os.hostname()}:${config.port}`;
    const meter = sqliteMeter(state, { log, downloadRate: limits.downloadRate, downloadIdPrefix: downloadIdPrefix(replica) });
    const streams = new StreamRegistry(state, { perUser: config.streamsPerUser, log });
    const lakeDir = config.lakeDir;
    const lakeSession = (): LakeSession => new LakeSession(db, lakeDir);
    const markets = new MarketResolver();
    const exports = new ExportService({ lakeSession, markets, state, meter, log, config });
    const opened = state;
    const openedLimits = limits;
    return {
      config,
      log,
      db,
      lakeSession,
      state,
      replica,
      meter,
      streams,
      limits,
      markets,
      exports,
      async close() {
        streams.close();
        await exports.close();
        closeIdleConnections(db);
        db.closeSync();
        await opened.close();
        await openedLimits.close();
        fifos.release();
      },
    };
  } catch (err) {
    // A half-built core (unreadable state, a bad link secret) must not keep the lake database open.
    await state?.close();
    await limits?.close();
    closeIdleConnections(db);
    db.closeSync();
    fifos.release();
    throw err;
  }
}

function isWithin(dir: string, parent: string): boolean {
  const rel = path.relative(path.resolve(parent), path.resolve(dir));
  return rel === '' || (!rel.startsWith('..') && !path.isAbsolute(rel));
}
