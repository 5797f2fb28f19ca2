import type { UsageMeter } from '../accounts/meter.js';
import type { Config } from '../config.js';
import type { LakeSession } from '../lake/session.js';
import type { Logger } from '../log.js';
import type { MarketResolver } from '../markets/resolver.js';
import type { StateStore } from '../state/store.js';

/** The configuration export jobs read: queue width, retention, the sweep's bound, the store, link signing. */
export type ExportConfig = Pick<
  Config,
  'exportConcurrency' | 'exportRetentionHours' | 'exportStaleUploadHours' | 'exportLeaseSeconds' | 's3' | 'linkSecret' | 'stateDir'
>;

/**
 * What the export service and its jobs use, and nothing else: the lake (a session per job: planning, the COPY), the job records
 * and the meter in the state store, the logger, and their slice of the configuration. Built by the
 * composition root (src/compose.ts), the same for the API process and a worker.
 */
export type ExportDeps = { lakeSession: () => LakeSession; markets: MarketResolver; state: StateStore; meter: UsageMeter; log: Logger; config: ExportConfig };
