import fs from 'node:fs';
import type { DuckDBConnection } from '@duckdb/node-api';
import { isGzip } from '../detect.js';
import { sampleLines, scaleToFile, type LineSample } from '../line-sample.js';
import type { InputSurvey } from '../types.js';

/**
 * `--dry-run` surveys of the tape formats, from a sample of the file's lines (ingest/line-sample.ts, which holds
 * its first and last lines): the span as the earliest and latest time sampled, the level updates it would stage
 * (what l2 gets: a book's levels, one at least; a price_change's entries) counted in the sample and scaled by bytes
 * (line-sample.ts scaleToFile). Always `estimated`: staging also drops copies and bad levels the sample does not see.
 */

type Tally = { min: number; max: number; levels: number };

const newTally = (): Tally => ({ min: Infinity, max: -Infinity, levels: 0 });

function seeTime(t: Tally, ms: number): void {
  if (!Number.isFinite(ms)) return;
  if (ms < t.min) t.min = ms;
  if (ms > t.max) t.max = ms;
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

const len = (v: unknown): number => (Array.isArray(v) ? v.length : 0);

/**
 * Every message in a parsed element, in every layout the JSON handler reads: arrays of frames, wrappers
 * ({timestamp, message}: the wrapper's time is the message's basis, as in ws_stage.sql), REST captures (GET_book).
 * A message is an object with an event type, or a token with book sides (a REST book).
 */
function visit(v: unknown, t: Tally, wrapMs: number | null): void {
  if (Array.isArray(v)) {
    for (const x of v) visit(x, t, wrapMs);
    return;
  }
  if (!isObject(v)) return;
  const isBook = typeof v.asset_id === 'string' && (Array.isArray(v.bids) || Array.isArray(v.asks));
  if (typeof v.event_type === 'string' || isBook) {
    const ms = wrapMs ?? Number(v.timestamp);
    seeTime(t, ms);
    if (!Number.isFinite(ms)) return;
    if (v.event_type === 'book' || (v.event_type === undefined && isBook)) t.levels += Math.max(len(v.bids) + len(v.asks), 1);
    else if (v.event_type === 'price_change') t.levels += len(v.price_changes) > 0 ? len(v.price_changes) : len(v.changes);
    return;
  }
  const own = Number(v.timestamp);
  for (const x of Object.values(v)) if (typeof x === 'object') visit(x, t, wrapMs ?? (Number.isFinite(own) ? own : null));
}

function parse(line: string): unknown {
  try {
    return JSON.parse(line) as unknown;
  } catch {
    return undefined;
  }
}

function result(t: Tally, rows: number | null): InputSurvey {
  const known = Number.isFinite(t.min);
  return {
    from: known ? new Date(t.min).toISOString() : null,
    to: known ? new Date(t.max).toISOString() : null,
    rows,
    estimated: true,
  };
}

/** Runs `see` over every sampled line; returns the levels counted per window. */
function perWindow(sample: LineSample, t: Tally, see: (line: string, window: number, index: number) => void): number[] {
  return sample.windows.map((w, wi) => {
    const before = t.levels;
    w.forEach((line, li) => see(line, wi, li));
    return t.levels - before;
  });
}

/** A whole JSON document (not lines) is parsed at once up to this size; a larger one is surveyed by its lines. */
const WHOLE_DOCUMENT_BYTES = 64 * 1024 * 1024;

/** The JSON handler's files: JSON lines, or one document (array, message, wrapper, REST capture). */
export async function surveyTapeJson(_conn: DuckDBConnection, file: string): Promise<InputSurvey> {
  const t = newTally();
  const lines = /\.(jsonl|ndjson)(\.gz)?$/i.test(file);
  if (!lines && !isGzip(file) && fs.statSync(file).size <= WHOLE_DOCUMENT_BYTES) {
    const text = fs.readFileSync(file, 'utf8');
    const doc = parse(text);
    if (doc !== undefined) {
      visit(doc, t, null);
      return result(t, t.levels);
    }
  }
  const sample = await sampleLines(file);
  const counted = perWindow(sample, t, (line) => visit(parse(line), t, null));
  return result(t, scaleToFile(sample, counted));
}

/**
 * pmlake's capture files: every line has the recorder's `recv_ms` and lines are in receive order, so the span is
 * the first line's time to the last's; the levels are counted in the frames of the sampled lines.
 */
export async function surveyCapture(_conn: DuckDBConnection, file: string): Promise<InputSurvey> {
  const sample = await sampleLines(file);
  const t = newTally();
  const times: number[] = [];
  const frames = newTally();
  const counted = perWindow(sample, frames, (line) => {
    const l = parse(line);
    if (!isObject(l)) return;
    const ms = Number(l.recv_ms);
    if (Number.isFinite(ms)) times.push(ms);
    if (typeof l.frame === 'string' && Number.isFinite(ms)) visit(parse(l.frame), frames, ms);
  });
  if (times.length > 0) {
    seeTime(t, times[0]!);
    seeTime(t, times[times.length - 1]!);
  }
  return result(t, scaleToFile(sample, counted));
}

/** One CSV record on one line (RFC 4180 quoting: `""` inside quotes is a quote). */
export function csvFields(line: string): string[] {
  const out: string[] = [];
  let i = 0;
  while (i <= line.length) {
    if (line[i] === '"') {
      let v = '';
      i += 1;
      for (;;) {
        const q = line.indexOf('"', i);
        if (q === -1) {
          v += line.slice(i);
          i = line.length;
          break;
        }
        v += line.slice(i, q);
        if (line[q + 1] === '"') {
          v += '"';
          i = q + 2;
        } else {
          i = q + 1;
          break;
        }
      }
      out.push(v);
      i += 1;
    } else {
      const c = line.indexOf(',', i);
      const end = c === -1 ? line.length : c;
      out.push(line.slice(i, end).replace(/\r$/, ''));
      i = end + 1;
    }
  }
  return out;
}

/** The export's local time with a numeric offset (`2025-01-25 18:15:47.925 +0100`) as epoch ms; NaN when unreadable. */
export function csvTime(text: string): number {
  const m = /^(\d{4})-(\d\d)-(\d\d)[ T](\d\d):(\d\d):(\d\d)(?:\.(\d{1,6}))? ?([+-])(\d\d):?(\d\d)$/.exec(text.trim());
  if (!m) return NaN;
  const [, y, mo, d, h, mi, s, frac, sign, oh, om] = m;
  const local = Date.UTC(Number(y), Number(mo) - 1, Number(d), Number(h), Number(mi), Number(s), Math.floor(Number(`0.${frac ?? '0'}`) * 1000));
  const offset = (Number(oh) * 60 + Number(om)) * 60_000 * (sign === '-' ? -1 : 1);
  return local - offset;
}

/** The database-export CSV (ws/csv.ts): the header names the columns; each row is one price_change with its `changes`. */
export async function surveyTapeCsv(_conn: DuckDBConnection, file: string): Promise<InputSurvey> {
  const sample = await sampleLines(file);
  const header = csvFields((sample.windows[0]?.[0] ?? '').toLowerCase()).map((c) => c.trim());
  const tsCol = header.indexOf('timestamp');
  const chCol = header.indexOf('changes');
  const t = newTally();
  const counted = perWindow(sample, t, (line, wi, li) => {
    if (wi === 0 && li === 0) return;
    const f = csvFields(line);
    const ms = csvTime(f[tsCol] ?? '');
    if (!Number.isFinite(ms)) return;
    seeTime(t, ms);
    t.levels += len(parse(f[chCol] ?? ''));
  });
  return result(t, scaleToFile(sample, counted));
}
