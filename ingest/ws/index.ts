import type { SourceHandler } from '../types.js';
import { captureHandler } from './capture.js';
import { wsCsvHandler } from './csv.js';
import { wsJsonHandler } from './json.js';

/**
 * Tape formats: pmlake's own capture files (before the generic JSON handler: their lines are JSON too), the
 * database-export CSV and every JSON layout (frames, messages, wrappers, REST books).
 */
export const wsHandlers: SourceHandler[] = [captureHandler, wsCsvHandler, wsJsonHandler];
