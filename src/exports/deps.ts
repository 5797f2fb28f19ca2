import type { UsageMeter } from '../accounts/meter.js';
import type { Config } from '../config.js';
import type { PlanDeps } from '../downloads/plan.js';
import type { Logger } from '../log.js';
import type { StateStore } from '../state/store.js';

/** The configuration export jobs read: queue width, retention, the sweep's bound, the store, link signing. */
export type ExportConfig = Pick<
  Config,
  'exportConcurrency' | 'exportRetentionHours' | 'exportStaleUploadHours' | 'exportLeaseSeconds' | 's3' | 'linkSecret' | 'stateDir'
>;

/**
 * What the export service and its jobs use, and nothing else: the lake (planning, the COPY), the job records
 * and the meter in the state store, the logger, and their slice of the configuration. Built by the
 * composition root (src/compose.ts), the same for the API process and a worker.
 */
export type ExportDeps = PlanDeps & { state: StateStore; meter: UsageMeter; log: Logger; config: ExportConfig };
