import type { DuckDBInstance } from '@duckdb/node-api';
import type { Config } from '../config.js';
import type { Logger } from '../log.js';
import type { Authenticator } from '../accounts/principal.js';
import type { StateStore } from '../state/store.js';
import type { UsageMeter } from '../accounts/meter.js';
import type { ExportService } from '../exports/service.js';
import type { MarketResolver } from '../markets/resolver.js';

/**
 * What handlers get: configuration, the read-only lake database, the logger and the services other modules
 * own (state store, exports, billing). Built once in src/server.ts; tests build it the same way.
 */
export type AppContext = {
  config: Config;
  db: DuckDBInstance;
  log: Logger;
  state: StateStore;
  auth: Authenticator;
  meter: UsageMeter;
  /** market_id → market and tokens, cached per lake version (src/markets/resolver.ts). */
  markets: MarketResolver;
  /** Export jobs (src/exports/service.ts): queue, object store, presigned links. */
  exports: ExportService;
};
