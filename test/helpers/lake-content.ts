import type { DuckDBInstance } from '@duckdb/node-api';
import { SET_NAMES, type LakeVersion, type SetName } from '../../src/lake/versions.js';

/**
 * Rows and an order-independent content hash of a set's files (catalogue rows without their wall-clock
 * `updated_at`), computed with plain DuckDB: how two lakes built different ways are compared.
 */
export async function setContent(db: DuckDBInstance, files: string[]): Promise<string> {
  if (files.length === 0) return '0';
  const conn = await db.connect();
  try {
    const list = `[${files.map((f) => `'${f}'`).join(', ')}]`;
    const cols = (await conn.runAndReadAll(`DESCRIBE SELECT * FROM read_parquet(${list}, union_by_name = true)`))
      .getRowObjectsJS()
      .map((r) => String(r.column_name));
    const keep = cols.filter((c) => c !== 'updated_at').map((c) => `"${c}"`);
    const r = (
      await conn.runAndReadAll(
        `SELECT count(*) AS n, md5(string_agg(r, chr(10) ORDER BY r)) AS h FROM (SELECT struct_pack(${keep.join(', ')})::VARCHAR AS r FROM read_parquet(${list}, union_by_name = true))`,
      )
    ).getRowObjectsJS()[0]!;
    return `${r.n}:${r.h}`;
  } finally {
    conn.closeSync();
  }
}

/** Every set of a lake version, by name. */
export async function lakeContent(db: DuckDBInstance, v: LakeVersion): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  for (const name of SET_NAMES) out[name] = await setContent(db, v.files(name as SetName));
  return out;
}
