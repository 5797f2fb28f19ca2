import type { SourceHandler } from '../types.js';
import { wsCsvHandler } from './csv.js';
import { wsJsonHandler } from './json.js';

/** Tape formats: the database-export CSV and every JSON layout (frames, messages, wrappers, REST books). */
export const wsHandlers: SourceHandler[] = [wsCsvHandler, wsJsonHandler];
