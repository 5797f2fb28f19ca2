import path from 'node:path';
import type { DuckDBConnection } from '@duckdb/node-api';
import { sqlString } from '../src/lake/duckdb.js';
import type { FileEntry, Manifest, SetName } from '../src/lake/versions.js';
import { updateTokenStats } from './catalog.js';
import { VersionDraft } from './versions.js';

/**
 * Turns an unversioned lake (one `data.parquet` per partition, src/lake/versions.ts legacyManifest) into version 1
 * naming exactly those files, with their row counts from the Parquet footers, plus the per-token stats (one scan of
 * trades, book snapshots and l2). Nothing is copied.
 */
export async function adoptLegacyLake(conn: DuckDBConnection, lakeDir: string): Promise<Manifest | null> {
  const draft = new VersionDraft(lakeDir);
  if (draft.base.version !== 0) return null;
  const sets = Object.entries(draft.base.manifest.sets) as [SetName, FileEntry[]][];
  if (sets.length === 0) return null;
  for (const [name, entries] of sets) {
    for (const e of entries) {
      const r = await conn.runAndReadAll(`SELECT coalesce(sum(num_rows), 0) AS n FROM parquet_file_metadata(${sqlString(path.join(lakeDir, e.path))})`);
      draft.setRows(name, e.path, Number(r.getRowObjectsJS()[0]!.n));
    }
  }
  // The per-token counts a batch then only adds to (ingest/catalog.ts): counted once here, not by the first append.
  await updateTokenStats(conn, draft);
  return draft.publish('adopt', {}, []);
}
