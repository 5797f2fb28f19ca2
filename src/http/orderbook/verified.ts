import type { DuckDBInstance } from '@duckdb/node-api';
import { lakeSources, runOne } from '../../lake/runner.js';
import { closingCheckpointQuery } from '../../query/coverage.js';

/**
 * Whether the book of a token at `at` lies inside a stretch the venue proved: the first `book` checkpoint at or
 * after `at` passed and its stretch (since_ts, ts] holds `at` (lake/README.md `checkpoints`). Computed from the
 * checkpoints rather than read from the stored snapshot's `verified`: the answer is that snapshot plus a replay up
 * to `at`, and a checkpoint between the two (a failed one, or the first one after a disconnect) would make the
 * snapshot's flag wrong for `at`. A stretch no checkpoint has closed yet is not verified.
 */
export async function verifiedAt(
  deps: { db: DuckDBInstance; lakeDir: string },
  assetId: string,
  at: bigint,
): Promise<{ verified: boolean; checkpoint: string | null }> {
  const lake = lakeSources(deps.lakeDir);
  const row =
    (await runOne(deps.db, closingCheckpointQuery(lake, assetId, at, true))) ?? (await runOne(deps.db, closingCheckpointQuery(lake, assetId, at, false)));
  return { verified: row?.verified === true, checkpoint: (row?.ts as string | undefined) ?? null };
}
