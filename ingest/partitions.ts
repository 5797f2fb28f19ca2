import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { DuckDBTimestampValue, type DuckDBConnection, type DuckDBValue } from '@duckdb/node-api';
import { DATASETS, partitionDir, type DatasetDef, type DatasetName } from '../src/lake/layout.js';
import { sqlIdent, sqlString } from '../src/lake/duckdb.js';

/**
 * The one way files enter the lake. Each partition is a single `data.parquet`; new rows are merged with the
 * existing file (de-duplicated on the data set's natural key, existing rows winning), sorted, written under a
 * temporary name in the same directory and renamed over the old file. rename(2) is atomic, so a reader — or a
 * crash at any instant — sees either the old complete file or the new complete file, never a partial one.
 */

const TMP_MARK = '.tmp-';
export const PARQUET_OPTIONS = "FORMAT parquet, COMPRESSION zstd, ROW_GROUP_SIZE 122880";

function partitionExpr(def: DatasetDef): string {
  const col = sqlIdent(def.partitionColumn ?? '');
  if (def.partition === 'month') return `strftime(${col}, '%Y-%m')`;
  if (def.partition === 'date') return `strftime(${col}, '%Y-%m-%d')`;
  return `'all'`;
}

/** [lo, hi) of a month=YYYY-MM or date=YYYY-MM-DD partition, as TIMESTAMP parameters. */
function partitionBounds(kind: DatasetDef['partition'], p: string): Record<string, DuckDBValue> {
  const lo = new Date(kind === 'month' ? `${p}-01T00:00:00Z` : `${p}T00:00:00Z`);
  const hi = new Date(lo);
  if (kind === 'month') hi.setUTCMonth(hi.getUTCMonth() + 1);
  else hi.setUTCDate(hi.getUTCDate() + 1);
  return { lo: new DuckDBTimestampValue(BigInt(lo.getTime()) * 1000n), hi: new DuckDBTimestampValue(BigInt(hi.getTime()) * 1000n) };
}

export type MergeResult = { dataset: DatasetName; partitions: number; rowsAdded: number; rowsTotal: number };

/**
 * Merges every row of `stagingTable` (which has the data set's columns) into its partitions.
 * Partitions that gain no row are not rewritten, so re-ingesting the same input leaves files untouched.
 * Data sets declared `onConflict: 'replace'` (derived data such as candles) let staged rows win instead.
 */
export async function mergeIntoPartitions(
  conn: DuckDBConnection,
  lakeDir: string,
  name: DatasetName,
  stagingTable: string,
): Promise<MergeResult> {
  const def: DatasetDef = DATASETS[name];
  const replace = def.onConflict === 'replace';
  const cols = Object.keys(def.columns).map(sqlIdent).join(', ');
  const staging = sqlIdent(stagingTable);
  const parts = def.partition === 'none'
    ? [{ p: null as string | null }]
    : (await conn.runAndReadAll(`SELECT DISTINCT ${partitionExpr(def)} AS p FROM ${staging} WHERE ${sqlIdent(def.partitionColumn!)} IS NOT NULL ORDER BY 1`))
        .getRowObjectsJS()
        .map((r) => ({ p: String(r.p) }));
  const result: MergeResult = { dataset: name, partitions: 0, rowsAdded: 0, rowsTotal: 0 };
  for (const { p } of parts) {
    const dir = partitionDir(lakeDir, name, p);
    const finalPath = path.join(dir, 'data.parquet');
    const exists = fs.existsSync(finalPath);
    // A range on the partition column, not `strftime(col) = p`: the range lets DuckDB skip staging row groups
    // by their min/max, so a batch spanning many days does not rescan all of staging for every partition.
    const pc = sqlIdent(def.partitionColumn ?? '');
    const where = p === null ? '' : `WHERE ${pc} >= $lo AND ${pc} < $hi`;
    const params: Record<string, DuckDBValue> = p === null ? {} : partitionBounds(def.partition, p);
    const existing = exists ? `SELECT ${cols}, 0 AS _src FROM read_parquet(${sqlString(finalPath)})` : null;
    const incoming = `SELECT ${cols}, 1 AS _src FROM ${staging} ${where}`;
    const key = def.naturalKey.map(sqlIdent).join(', ');
    await conn.run('DROP TABLE IF EXISTS _pmlake_merge');
    // Ties within staging itself (same key, different seq, say) are broken by every column, so which row
    // survives does not depend on scan order and a re-run writes identical files.
    await conn.run(
      `CREATE TEMP TABLE _pmlake_merge AS
       SELECT * FROM (${existing ? `${existing} UNION ALL ` : ''}${incoming})
       QUALIFY row_number() OVER (PARTITION BY ${key} ORDER BY _src ${replace ? 'DESC' : 'ASC'}, ${cols}) = 1`,
      params,
    );
    const counts = (
      await conn.runAndReadAll(`SELECT count(*) AS total, count(*) FILTER (WHERE _src = 1) AS added FROM _pmlake_merge`)
    ).getRowObjectsJS()[0]!;
    // With 'replace', staged rows always win; only those that differ from the file count as added, so an
    // unchanged recomputation leaves the file untouched.
    const added = replace && existing
      ? Number((await conn.runAndReadAll(
          `SELECT count(*) AS n FROM (SELECT ${cols} FROM _pmlake_merge WHERE _src = 1
             EXCEPT SELECT ${cols} FROM read_parquet(${sqlString(finalPath)}))`,
        )).getRowObjectsJS()[0]!.n)
      : Number(counts.added);
    const total = Number(counts.total);
    result.rowsTotal += total;
    if (added === 0 && exists) continue;
    const order = def.sortBy.map(sqlIdent).join(', ');
    await writeParquetAtomic(conn, `SELECT ${cols} FROM _pmlake_merge ORDER BY ${order}`, finalPath);
    result.partitions += 1;
    result.rowsAdded += added;
  }
  await conn.run('DROP TABLE IF EXISTS _pmlake_merge');
  return result;
}

/**
 * COPY a query to `finalPath` through a temporary sibling and an atomic rename. The SELECT must be built from
 * trusted text (data set definitions); values go through `params`.
 */
export async function writeParquetAtomic(
  conn: DuckDBConnection,
  selectSql: string,
  finalPath: string,
  params: Record<string, DuckDBValue> = {},
): Promise<void> {
  fs.mkdirSync(path.dirname(finalPath), { recursive: true });
  const tmp = `${finalPath}${TMP_MARK}${process.pid}-${crypto.randomBytes(4).toString('hex')}`;
  try {
    await conn.run(`COPY (${selectSql}) TO ${sqlString(tmp)} (${PARQUET_OPTIONS})`, params);
    const fd = fs.openSync(tmp, 'r');
    try {
      fs.fsyncSync(fd);
    } finally {
      fs.closeSync(fd);
    }
    fs.renameSync(tmp, finalPath);
    fsyncDir(path.dirname(finalPath));
  } catch (err) {
    fs.rmSync(tmp, { force: true });
    throw err;
  }
}

function fsyncDir(dir: string): void {
  const fd = fs.openSync(dir, 'r');
  try {
    fs.fsyncSync(fd);
  } finally {
    fs.closeSync(fd);
  }
}

/** Removes temporary files a killed ingest may have left; they were never visible to readers. */
export function sweepTempFiles(lakeDir: string): number {
  let removed = 0;
  const walk = (dir: string): void => {
    if (!fs.existsSync(dir)) return;
    for (const ent of fs.readdirSync(dir, { withFileTypes: true })) {
      const full = path.join(dir, ent.name);
      if (ent.isDirectory()) walk(full);
      else if (ent.name.includes(TMP_MARK)) {
        fs.rmSync(full, { force: true });
        removed += 1;
      }
    }
  };
  walk(lakeDir);
  return removed;
}
