import { archiveHandler } from '../archive/index.js';
import { chainFilesHandler } from '../chain/files.js';
import { fillsHandler } from '../fills.js';
import { metadataHandler } from '../metadata.js';
import { optionsHandler } from '../options.js';
import { wsCsvHandler } from '../ws/csv.js';
import { wsJsonHandler } from '../ws/json.js';

/**
 * The formats whose staging reads nothing of the lake, so a queue worker stages them before its turn, outside the
 * lake lock, while other workers publish: what they stage does not depend on which items landed before. Every
 * other format (capture files drop frames the lake already holds, catalogue polls compare with the stored
 * definitions, and any format not listed here) waits for its turn and stages under the lock, as a single ingest
 * would. A handler whose staging starts to read the lake must leave this list.
 */
const LAKE_FREE_STAGING = new Set(
  [archiveHandler, wsJsonHandler, wsCsvHandler, fillsHandler, metadataHandler, optionsHandler, chainFilesHandler].map((h) => h.name),
);

export function stagesWithoutLake(handlerName: string): boolean {
  return LAKE_FREE_STAGING.has(handlerName);
}
