import type { DuckDBDataChunk, DuckDBInstance } from '@duckdb/node-api';
import { streamChunks } from './chunks.js';
import { sqlString, type Query } from './duckdb.js';
import type { DatasetName } from './layout.js';
import { runCount, runJsonArray, runJsonRows, runOne, runQuery, startCopy, type CopyFormat, type CopyStream, type JsonShape } from './runner.js';
import { partitionSource, versionSources, type Lake } from './sources.js';
import type { Row } from './values.js';
import { currentVersion, type LakeVersion } from './versions.js';

/**
 * One reader's view of the lake: the service's DuckDB and one lake version, pinned. The version is resolved
 * on first use (`_versions/current.json`, ./versions.ts) and kept for the session's life, so every statement of
 * the session reads exactly that version's files and never mixes two ingest batches. The gate opens one per HTTP
 * request (a handler's `ctx.lake`), the export worker one per job, the CLI one per command.
 *
 * The verbs: `sources` (what builders put after FROM), `rows` / `one` / `count`, `jsonArray` / `jsonRows` (JSON
 * text serialised by DuckDB), `chunks` (rows pulled a chunk at a time), `copy` (a COPY into a FIFO, ./stream.ts), the version's `hasFiles` /
 * `partitionValues`, and `stamp`, the key answers derived from the lake are cached under (./stamp.ts).
 */
export class LakeSession {
  private pinned: LakeVersion | undefined;
  private lake: Lake | undefined;

  constructor(
    readonly db: DuckDBInstance,
    readonly lakeDir: string,
  ) {}

  /** The session's version: the current one when first asked, the same one afterwards. */
  get version(): LakeVersion {
    return (this.pinned ??= currentVersion(this.lakeDir));
  }

  /** The version's stamp (./versions.ts LakeVersion.stamp). */
  get stamp(): string {
    return this.version.stamp;
  }

  /** The data sets' sources over the session's version, for the builders of src/query/. */
  get sources(): Lake {
    return (this.lake ??= versionSources(this.version));
  }

  /** `read_parquet` over the given partitions' files only (see Lake.partitions). */
  partition(name: DatasetName, values: readonly string[]): string {
    return partitionSource(this.version, name, values);
  }

  /**
   * Whether a data set has files in the session's version: the version's own answer, so it agrees with the
   * sources — a manifest names only published files, and a lake from before versions lists only `*.parquet`.
   */
  hasFiles(name: DatasetName): boolean {
    return this.version.hasFiles(name);
  }

  /** Partition values that hold files, e.g. ['2025-01', '2025-02'] for trades. */
  partitionValues(name: DatasetName): string[] {
    return this.version.partitionValues(name);
  }

  rows(q: Query): Promise<Row[]> {
    return runQuery(this.db, q);
  }

  one(q: Query): Promise<Row | undefined> {
    return runOne(this.db, q);
  }

  /** The first column of the first row as a number (a `count(*)`), 0 when there is no row or it is NULL. */
  count(q: Query): Promise<number> {
    return runCount(this.db, q);
  }

  /** The rows as one JSON array text serialised by DuckDB, in the shape's form (./runner.ts runJsonArray). */
  jsonArray(q: Query, shape?: JsonShape): Promise<{ json: string; rows: number }> {
    return runJsonArray(this.db, q, shape);
  }

  /** jsonArray's rows, each its own JSON object text. */
  jsonRows(q: Query, shape?: JsonShape): Promise<string[]> {
    return runJsonRows(this.db, q, shape);
  }

  /** The rows as data chunks pulled one at a time, for a reader that turns each row into JS itself (./chunks.ts). */
  chunks(q: Query): AsyncGenerator<DuckDBDataChunk> {
    return streamChunks(this.db, q);
  }

  /** A builder's SELECT wrapped in `COPY … TO '<fifo>'`, its bytes read from the FIFO (downloads, bulk, exports). */
  copy(q: Query, format: CopyFormat): Promise<CopyStream> {
    return startCopy(this.db, q, format);
  }

  /**
   * Average stored bytes per row of a data set, for size estimates: file sizes over row counts, both in the
   * version's manifest (an adopted file's rows are read from its footer, `parquet_file_metadata` reads only
   * footers). Cached per lake and data set until its file list changes (files are immutable: the list is the content).
   */
  async bytesPerRow(name: DatasetName): Promise<number> {
    const v = this.version;
    const entries = v.entries(name);
    if (entries.length === 0) return 0;
    const key = v.setKey(name);
    const cacheKey = `${v.lakeDir}\u0000${name}`;
    const hit = sizeCache.get(cacheKey);
    if (hit && hit.key === key) return hit.perRow;
    let rows = entries.reduce((s, e) => s + e.rows, 0);
    if (entries.some((e) => e.rows < 0)) rows = await this.count(storedRowsQuery(v.files(name)));
    const bytes = entries.reduce((s, e) => s + e.bytes, 0);
    const perRow = rows > 0 ? bytes / rows : 0;
    sizeCache.set(cacheKey, { key, perRow });
    return perRow;
  }
}

const sizeCache = new Map<string, { key: string; perRow: number }>();

/**
 * Rows stored in Parquet files, from their footers alone: for files whose manifest entry does not carry its row
 * count (a lake adopted from before versions). The paths are the lake's own file names from a manifest, never
 * request text, written as literals because a table function's file list is bound at plan time.
 */
export function storedRowsQuery(files: readonly string[]): Query {
  return { sql: `SELECT coalesce(sum(num_rows), 0) AS rows FROM parquet_file_metadata([${files.map(sqlString).join(', ')}])`, params: {} };
}
