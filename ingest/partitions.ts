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
const DEFAULT_ROW_GROUP = 122_880;
const parquetOptions = (rowGroupSize: number): string => `FORMAT parquet, COMPRESSION zstd, ROW_GROUP_SIZE ${Math.trunc(rowGroupSize)}`;

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
 *
 * Speed (this is most of an ingest's time): a partition with no file yet is one sorted COPY straight out of
 * staging, and the de-duplicating window only runs when staging really holds two rows with one natural key
 * (checked with a count of distinct key hashes, computed with the partition list in one scan; a hash
 * collision only sends a partition down the exact path). An existing file is first anti-joined on the
 * natural key: nothing new means nothing is written; otherwise the file and the new rows are written once.
 */
export async function mergeIntoPartitions(
  conn: DuckDBConnection,
  lakeDir: string,
  name: DatasetName,
  stagingTable: string,
): Promise<MergeResult> {
  const def: DatasetDef = DATASETS[name];
  const replace = def.onConflict === 'replace';
  const colNames = Object.keys(def.columns);
  const cols = colNames.map(sqlIdent).join(', ');
  const staging = sqlIdent(stagingTable);
  const keyCols = def.naturalKey.map(sqlIdent);
  const key = keyCols.join(', ');
  const order = def.sortBy.map(sqlIdent).join(', ');
  const pc = sqlIdent(def.partitionColumn ?? '');
  // hash() of several values is one value and treats NULLs as equal, as the window's PARTITION BY does.
  const parts = (
    await conn.runAndReadAll(
      def.partition === 'none'
        ? `SELECT NULL AS p, count(*) AS n, count(DISTINCT hash(${key})) AS d FROM ${staging}`
        : `SELECT ${partitionExpr(def)} AS p, count(*) AS n, count(DISTINCT hash(${key})) AS d
           FROM ${staging} WHERE ${pc} IS NOT NULL GROUP BY 1 ORDER BY 1`,
    )
  )
    .getRowObjectsJS()
    .filter((r) => Number(r.n) > 0)
    .map((r) => ({ p: r.p === null ? null : String(r.p), unique: Number(r.n) === Number(r.d) }));
  const result: MergeResult = { dataset: name, partitions: 0, rowsAdded: 0, rowsTotal: 0 };
  for (const { p, unique } of parts) {
    const dir = partitionDir(lakeDir, name, p);
    const finalPath = path.join(dir, 'data.parquet');
    const exists = fs.existsSync(finalPath);
    // A range on the partition column, not `strftime(col) = p`: the range lets DuckDB skip staging row groups
    // by their min/max, so a batch spanning many days does not rescan all of staging for every partition.
    const where = p === null ? '' : `WHERE ${pc} >= $lo AND ${pc} < $hi`;
    const params: Record<string, DuckDBValue> = p === null ? {} : partitionBounds(def.partition, p);
    // Ties within staging itself (same key, different seq, say) are broken by every column, so which row
    // survives does not depend on scan order and a re-run writes identical files.
    const dedupe = unique ? '' : `QUALIFY row_number() OVER (PARTITION BY ${key} ORDER BY ${cols}) = 1`;
    if (!exists) {
      // Time-first data sets (raw) are usually staged in their sort order already: then the scan order is the
      // file order (preserve_insertion_order) and the sort of every frame's text is skipped.
      const sorted = unique && def.sortBy[0] === def.partitionColumn && (await stagedInOrder(conn, staging, def.sortBy, where, params));
      const written = await writeParquetAtomic(
        conn,
        `SELECT ${cols} FROM ${staging} ${where} ${dedupe} ${sorted ? '' : `ORDER BY ${order}`}`,
        finalPath,
        params,
        def.rowGroupSize,
      );
      result.partitions += 1;
      result.rowsAdded += written;
      result.rowsTotal += written;
      continue;
    }
    const file = sqlString(finalPath);
    if (replace) {
      const r = await mergeReplace(conn, { cols, staging, where, key, order, file, finalPath, params });
      result.rowsTotal += r.total;
      if (r.added === 0) continue;
      result.partitions += 1;
      result.rowsAdded += r.added;
      continue;
    }
    // Existing rows win: the new rows are the staged ones whose key the file does not hold. IS NOT DISTINCT
    // FROM because key columns may be NULL (an emptied book's marker row has no side, price or size).
    const match = keyCols.map((c) => `e.${c} IS NOT DISTINCT FROM s.${c}`).join(' AND ');
    const fresh = `SELECT ${cols} FROM (SELECT * FROM ${staging} ${where}) s
      WHERE NOT EXISTS (SELECT 1 FROM read_parquet(${file}) e WHERE ${match}) ${dedupe}`;
    const added = Number((await conn.runAndReadAll(`SELECT count(*) FROM (${fresh})`, params)).getRows()[0]?.[0] ?? 0);
    const before = Number((await conn.runAndReadAll(`SELECT count(*) FROM read_parquet(${file})`)).getRows()[0]?.[0] ?? 0);
    result.rowsTotal += before + added;
    if (added === 0) continue;
    await writeParquetAtomic(
      conn,
      `SELECT ${cols} FROM (SELECT ${cols} FROM read_parquet(${file}) UNION ALL ${fresh}) ORDER BY ${order}`,
      finalPath,
      params,
      def.rowGroupSize,
    );
    result.partitions += 1;
    result.rowsAdded += added;
  }
  return result;
}

/**
 * Whether the staged rows in `where`, in insertion (rowid) order, are already sorted on `sortBy`. Checked on
 * the narrow sort columns only; a NULL sort value counts as out of order (ORDER BY puts NULLs last).
 */
async function stagedInOrder(
  conn: DuckDBConnection,
  staging: string,
  sortBy: readonly string[],
  where: string,
  params: Record<string, DuckDBValue>,
): Promise<boolean> {
  const k = `row(${sortBy.map(sqlIdent).join(', ')})`;
  const anyNull = sortBy.map((c) => `${sqlIdent(c)} IS NULL`).join(' OR ');
  const bad = await conn.runAndReadAll(
    `SELECT count(*) FROM (SELECT ${k} AS k, lag(${k}) OVER (ORDER BY rowid) AS pk, ${anyNull} AS has_null FROM ${staging} ${where})
     WHERE has_null OR (pk IS NOT NULL AND (k >= pk) IS NOT TRUE)`,
    params,
  );
  return Number(bad.getRows()[0]?.[0] ?? 1) === 0;
}

/**
 * onConflict 'replace' into an existing file (derived data, small): staged rows win; only staged rows that
 * differ from the file count as added, so an unchanged recomputation leaves the file untouched.
 */
async function mergeReplace(
  conn: DuckDBConnection,
  q: { cols: string; staging: string; where: string; key: string; order: string; file: string; finalPath: string; params: Record<string, DuckDBValue> },
): Promise<{ added: number; total: number }> {
  const { cols, staging, where, key, order, file, finalPath, params } = q;
  await conn.run('DROP TABLE IF EXISTS _pmlake_merge');
  try {
    await conn.run(
      `CREATE TEMP TABLE _pmlake_merge AS
       SELECT * FROM (SELECT ${cols}, 0 AS _src FROM read_parquet(${file}) UNION ALL SELECT ${cols}, 1 AS _src FROM ${staging} ${where})
       QUALIFY row_number() OVER (PARTITION BY ${key} ORDER BY _src DESC, ${cols}) = 1`,
      params,
    );
    const total = Number((await conn.runAndReadAll(`SELECT count(*) FROM _pmlake_merge`)).getRows()[0]?.[0] ?? 0);
    const added = Number(
      (await conn.runAndReadAll(
        `SELECT count(*) AS n FROM (SELECT ${cols} FROM _pmlake_merge WHERE _src = 1 EXCEPT SELECT ${cols} FROM read_parquet(${file}))`,
      )).getRows()[0]?.[0] ?? 0,
    );
    if (added > 0) await writeParquetAtomic(conn, `SELECT ${cols} FROM _pmlake_merge ORDER BY ${order}`, finalPath);
    return { added, total };
  } finally {
    await conn.run('DROP TABLE IF EXISTS _pmlake_merge');
  }
}

/**
 * COPY a query to `finalPath` through a temporary sibling and an atomic rename; returns the rows written. The SELECT must be built from
 * trusted text (data set definitions); values go through `params`.
 */
export async function writeParquetAtomic(
  conn: DuckDBConnection,
  selectSql: string,
  finalPath: string,
  params: Record<string, DuckDBValue> = {},
  rowGroupSize: number = DEFAULT_ROW_GROUP,
): Promise<number> {
  fs.mkdirSync(path.dirname(finalPath), { recursive: true });
  const tmp = `${finalPath}${TMP_MARK}${process.pid}-${crypto.randomBytes(4).toString('hex')}`;
  try {
    const copied = await conn.run(`COPY (${selectSql}) TO ${sqlString(tmp)} (${parquetOptions(rowGroupSize)})`, params);
    const fd = fs.openSync(tmp, 'r');
    try {
      fs.fsyncSync(fd);
    } finally {
      fs.closeSync(fd);
    }
    fs.renameSync(tmp, finalPath);
    fsyncDir(path.dirname(finalPath));
    return Number(copied.rowsChanged);
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
