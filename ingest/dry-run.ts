import fs from 'node:fs';
import path from 'node:path';
import { openLakeDb } from '../src/lake/duckdb.js';
import { expandInputs, pickHandler, readHead } from './detect.js';
import { FileHasher, readLedger } from './ledger.js';
import { defaultHandlers } from './run.js';
import type { InputSurvey, SourceHandler } from './types.js';

/**
 * `pmlake ingest --dry-run`: what an ingest of the same inputs would land, read without the lake lock and without
 * writing anything to the lake (no version, no ledger entry, no scratch): each input's format as the ingest would
 * detect it, whether the ledger already holds its bytes, and the handler's survey of it (span, rows).
 */

export type DryRunInput = {
  path: string;
  /** The handler the ingest would use, or null: not recognised (the ingest reports it and skips it). */
  format: string | null;
  bytes: number;
  sha256: string;
  /** `land`: new bytes; `in_ledger`: already ingested; `duplicate`: the same bytes as an earlier input of this run. */
  would: 'land' | 'in_ledger' | 'duplicate' | 'not_recognised';
  from: string | null;
  to: string | null;
  /** UTC hours the span touches. */
  hours: number | null;
  rows: number | null;
  estimated: boolean;
  /** The survey failed (the ingest would most likely report the file as not ingested). */
  survey_error?: string;
};

/** `rows`: null when no input's survey told its rows. */
export type DryRunTotals = { inputs: number; bytes: number; hours: number; rows: number | null; estimated: boolean };

export type DryRunReport = {
  dry_run: true;
  lake: string;
  inputs: DryRunInput[];
  missing: string[];
  /** Every input, by what the ingest would do with it. */
  would: Record<DryRunInput['would'], number>;
  /** Over the inputs that would land: hours are distinct UTC hours, rows the sum of the surveys' rows. */
  totals: DryRunTotals & { from: string | null; to: string | null; by_format: Record<string, DryRunTotals> };
};

export type DryRunOptions = {
  lakeDir: string;
  handlers?: readonly SourceHandler[];
  threads?: number;
  memoryLimit?: string | undefined;
};

const HOUR = 3_600_000;

function hourRange(s: { from: string | null; to: string | null }): [number, number] | null {
  if (s.from === null || s.to === null) return null;
  return [Math.floor(Date.parse(s.from) / HOUR), Math.floor(Date.parse(s.to) / HOUR)];
}

export async function dryRunIngest(paths: string[], opts: DryRunOptions): Promise<DryRunReport> {
  const lakeDir = path.resolve(opts.lakeDir);
  const handlers = opts.handlers ?? defaultHandlers;
  const { files, missing } = expandInputs(paths);
  // Read only: a lake that does not exist yet has an empty ledger, and nothing is created for it.
  const ledger = readLedger(lakeDir);
  // The surveys' DuckDB reads only the inputs' directories and spills to the system temp directory, not the lake.
  const instance = await openLakeDb({
    allowedDirectories: [...new Set(files.map((f) => path.dirname(f)))],
    threads: opts.threads ?? 2,
    memoryLimit: opts.memoryLimit,
  });
  const conn = await instance.connect();
  const hasher = new FileHasher();
  const inputs: DryRunInput[] = [];
  try {
    const hashes = files.map((f) => hasher.hash(f));
    const seen = new Set<string>();
    for (const [i, file] of files.entries()) {
      const handler = pickHandler(handlers, file, await readHead(file));
      const sha256 = await hashes[i]!;
      const bytes = fs.statSync(file).size;
      let would: DryRunInput['would'] = 'land';
      if (!handler) would = 'not_recognised';
      else if (ledger.has(sha256)) would = 'in_ledger';
      else if (seen.has(sha256)) would = 'duplicate';
      if (handler) seen.add(sha256);
      let survey: InputSurvey = { from: null, to: null, rows: null, estimated: false };
      let error: string | undefined;
      if (handler?.survey) {
        try {
          survey = await handler.survey(conn, file);
        } catch (err) {
          error = (err as Error).message.split('\n')[0];
        }
      }
      const range = hourRange(survey);
      inputs.push({
        path: file,
        format: handler?.name ?? null,
        bytes,
        sha256,
        would,
        ...survey,
        hours: range ? range[1] - range[0] + 1 : null,
        ...(error !== undefined ? { survey_error: error } : {}),
      });
    }
  } finally {
    await hasher.close();
    conn.closeSync();
    instance.closeSync();
  }
  return { dry_run: true, lake: lakeDir, inputs, missing, would: countWould(inputs), totals: totalsOf(inputs.filter((i) => i.would === 'land')) };
}

function countWould(inputs: DryRunInput[]): DryRunReport['would'] {
  const out = { land: 0, in_ledger: 0, duplicate: 0, not_recognised: 0 };
  for (const i of inputs) out[i.would] += 1;
  return out;
}

function sumOf(inputs: DryRunInput[]): DryRunTotals & { span: [number, number] | null } {
  const hours = new Set<number>();
  let span: [number, number] | null = null;
  for (const i of inputs) {
    const r = hourRange(i);
    if (r) for (let h = r[0]; h <= r[1]; h += 1) hours.add(h);
    if (i.from !== null && i.to !== null) {
      const [a, b] = [Date.parse(i.from), Date.parse(i.to)];
      span = span ? [Math.min(span[0], a), Math.max(span[1], b)] : [a, b];
    }
  }
  return {
    inputs: inputs.length,
    bytes: inputs.reduce((a, i) => a + i.bytes, 0),
    hours: hours.size,
    rows: inputs.some((i) => i.rows !== null) ? inputs.reduce((a, i) => a + (i.rows ?? 0), 0) : null,
    estimated: inputs.some((i) => i.estimated || i.rows === null),
    span,
  };
}

function totalsOf(inputs: DryRunInput[]): DryRunReport['totals'] {
  const { span, ...all } = sumOf(inputs);
  const by_format: Record<string, DryRunTotals> = {};
  for (const f of [...new Set(inputs.map((i) => i.format ?? ''))].sort()) {
    const { span: _s, ...t } = sumOf(inputs.filter((i) => (i.format ?? '') === f));
    by_format[f] = t;
  }
  return {
    ...all,
    from: span ? new Date(span[0]).toISOString() : null,
    to: span ? new Date(span[1]).toISOString() : null,
    by_format,
  };
}
