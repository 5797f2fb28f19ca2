import { sqlString, type Query } from '../lake/duckdb.js';
import { query } from './common.js';

/**
 * Rows stored in Parquet files, from their footers alone (`parquet_file_metadata`): for files whose manifest
 * entry does not carry its row count (a lake adopted from before versions). The paths are the lake's own file
 * names from a manifest, never request text, written as literals because a table function's file list is bound
 * at plan time.
 */
export function storedRowsQuery(files: readonly string[]): Query {
  return query(`SELECT coalesce(sum(num_rows), 0) AS rows FROM parquet_file_metadata([${files.map(sqlString).join(', ')}])`, {});
}
