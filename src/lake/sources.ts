import { DATASETS, parquetScan, type DatasetDef, type DatasetName } from './layout.js';
import { sqlIdent, sqlString } from './duckdb.js';
import type { LakeVersion } from './versions.js';

/** Where builders read each data set from. Builders stay pure: they receive this and never touch files. */
export type Lake = {
  from(name: DatasetName): string;
  /** Whether candles_1h covers every month candles_1m does (a lake ingested before it existed does not). */
  hourlyCandles?(): boolean;
  /**
   * Only these partitions' files, listed explicitly. Builders still filter on the partition column, so the
   * answer is the same as from `from`; what it saves is DuckDB listing and filtering every file of the data set
   * at bind time, which grows with the number of partitions while one named file costs next to nothing.
   */
  partitions?(name: DatasetName, values: readonly string[]): string;
};

/**
 * Sources over one version of a lake (./versions.ts), so every statement built from them reads exactly that
 * version's files. A data set with files is read with `read_parquet` over its file list (Hive partitions as
 * VARCHAR columns `month` / `date`, so partition pruning compares strings); a data set with no file yet is an
 * empty relation with the same columns, so an empty lake answers `[]` rather than a DuckDB "no files" error.
 */
export function versionSources(v: LakeVersion): Lake {
  return {
    from: (name) => datasetSource(v, name),
    hourlyCandles: () => {
      const hours = new Set(v.partitionValues('candles_1h'));
      return v.partitionValues('candles_1m').every((m) => hours.has(m));
    },
    partitions: (name, values) => partitionSource(v, name, values),
  };
}

/** `read_parquet` over the given partitions' files, with the same Hive column as the whole data set's source. */
export function partitionSource(v: LakeVersion, name: DatasetName, values: readonly string[]): string {
  const def: DatasetDef = DATASETS[name];
  if (def.partition === 'none') return datasetSource(v, name);
  // Values are partition names this code computed (dates, months); anything else names no partition.
  const wanted = [...new Set(values)].filter((x) => /^[0-9]{4}-[0-9]{2}(-[0-9]{2})?$/.test(x));
  return readFiles(def, v.partitionFiles(name, wanted));
}

export function datasetSource(v: LakeVersion, name: DatasetName): string {
  return readFiles(DATASETS[name], v.files(name));
}

function readFiles(def: DatasetDef, files: readonly string[]): string {
  if (files.length === 0) return emptyRelation(def);
  const list = `[${files.map(sqlString).join(', ')}]`;
  if (def.partition === 'none') return parquetScan(def, list);
  return parquetScan(def, list, ', hive_partitioning = true, hive_types_autocast = false');
}

function emptyRelation(def: DatasetDef): string {
  const cols = Object.entries(def.columns as Record<string, string>).map(([c, t]) => `NULL::${t} AS ${sqlIdent(c)}`);
  if (def.partition !== 'none') cols.push(`NULL::VARCHAR AS ${sqlIdent(def.partition)}`);
  return `(SELECT ${cols.join(', ')} WHERE false)`;
}
