import type { DuckDBConnection } from '@duckdb/node-api';
import type { Logger } from '../src/log.js';
import type { LandedSource } from '../src/lake/versions.js';
import type { VersionDraft } from './versions.js';

/**
 * Contract between the ingest orchestrator (ingest/run.ts) and the format handlers.
 *
 * A batch runs on one DuckDB connection. Handlers never write lake files themselves: they INSERT into the
 * batch's staging tables (TEMP tables named `stg_<dataset>` with exactly the columns of
 * src/lake/layout.ts DATASETS[<dataset>]); the orchestrator then merges catalogue records, derives books /
 * top of book / candles for what was touched, writes every touched partition atomically through
 * ingest/partitions.ts, and only then records each input's content hash in the ledger.
 */
/**
 * Something ingest skipped or could not store. `line`: where (the first such line when the issue covers
 * several); `count`: how many records (lines, rows, frames, points) it stands for when more than one.
 */
export type IngestIssue = { file: string; line?: number; message: string; count?: number };

export type BatchContext = {
  conn: DuckDBConnection;
  lakeDir: string;
  /**
   * The batch's draft version: what derivations read (the lake as of the last publish plus this batch's files
   * written so far) and where merges add files. Set by the orchestrator before each batch is derived.
   */
  lake: VersionDraft;
  log: Logger;
  snapshotSeconds: number;
  /** Trades per candles chunk; unset, derived from DuckDB's memory limit (ingest/candles.ts). */
  candleChunkRows?: number;
  /** Malformed input is reported here (file and line) and the rest of the batch goes on. */
  issues: IngestIssue[];
  /** Counters for the report, e.g. { frames: 42, level_updates: 1200, unknown_event_types: 1 }. */
  counts: Record<string, number>;
  /**
   * Freshness (/v1/status): per source, the newest time (epoch ms) of what the files staged since the last
   * publish hold — a poll's newest `received_at`, the newest block's time. Handlers raise it with `noteLanded`;
   * the orchestrator records it in the version it publishes, then clears it. (The tape's comes from stg_raw.)
   */
  landed: Partial<Record<LandedSource, number>>;
  /**
   * Set by a handler whose input is a bulk backfill (the public archive): the batch's new days get no market index
   * (ingest/raw-index.ts; the compaction of those days gives it). For the rest of the run: a big file's later chunks land in
   * later batches, and a run that mixes an archive hour with captures of the same new day only replays it from raw
   * until the compaction.
   */
  deferRawIndex?: boolean;
};

export function noteLanded(ctx: BatchContext, source: LandedSource, ms: number): void {
  if (Number.isFinite(ms) && ms > (ctx.landed[source] ?? -Infinity)) ctx.landed[source] = ms;
}

export type SourceKind = 'ws' | 'metadata' | 'fills' | 'options';

/**
 * What `pmlake ingest --dry-run` says of one input without staging it: the span of time it covers (ISO 8601,
 * null when unknown) and how many rows it would stage — exact when the format's own metadata holds them (a
 * Parquet footer), `estimated` when extrapolated from a sample of the file.
 */
export type InputSurvey = { from: string | null; to: string | null; rows: number | null; estimated: boolean };

export interface SourceHandler {
  kind: SourceKind;
  /** Format names this handler recognises, for messages and the report. */
  name: string;
  /** Cheap detection from the file name and its first bytes (already gunzipped). */
  detect(file: string, head: string): boolean;
  /** Parses the file into the batch's staging tables. Throws only for unreadable files. */
  stage(ctx: BatchContext, file: string): Promise<void>;
  /** Optional, for `--dry-run`: the input's span and rows, read cheaply (no staging); absent: only the format is told. */
  survey?(conn: DuckDBConnection, file: string): Promise<InputSurvey>;
}
