import type { DuckDBInstance } from '@duckdb/node-api';
import { LakeSession } from '../lake/session.js';
import { liveTokensQuery } from '../query/live-tokens.js';

/**
 * The recorder's asset discovery over the lake's catalogue: each call opens a session on the lake's current
 * version (so a catalogue landed since the last call is seen) and lists the live tokens.
 */
export function catalogueAssets(db: DuckDBInstance, lakeDir: string): () => Promise<string[]> {
  return async () => {
    const lake = new LakeSession(db, lakeDir);
    const rows = await lake.rows(liveTokensQuery(lake.sources));
    return rows.map((r) => String(r.token_id));
  };
}
