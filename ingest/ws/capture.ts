import fs from 'node:fs';
import path from 'node:path';
import type { BatchContext, SourceHandler } from '../types.js';
import { headerLine } from '../detect.js';
import { surveyCapture } from './survey.js';
import { makeScratchDir } from '../scratch.js';
import { jsonObjectLimit } from '../memory.js';
import { bump, finishTape, NO_CARRY, runSqlFile, type Carry, type TapeBatchContext } from './common.js';
import { chunkBytes, splitLines } from './json.js';
import { dropCopies, replaceLaterCopies, stagedMarks } from './capture-redundancy.js';
import { dropCoveredOutages, stageOutages } from './capture-outages.js';
import { reportFrameIssues } from './capture-issues.js';

/**
 * Capture files of `pmlake record` (docs/capture-format.md): one JSON object per line, each frame line the venue's
 * text as a JSON string with the recorder's receive time. DuckDB reads the lines (one parse, a NULL row for a line
 * that is not JSON), the frames become the tape's elements with their receive time as the basis, and the common tail
 * (ws_json_messages.sql, ws_stage.sql) stages raw, l2 and last_trades exactly as for every tape format. Copies of a
 * frame recorded by another connection or recorder land once (capture-redundancy.ts); outages become incidents
 * (capture-outages.ts). Large files are staged in chunks cut at line ends, like JSON lines (json.ts).
 */
export const captureHandler: SourceHandler = {
  kind: 'ws',
  name: 'ws-capture',
  detect(file, head) {
    if (/\.capture\.jsonl$/i.test(file.replace(/\.gz$/i, ''))) return true;
    // Renamed: its first line, the recorder's start line (docs/capture-format.md), read as JSON.
    const start = headerLine(head);
    return start?.event === 'start' && 'format' in start && 'recorder' in start;
  },
  async stage(ctx, file) {
    await stageCapture(ctx as TapeBatchContext, file);
  },
  survey: surveyCapture,
};

/** The event types a capture holds beyond the tape's: kept in raw, not counted as unknown. */
const ALSO_KNOWN = ['new_market', 'market_resolved'];

const COLUMNS = `{'recv_ms': 'BIGINT', 'event': 'VARCHAR', 'conn': 'INTEGER', 'frame': 'VARCHAR', 'assets': 'VARCHAR[]',
  'from_ms': 'BIGINT', 'to_ms': 'BIGINT', 'reason': 'VARCHAR', 'recorder': 'VARCHAR', 'session': 'VARCHAR', 'format': 'INTEGER'}`;

/**
 * The longest line read (a longer one is reported as malformed). DuckDB's reader buffers twice this per thread, and
 * the venue's largest frame — the books of a connection's 500 assets in one array — is a few MB.
 */
const MAX_LINE_BYTES = 64 * 1024 * 1024;

/** What carries over the chunks of one file; lastMs: the newest receive time read so far. */
type FileState = { carry: Carry; source: string | null; recorder: string; lastMs: number | null };

async function stageCapture(ctx: TapeBatchContext, file: string): Promise<void> {
  await ctx.conn.run(`CREATE OR REPLACE TEMP TABLE _cap_subs (conn INTEGER, asset VARCHAR, line BIGINT, recv_ms BIGINT)`);
  await ctx.conn.run(`CREATE OR REPLACE TEMP TABLE _cap_disc (conn INTEGER, line BIGINT, recv_ms BIGINT)`);
  const state: FileState = { carry: NO_CARRY, source: null, recorder: '', lastMs: null };
  const torn = lastLineTorn(file);
  try {
    if (fs.statSync(file).size <= chunkBytes(ctx)) {
      await stagePart(ctx, file, file, 0, state, torn);
    } else {
      const dir = makeScratchDir(ctx.lakeDir, 'chunks');
      try {
        const chunks = [...splitLines(file, dir, chunkBytes(ctx))];
        for (const [i, chunk] of chunks.entries()) {
          await stagePart(ctx, chunk.path, file, chunk.firstLine - 1, state, torn && i === chunks.length - 1);
          fs.rmSync(chunk.path, { force: true });
          bump(ctx, 'tape_chunks', 1);
          if (ctx.maybeFlush) await ctx.maybeFlush();
        }
      } finally {
        fs.rmSync(dir, { recursive: true, force: true });
      }
    }
    if (state.lastMs !== null) bump(ctx, 'capture_disconnects_covered', await dropCoveredOutages(ctx, state.recorder, state.lastMs));
  } finally {
    for (const t of ['_cap_subs', '_cap_disc', '_cap_ln', '_cap_ev', '_cap_fr']) await ctx.conn.run(`DROP TABLE IF EXISTS ${t}`);
  }
}

/** Every line ends with a newline; a file that does not was cut short (a recorder killed mid-line). */
function lastLineTorn(file: string): boolean {
  const size = fs.statSync(file).size;
  if (size === 0) return false;
  const fd = fs.openSync(file, 'r');
  try {
    const b = Buffer.alloc(1);
    fs.readSync(fd, b, 0, 1, size - 1);
    return b[0] !== 10;
  } finally {
    fs.closeSync(fd);
  }
}

/**
 * DuckDB skips blank lines, which would shift every later line number. A file holding some (none should) is read
 * from a copy where each is `{}`: a line without recv_ms, reported as malformed at its own number.
 */
function withoutBlankLines(ctx: BatchContext, part: string): { path: string; cleanup(): void } {
  if (!hasBlankLine(part)) return { path: part, cleanup: () => {} };
  const lines = fs.readFileSync(part, 'utf8').split('\n');
  const last = lines.length - 1;
  const filled = lines.map((l, i) => (i < last && l.trim() === '' ? '{}' : l)).join('\n');
  const dir = makeScratchDir(ctx.lakeDir, 'capture');
  const out = path.join(dir, 'filled.jsonl');
  fs.writeFileSync(out, filled);
  return { path: out, cleanup: () => fs.rmSync(dir, { recursive: true, force: true }) };
}

/** Whether a line is empty (or only a carriage return), read in blocks of 16 MiB. */
function hasBlankLine(file: string): boolean {
  const fd = fs.openSync(file, 'r');
  const buf = Buffer.allocUnsafe(16 << 20);
  try {
    // The two bytes before each block: a blank line may straddle the cut. A file starts as after a line end.
    let prev = Buffer.from('x\n');
    for (;;) {
      const n = fs.readSync(fd, buf, 0, buf.length, null);
      if (n === 0) return false;
      const block = Buffer.concat([prev.subarray(prev.length - 2), buf.subarray(0, n)]);
      if (block.indexOf('\n\n') !== -1 || block.indexOf('\n\r\n') !== -1) return true;
      prev = block.subarray(block.length - 2);
    }
  } finally {
    fs.closeSync(fd);
  }
}

async function stagePart(ctx: BatchContext, part: string, file: string, lineOffset: number, state: FileState, torn: boolean): Promise<void> {
  const { conn } = ctx;
  const read = withoutBlankLines(ctx, part);
  try {
    await conn.run(
      `CREATE OR REPLACE TEMP TABLE _cap_ln AS
       SELECT ordinality + $off AS line, * EXCLUDE (ordinality)
       FROM read_json($f, format = 'newline_delimited', columns = ${COLUMNS}, ignore_errors = true, maximum_object_size = $max) WITH ORDINALITY`,
      { f: read.path, off: lineOffset, max: jsonObjectLimit(read.path, MAX_LINE_BYTES) },
    );
  } finally {
    read.cleanup();
  }
  if (state.source === null) {
    const h = await headerRow(ctx);
    // A recorder killed before its first line was complete leaves an empty file, cut at its last complete line.
    if (h === null) return;
    readHeader(ctx, file, state, h);
  }
  await reportBadLines(ctx, file, torn);
  const last = (await conn.runAndReadAll(`SELECT max(recv_ms) FROM _cap_ln`)).getRows()[0]?.[0];
  if (last !== null && last !== undefined) state.lastMs = Math.max(state.lastMs ?? 0, Number(last));
  await runSqlFile(conn, 'capture_frames.sql');
  await conn.run('DROP TABLE _cap_ln');

  const source = state.source ?? '';
  const marks = await stagedMarks(ctx);
  bump(ctx, 'capture_copies_dropped', await dropCopies(ctx, source));
  await runSqlFile(conn, 'capture_elements.sql');
  await runSqlFile(conn, 'ws_json_messages.sql');
  await runSqlFile(conn, 'capture_recv.sql');
  await reportFrameIssues(ctx, file, ALSO_KNOWN);
  const out = await stageOutages(ctx, state.recorder);
  bump(ctx, 'capture_disconnects', out.incidents);
  if (out.bad > 0) {
    ctx.issues.push({
      file,
      ...(out.badLine !== null ? { line: out.badLine } : {}),
      message: 'outage line without from_ms, to_ms or assets; skipped',
      count: out.bad,
    });
  }
  if (out.refused > 0) {
    bump(ctx, 'refused_identifiers', out.refused);
    ctx.issues.push({
      file,
      ...(out.refusedLine !== null ? { line: out.refusedLine } : {}),
      message: `${out.refused} outage asset(s) whose token id is not a uint256 in decimal (or whose reason is over 256 bytes), no incident; first at line ${out.refusedLine}`,
      count: out.refused,
    });
  }
  state.carry = await finishTape(ctx, file, (el) => ({ line: el, at: `line ${el}` }), state.carry, ALSO_KNOWN);
  bump(ctx, 'capture_copies_replaced', await replaceLaterCopies(ctx, source, marks));
}

/** Line 1 of the file, or null when the file holds no line at all. */
async function headerRow(ctx: BatchContext): Promise<Record<string, unknown> | undefined | null> {
  const rows = (await ctx.conn.runAndReadAll(`SELECT line, event, format, recorder, session FROM _cap_ln ORDER BY line LIMIT 1`)).getRowObjectsJS();
  if (rows.length === 0) return null;
  return Number(rows[0]!.line) === 1 ? rows[0] : undefined;
}

/** A recorder id lands in incidents (the `capture_disconnect` detail): a name, bounded like the rest (identifiers.sql). */
const MAX_RECORDER_BYTES = 256;

/**
 * Line 1 names the recorder (whose frames another recorder's may duplicate) and the format. A later format is not
 * guessed at: the file is reported as not ingested. A file whose first line is damaged (or names a recorder id over
 * its bound) still lands, as a source of its own.
 */
function readHeader(ctx: BatchContext, file: string, state: FileState, h: Record<string, unknown> | undefined): void {
  if (h?.event === 'start' && h.format !== null && Number(h.format) !== 1) {
    throw new Error(`capture format ${String(h.format)} is not supported (this ingest reads format 1, docs/capture-format.md)`);
  }
  const long = typeof h?.recorder === 'string' && Buffer.byteLength(h.recorder) > MAX_RECORDER_BYTES;
  if (h?.event === 'start' && typeof h.recorder === 'string' && !long) {
    state.recorder = h.recorder;
    state.source = `${h.recorder}/${typeof h.session === 'string' ? h.session : ''}/`;
    return;
  }
  const what = long ? `names a recorder id over ${MAX_RECORDER_BYTES} bytes` : 'is not a capture start line';
  ctx.issues.push({ file, line: 1, message: `first line ${what}; the file is landed as a recorder of its own` });
  state.recorder = `?${file}`;
  state.source = `?${file}/`;
}

/** Lines that are not JSON objects with recv_ms and either a frame or an event: reported with their line. */
async function reportBadLines(ctx: BatchContext, file: string, torn: boolean): Promise<void> {
  // The first 21 bad lines, how many there are, and whether the last line is one of them.
  const row = (
    await ctx.conn.runAndReadAll(
      `SELECT count(*), list(line ORDER BY line)[1:21], bool_or(line = (SELECT max(line) FROM _cap_ln))
       FROM _cap_ln WHERE recv_ms IS NULL OR (frame IS NULL AND event IS NULL)`,
    )
  ).getRowsJS()[0];
  let count = Number(row?.[0] ?? 0);
  if (count === 0) return;
  let bad = (row?.[1] as bigint[]).map(Number);
  if (torn && row?.[2] === true) {
    const last = Number((await ctx.conn.runAndReadAll(`SELECT max(line) FROM _cap_ln`)).getRows()[0]?.[0]);
    ctx.issues.push({ file, line: last, message: 'file cut short: its last line is incomplete; skipped' });
    bump(ctx, 'torn_lines', 1);
    bad = bad.filter((l) => l !== last);
    count -= 1;
  }
  if (count === 0) return;
  for (const line of bad.slice(0, 20)) ctx.issues.push({ file, line, message: 'malformed capture line skipped' });
  // Past the first 20 lines named one by one, the rest as one issue with their number.
  if (count > 20) ctx.issues.push({ file, line: bad[20]!, message: 'malformed capture line skipped', count: count - 20 });
  bump(ctx, 'malformed_lines', count);
}
