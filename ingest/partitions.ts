import fs from 'node:fs';
import path from 'node:path';
import { DuckDBTimestampValue, type DuckDBConnection, type DuckDBValue } from '@duckdb/node-api';
import { DATASETS, parquetScan, type DatasetDef, type DatasetName } from '../src/lake/layout.js';
import { sqlIdent, sqlString } from '../src/lake/duckdb.js';
import { fsyncDir, type VersionDraft } from './versions.js';

/**
 * The one way rows enter the lake. A batch never rewrites what is there: the rows of a partition that the lake
 * does not hold yet are written to a new file under a new name (ingest/versions.ts `newFile`) and added to the
 * batch's draft version, which the orchestrator publishes once every data set of the batch is written. A
 * reader sees all of a batch or none of it; a crash before the publish leaves unnamed files the next run sweeps.
 *
 * De-duplication without rewriting: a staged row is new when no file of its partition holds its natural key.
 * The check reads only the key columns of the existing rows whose first sort column (token, asset, receive
 * time — always a function of the natural key, see src/lake/layout.ts) is one of the batch's: the files are
 * sorted on it, so DuckDB's join filter skips every other row group: an append's cost follows the batch, not
 * the partition it lands in. Where the key has a time column, only stored rows in the batch's span of it.
 */

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

/** Staged token by token in seq order by the book replay (ingest/books.ts), which is their sort order. */
const STAGED_IN_ORDER: readonly DatasetName[] = ['book_snapshots', 'top_of_book'];

export type MergeResult = { dataset: DatasetName; partitions: number; rowsAdded: number; bytesWritten: number };

/**
 * Adds every row of `stagingTable` (which has the data set's columns) that the lake does not hold to `draft`,
 * one new file per touched partition. Partitions that gain no row get no file, so re-ingesting the same input
 * changes nothing. Data sets declared `onConflict: 'replace'` (candles) let staged rows win: a staged row that
 * differs from a stored one with the same key retires the stored row's file, rewritten without it (only the
 * files that hold such a row — a recomputed candle that came out the same is no change at all).
 */
export async function mergeIntoPartitions(conn: DuckDBConnection, draft: VersionDraft, name: DatasetName, stagingTable: string): Promise<MergeResult> {
  const def: DatasetDef = DATASETS[name];
  const replace = def.onConflict === 'replace';
  const colNames = Object.keys(def.columns);
  const cols = colNames.map(sqlIdent).join(', ');
  const staging = sqlIdent(stagingTable);
  const keyCols = def.naturalKey.map(sqlIdent);
  const key = keyCols.join(', ');
  const order = def.sortBy.map(sqlIdent).join(', ');
  const first = sqlIdent(def.sortBy[0]!);
  const pc = sqlIdent(def.partitionColumn ?? '');
  const parts = await stagedPartitions(conn, def, staging, key);
  const result: MergeResult = { dataset: name, partitions: 0, rowsAdded: 0, bytesWritten: 0 };
  const write = async (selectSql: string, p: string | null, params: Record<string, DuckDBValue>): Promise<number> => {
    const file = draft.newFile(name, p);
    const rows = await writeParquetFile(conn, selectSql, file, params, def.rowGroupSize);
    result.bytesWritten += draft.add(name, p, file, rows).bytes;
    return rows;
  };
  for (const { p, unique } of parts) {
    const existing = p === null ? draft.files(name) : draft.partitionFiles(name, [p]);
    // A range on the partition column, not `strftime(col) = p`: the range lets DuckDB skip staging row groups
    // by their min/max, so a batch spanning many days does not rescan all of staging for every partition.
    const where = p === null ? '' : `WHERE ${pc} >= $lo AND ${pc} < $hi`;
    const params: Record<string, DuckDBValue> = p === null ? {} : partitionBounds(def.partition, p);
    // Ties within staging itself (same key, different seq, say) are broken by every column, so which row
    // survives does not depend on scan order and a re-run writes identical files. Only the rows whose key
    // hash occurs more than once go through that window: a batch with a handful of repeated keys (an
    // archive's repeated level of one message, a frame two recorders both caught) is otherwise sorted on its
    // whole natural key — every frame's text — before its sort order, two sorts of the batch for a few rows.
    if (!unique) await markRepeatedKeys(conn, staging, where, params, key);
    const rowsOnce = unique ? `(SELECT ${cols} FROM ${staging} ${where})` : onceEach(staging, where, cols, key);
    if (existing.length === 0) {
      // Time-first data sets (raw) and the book replay's outputs are usually staged in their sort order already:
      // then the scan order is the file order (preserve_insertion_order) and the sort (of every frame's text, of
      // every snapshot's lists) is skipped. Other data sets are not checked: the check would nearly always fail.
      const maybeSorted = def.sortBy[0] === def.partitionColumn || STAGED_IN_ORDER.includes(name);
      const sorted = unique && maybeSorted && (await stagedInOrder(conn, staging, def.sortBy, where, params));
      const written = await write(`SELECT ${cols} FROM ${rowsOnce} ${sorted ? '' : `ORDER BY ${order}`}`, p, params);
      result.partitions += 1;
      result.rowsAdded += written;
      continue;
    }
    const files = `[${existing.map(sqlString).join(', ')}]`;
    const span = await stagedTimeSpan(conn, def, staging, where, params);
    if (span) Object.assign(params, span.params);
    // The stored rows that can share a key with a staged one: those with one of the staged first-sort values,
    // and within the staged span of the key's time column (the stored files of other hours are skipped whole).
    const candidates = (select: string): string =>
      `SELECT ${select} FROM ${parquetScan(def, files, replace ? ', filename = true' : '')} e
       WHERE e.${first} IN (SELECT DISTINCT ${first} FROM ${staging} ${where})${span ? ` AND ${span.filter}` : ''}`;
    // IS NOT DISTINCT FROM because key columns may be NULL (an emptied book's marker row has no side or price).
    const match = keyCols.map((c) => `e.${c} IS NOT DISTINCT FROM s.${c}`).join(' AND ');
    await conn.run('DROP TABLE IF EXISTS _pmlake_fresh');
    try {
      if (!replace) {
        await conn.run(
          `CREATE TEMP TABLE _pmlake_fresh AS SELECT ${cols} FROM ${rowsOnce} s
           WHERE NOT EXISTS (SELECT 1 FROM (${candidates(key)}) e WHERE ${match})`,
          params,
        );
      } else if (def.replaceColumns) {
        // Only these columns of a re-derived row can change (book_snapshots' verified flag): compare the key and
        // them — narrow columns, not the whole stored rows — and keep the staged rows whose key is new or differs.
        const cmp = [...new Set([...def.naturalKey, ...def.replaceColumns])].map(sqlIdent).join(', ');
        await conn.run(
          `CREATE TEMP TABLE _pmlake_fresh AS
           WITH s AS (SELECT ${cols} FROM ${rowsOnce}),
                e AS (SELECT ${cmp} FROM s EXCEPT SELECT ${cmp} FROM (${candidates(cmp)}))
           SELECT ${cols} FROM s WHERE EXISTS (SELECT 1 FROM e WHERE ${match})`,
          params,
        );
        await retireReplaced(conn, draft, name, def, candidates, match, params);
      } else {
        // Staged rows that are new or differ from the stored row with their key.
        await conn.run(
          `CREATE TEMP TABLE _pmlake_fresh AS
           SELECT ${cols} FROM ${rowsOnce} EXCEPT SELECT ${cols} FROM (${candidates(cols)})`,
          params,
        );
        await retireReplaced(conn, draft, name, def, candidates, match, params);
      }
      const fresh = Number((await conn.runAndReadAll('SELECT count(*) FROM _pmlake_fresh')).getRows()[0]?.[0] ?? 0);
      if (fresh === 0) continue;
      await write(`SELECT ${cols} FROM _pmlake_fresh ORDER BY ${order}`, p, {});
      result.partitions += 1;
      result.rowsAdded += fresh;
    } finally {
      await conn.run('DROP TABLE IF EXISTS _pmlake_fresh');
    }
  }
  await conn.run('DROP TABLE IF EXISTS _pmlake_repeated');
  return result;
}

/** The key hashes that more than one staged row of the partition has (`_pmlake_repeated`, read by onceEach). */
async function markRepeatedKeys(conn: DuckDBConnection, staging: string, where: string, params: Record<string, DuckDBValue>, key: string): Promise<void> {
  await conn.run(`CREATE OR REPLACE TEMP TABLE _pmlake_repeated AS SELECT hash(${key}) AS h FROM ${staging} ${where} GROUP BY 1 HAVING count(*) > 1`, params);
}

/**
 * The staged rows of the partition with each natural key once, as a subquery: rows of a key hash seen once as
 * they are, and of the repeated hashes (markRepeatedKeys) the least row by every column per key — what a window
 * over every row would keep (hash() of several values treats NULLs as equal, as PARTITION BY does; a collision
 * of two keys only puts both through the window).
 */
function onceEach(staging: string, where: string, cols: string, key: string): string {
  const within = (cond: string): string => `${where ? `${where} AND` : 'WHERE'} ${cond}`;
  return `(SELECT ${cols} FROM ${staging} ${within(`hash(${key}) NOT IN (SELECT h FROM _pmlake_repeated)`)}
           UNION ALL
           SELECT ${cols} FROM (SELECT ${cols} FROM ${staging} ${within(`hash(${key}) IN (SELECT h FROM _pmlake_repeated)`)})
           QUALIFY row_number() OVER (PARTITION BY ${key} ORDER BY ${cols}) = 1)`;
}

/**
 * The partitions the staged rows fall in, and whether each holds every natural key once. hash() of several
 * values is one value and treats NULLs as equal, as the dedupe window's PARTITION BY does. A batch usually
 * lands in one partition (a day of tape): the bounds of the partition column are read first, and when both
 * fall in the same partition the key count needs no per-row partition value and no grouping (half the cost
 * of this step on a day of l2).
 */
async function stagedPartitions(conn: DuckDBConnection, def: DatasetDef, staging: string, key: string): Promise<{ p: string | null; unique: boolean }[]> {
  const rows = async (sql: string): Promise<{ p: string | null; unique: boolean }[]> =>
    (await conn.runAndReadAll(sql))
      .getRowObjectsJS()
      .filter((r) => Number(r.n) > 0)
      .map((r) => ({ p: r.p === null ? null : String(r.p), unique: Number(r.n) === Number(r.d) }));
  const counts = `count(*) AS n, count(DISTINCT hash(${key})) AS d`;
  if (def.partition === 'none') return rows(`SELECT NULL AS p, ${counts} FROM ${staging}`);
  const pc = sqlIdent(def.partitionColumn ?? '');
  const fmt = def.partition === 'month' ? `'%Y-%m'` : `'%Y-%m-%d'`;
  const bounds = (
    await conn.runAndReadAll(`SELECT strftime(min(${pc}), ${fmt}) AS lo, strftime(max(${pc}), ${fmt}) AS hi FROM ${staging}`)
  ).getRowObjectsJS()[0];
  if (!bounds || bounds.lo === null) return [];
  if (bounds.lo === bounds.hi) return rows(`SELECT ${sqlString(String(bounds.lo))} AS p, ${counts} FROM ${staging} WHERE ${pc} IS NOT NULL`);
  return rows(`SELECT ${partitionExpr(def)} AS p, ${counts} FROM ${staging} WHERE ${pc} IS NOT NULL GROUP BY 1 ORDER BY 1`);
}

/**
 * A key with a time column (the tape's `ts`, raw's `recv_ts`, a candle's `bucket`) can only match a stored row
 * with the same time, so the key check may keep to the staged span of it: by their footer statistics DuckDB then
 * skips the stored files (and row groups) of other times, and a batch appended every cycle to a day partition
 * reads only the files near it, not the whole day. Not when a staged row has no time (NULL matches NULL).
 */
async function stagedTimeSpan(
  conn: DuckDBConnection,
  def: DatasetDef,
  staging: string,
  where: string,
  params: Record<string, DuckDBValue>,
): Promise<{ filter: string; params: Record<string, DuckDBValue> } | null> {
  const col = def.naturalKey.find((c) => def.columns[c] === 'TIMESTAMP');
  if (col === undefined) return null;
  const t = sqlIdent(col);
  const r = (await conn.runAndReadAll(`SELECT min(${t}), max(${t}), count(*) FILTER (WHERE ${t} IS NULL) FROM ${staging} ${where}`, params)).getRows()[0];
  if (!r || r[0] === null || r[1] === null || Number(r[2]) > 0) return null;
  return { filter: `e.${t} BETWEEN $span_lo AND $span_hi`, params: { span_lo: r[0]!, span_hi: r[1]! } };
}

/**
 * onConflict 'replace': the stored files holding a key that `_pmlake_fresh` brings with a new value are retired
 * and rewritten without those rows (in their own order: preserve_insertion_order keeps a single file's order).
 */
async function retireReplaced(
  conn: DuckDBConnection,
  draft: VersionDraft,
  name: DatasetName,
  def: DatasetDef,
  candidates: (select: string) => string,
  match: string,
  params: Record<string, DuckDBValue>,
): Promise<void> {
  const cols = Object.keys(def.columns).map(sqlIdent).join(', ');
  const hit = (
    await conn.runAndReadAll(
      `SELECT DISTINCT e.filename AS f FROM (${candidates(`${def.naturalKey.map(sqlIdent).join(', ')}, filename`)}) e
       WHERE EXISTS (SELECT 1 FROM _pmlake_fresh s WHERE ${match})`,
      params,
    )
  )
    .getRowObjectsJS()
    .map((r) => String(r.f));
  for (const old of hit) {
    const entry = draft.entries(name).find((e) => old.endsWith(e.path));
    if (!entry) continue;
    const file = draft.newFile(name, entry.partition);
    const rows = await writeParquetFile(
      conn,
      `SELECT ${cols} FROM ${parquetScan(def, sqlString(old))} e WHERE NOT EXISTS (SELECT 1 FROM _pmlake_fresh s WHERE ${match})`,
      file,
      {},
      def.rowGroupSize,
    );
    draft.retire(name, [old]);
    if (rows > 0) draft.add(name, entry.partition, file, rows);
    else fs.rmSync(file, { force: true });
  }
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
 * COPY a query to a new file `file` (a name no manifest holds yet, so no reader can see it half written) and
 * fsync it and its directory before the caller's manifest names it; returns the rows written. The SELECT must be
 * built from trusted text (data set definitions); values go through `params`.
 */
export async function writeParquetFile(
  conn: DuckDBConnection,
  selectSql: string,
  file: string,
  params: Record<string, DuckDBValue> = {},
  rowGroupSize: number = DEFAULT_ROW_GROUP,
): Promise<number> {
  fs.mkdirSync(path.dirname(file), { recursive: true });
  try {
    const copied = await conn.run(`COPY (${selectSql}) TO ${sqlString(file)} (${parquetOptions(rowGroupSize)})`, params);
    const fd = fs.openSync(file, 'r');
    try {
      fs.fsyncSync(fd);
    } finally {
      fs.closeSync(fd);
    }
    fsyncDir(path.dirname(file));
    return Number(copied.rowsChanged);
  } catch (err) {
    fs.rmSync(file, { force: true });
    throw err;
  }
}

/** Temporary files of the old rename-in-place writer (and of current.json); a killed run may have left some. */
const TMP_MARK = '.tmp-';

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
