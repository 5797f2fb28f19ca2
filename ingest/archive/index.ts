import type { SourceHandler } from '../types.js';
import { isArchiveFile, surveyArchive } from './parquet.js';
import { stageArchive } from './stage.js';

/**
 * The public archive's hourly Parquet files of the venue's market channel (docs/archive-format.md): detected by
 * name or by the v2 columns in the Parquet footer, staged with set-based SQL into the same tables the websocket
 * tape fills, so books, top of book, checkpoints and coverage are derived as from a capture (ingest/README.md,
 * "Archive files").
 */
export const archiveHandler: SourceHandler = {
  kind: 'ws',
  name: 'archive-parquet',
  detect: isArchiveFile,
  stage: (ctx, file) => {
    // A backfill of hourly files: each day's market index is written once, when the day is compacted (ingest/raw-index.ts).
    ctx.deferRawIndex = true;
    return stageArchive(ctx, file);
  },
  survey: surveyArchive,
};
