import fs from 'node:fs';
import path from 'node:path';
import type { DuckDBConnection } from '@duckdb/node-api';
import type { VersionDraft } from '../../ingest/versions.js';
import { columnDdl, DATASETS, type DatasetDef, type DatasetName } from '../../src/lake/layout.js';

/** Writes rows of a data set as the lake holds them: one sorted file per partition, added to a draft version. */
export async function writeSet(conn: DuckDBConnection, draft: VersionDraft, name: DatasetName, rows: Record<string, unknown>[]): Promise<void> {
  const def: DatasetDef = DATASETS[name];
  // Whatever the ingest wrote for this set is retired: the version holds exactly these rows.
  draft.retire(name, [...draft.files(name)]);
  await conn.run(`CREATE OR REPLACE TEMP TABLE w (${columnDdl(name)})`);
  const cols = Object.keys(def.columns);
  for (const r of rows) {
    const values = cols.map((c) => (r[c] === undefined ? null : r[c])) as (string | number | boolean | null)[];
    await conn.run(`INSERT INTO w VALUES (${cols.map((_, i) => `$${i + 1}`).join(', ')})`, values);
  }
  const partOf = (r: Record<string, unknown>): string | null => {
    if (def.partition === 'none') return null;
    const v = String(r[def.partitionColumn!]);
    return def.partition === 'date' ? v.slice(0, 10) : v.slice(0, 7);
  };
  const parts = [...new Set(rows.map(partOf))];
  for (const p of parts) {
    const file = draft.newFile(name, p);
    const n = rows.filter((r) => partOf(r) === p).length;
    const where = p === null ? '' : `WHERE strftime(${def.partitionColumn!}::TIMESTAMP, '${def.partition === 'date' ? '%Y-%m-%d' : '%Y-%m'}') = '${p}'`;
    fs.mkdirSync(path.dirname(file), { recursive: true });
    await conn.run(`COPY (SELECT * FROM w ${where} ORDER BY ${def.sortBy.join(', ')}) TO '${file}' (FORMAT parquet)`);
    draft.add(name, p, file, n);
  }
}
