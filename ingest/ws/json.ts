import fs from 'node:fs';
import path from 'node:path';
import type { BatchContext, SourceHandler } from '../types.js';
import { surveyTapeJson } from './survey.js';
import { bump, finishTape, NO_CARRY, runSqlFile, type Carry, type TapeBatchContext } from './common.js';
import { makeScratchDir } from '../scratch.js';
import { JSON_CAP, jsonObjectLimit } from '../memory.js';
import { identifierMacros } from '../identifiers.js';

/**
 * Websocket captures in every JSON layout seen in the wild — a file holding an array of frames, an array of
 * messages, one message object, JSON lines (one frame or message per line), capture wrappers
 * {timestamp, asset_id, message} — and REST /book responses (bare, or under GET_book with other endpoints'
 * payloads beside it). DuckDB splits the file into elements (read_json_objects keeps each element's text
 * byte for byte, which is what the raw tape stores) and parses messages with json_transform; no per-message
 * JavaScript.
 */
export const wsJsonHandler: SourceHandler = {
  kind: 'ws',
  name: 'ws-json',
  detect(file, head) {
    const name = file.toLowerCase().replace(/\.gz$/, '');
    if (!/\.(json|jsonl|ndjson)$/.test(name)) return false;
    if (head.includes('"GET_book"')) return true;
    if (/"event_type"\s*:\s*"(book|price_change|last_trade_price|tick_size_change|best_bid_ask)"/.test(head)) return true;
    // A REST /book response: a token, a book hash and levels, no event type.
    return head.includes('"asset_id"') && head.includes('"hash"') && (head.includes('"bids"') || head.includes('"asks"'));
  },
  async stage(ctx, file) {
    await stageJson(ctx as TapeBatchContext, file);
  },
  survey: surveyTapeJson,
};

/**
 * The file's elements in file order; `obj` says whether an element is a JSON object (its first character after
 * any whitespace is `{`), decided here once: ws_json_messages.sql splits objects from arrays three times, and
 * ltrim() of every frame's text there cost more than the rest of those statements. The first character decides
 * almost always; only text that starts with whitespace is trimmed.
 */
async function loadElements(ctx: BatchContext, file: string): Promise<void> {
  await ctx.conn.run(
    `CREATE OR REPLACE TEMP TABLE _ws_el AS
     SELECT ordinality AS el, json AS j,
            CASE left(json, 1) WHEN '{' THEN true WHEN '[' THEN false ELSE left(ltrim(json), 1) = '{' END AS obj
     FROM read_json_objects($f, format = 'auto', maximum_object_size = $max) WITH ORDINALITY`,
    { f: file, max: jsonObjectLimit(file, JSON_CAP) },
  );
}

/**
 * JSON lines files above this size are staged in chunks cut at line ends, and the orchestrator may flush a
 * batch between chunks, so a multi-GB day of tape never sits in staging at once. Receive time and k carry
 * over the cut, so seq is the same as if the file had been staged whole. The orchestrator sizes the chunks to its
 * memory budget (ingest/memory.ts); PMLAKE_TAPE_CHUNK_BYTES overrides it (tests).
 */
export function chunkBytes(ctx: TapeBatchContext): number {
  return Number(process.env.PMLAKE_TAPE_CHUNK_BYTES ?? ctx.tapeChunkBytes ?? 128 * 1024 * 1024);
}

async function stageJson(ctx: TapeBatchContext, file: string): Promise<void> {
  const isLines = /\.(jsonl|ndjson)$/i.test(file);
  const bytes = chunkBytes(ctx);
  if (!isLines || fs.statSync(file).size <= bytes) {
    await stagePart(ctx, file, file, isLines ? 0 : null, NO_CARRY);
    return;
  }
  const dir = makeScratchDir(ctx.lakeDir, 'chunks');
  try {
    let carry = NO_CARRY;
    for (const chunk of splitLines(file, dir, bytes)) {
      carry = await stagePart(ctx, chunk.path, file, chunk.firstLine - 1, carry);
      fs.rmSync(chunk.path, { force: true });
      bump(ctx, 'tape_chunks', 1);
      if (ctx.maybeFlush) await ctx.maybeFlush();
    }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

/** Cuts a JSON lines file into files of about `bytes` each, at line ends (synchronous, 16 MiB reads). */
export function* splitLines(file: string, dir: string, bytes: number): Generator<{ path: string; firstLine: number }> {
  const fd = fs.openSync(file, 'r');
  const buf = Buffer.allocUnsafe(16 << 20);
  let part = 0;
  let line = 1;
  let out: number | null = null;
  let outPath = '';
  let outBytes = 0;
  let firstLine = 1;
  try {
    for (;;) {
      const n = fs.readSync(fd, buf, 0, buf.length, null);
      if (n === 0) break;
      let start = 0;
      while (start < n) {
        if (out === null) {
          outPath = path.join(dir, `part-${String(part).padStart(5, '0')}.jsonl`);
          out = fs.openSync(outPath, 'w');
          outBytes = 0;
          firstLine = line;
        }
        const room = bytes - outBytes;
        // Cut at the first line end once the chunk is full; otherwise take the whole read.
        let end = n;
        if (n - start >= room) {
          const nl = buf.indexOf(10, start + Math.max(room - 1, 0));
          end = nl === -1 || nl >= n ? n : nl + 1;
        }
        fs.writeSync(out, buf, start, end - start);
        for (let i = start; i < end; i += 1) if (buf[i] === 10) line += 1;
        outBytes += end - start;
        start = end;
        if (outBytes >= bytes && buf[end - 1] === 10) {
          fs.closeSync(out);
          out = null;
          part += 1;
          yield { path: outPath, firstLine };
        }
      }
    }
    if (out !== null) {
      fs.closeSync(out);
      if (outBytes > 0) yield { path: outPath, firstLine };
    }
  } finally {
    fs.closeSync(fd);
  }
}

/** Stages one file or chunk; `lineOffset` is null for non-line formats (positions are frame numbers). */
async function stagePart(ctx: BatchContext, part: string, file: string, lineOffset: number | null, carry: Carry): Promise<Carry> {
  let lineOf: (el: number) => number | undefined = (el) => (lineOffset === null ? undefined : lineOffset + el);
  let cleanup = (): void => {};
  try {
    await loadElements(ctx, part);
  } catch (err) {
    // Malformed JSON: find the bad lines in JavaScript, report each, and stage the good ones.
    const salvaged = salvageLines(ctx, part, file, lineOffset ?? 0, (err as Error).message);
    cleanup = salvaged.cleanup;
    lineOf = (el) => salvaged.lines[el - 1];
    await loadElements(ctx, salvaged.path);
  }
  try {
    await runSqlFile(ctx.conn, 'ws_json_messages.sql');
    await stageRestExtras(ctx, file);
    return await finishTape(
      ctx,
      file,
      (el) => {
        const line = lineOf(el);
        return line !== undefined ? { line, at: `line ${line}` } : { at: `frame ${el}` };
      },
      carry,
    );
  } finally {
    cleanup();
  }
}

/**
 * JSON that DuckDB refused. If it is JSON lines, each line is parsed on its own: bad lines become issues
 * (file and line) and the rest is written to a temporary file for the normal path. A single broken
 * document throws (with the line of the error): the orchestrator reports the file as not ingested.
 */
function salvageLines(
  ctx: BatchContext,
  part: string,
  file: string,
  lineOffset: number,
  duckdbMessage: string,
): { path: string; lines: number[]; cleanup(): void } {
  const text = fs.readFileSync(part, 'utf8');
  const rows = text.split('\n');
  const good: string[] = [];
  const lines: number[] = [];
  const bad: number[] = [];
  rows.forEach((row, i) => {
    if (!row.trim()) return;
    try {
      JSON.parse(row);
      good.push(row);
      lines.push(lineOffset + i + 1);
    } catch {
      bad.push(lineOffset + i + 1);
    }
  });
  if (good.length === 0 || (bad.length > 0 && good.length < 2 && rows.length < 3)) {
    let line: number | undefined;
    try {
      JSON.parse(text);
    } catch (e) {
      const pos = /position (\d+)/.exec((e as Error).message);
      if (pos) line = lineOffset + text.slice(0, Number(pos[1])).split('\n').length;
      else if (/end of JSON input/.test((e as Error).message)) line = lineOffset + text.trimEnd().split('\n').length;
    }
    throw Object.assign(new Error(`not valid JSON (${duckdbMessage.split('\n')[0]})`), line ? { line } : {});
  }
  if (bad.length === 0) {
    // DuckDB failed for another reason (e.g. a pretty-printed multi-line document it could not split).
    throw new Error(duckdbMessage.split('\n')[0]);
  }
  for (const line of bad.slice(0, 20)) ctx.issues.push({ file, line, message: 'malformed JSON line skipped' });
  // Past the first 20 lines named one by one, the rest as one issue with their number.
  if (bad.length > 20) ctx.issues.push({ file, message: 'malformed JSON line skipped', count: bad.length - 20 });
  bump(ctx, 'malformed_lines', bad.length);
  const dir = makeScratchDir(ctx.lakeDir, 'salvage');
  const out = path.join(dir, 'good.jsonl');
  fs.writeFileSync(out, good.join('\n') + '\n');
  return { path: out, lines, cleanup: () => fs.rmSync(dir, { recursive: true, force: true }) };
}

/**
 * A REST capture may hold other endpoints beside GET_book: data-api /trades rows are public prints of the
 * same kind as last_trade_price and go to last_trades (no receive time: recv_ts = ts, timestamps in
 * seconds); /prices-history points have no home in the lake and are only counted. A print naming a token or condition
 * id the ingest refuses (or an over-long side or hash: identifiers.sql) is an issue and lands nowhere.
 */
async function stageRestExtras(ctx: BatchContext, file: string): Promise<void> {
  const { conn } = ctx;
  const has = (await conn.runAndReadAll(`SELECT count(*) FROM _ws_fr WHERE kind = 'rest'`)).getRows()[0]?.[0];
  if (!Number(has)) return;
  await conn.run(`CREATE OR REPLACE TEMP TABLE _ws_rest_tr AS
    SELECT unnest(from_json(j -> '$.GET_data_api_trades',
      '[{"asset":"VARCHAR","conditionId":"VARCHAR","side":"VARCHAR","size":"VARCHAR","price":"VARCHAR","timestamp":"VARCHAR","transactionHash":"VARCHAR"}]')) AS t
    FROM _ws_el WHERE json_exists(j, '$.GET_data_api_trades')`);
  await identifierMacros(conn);
  // A REST capture holds a page of prints: each checked as it stands.
  await conn.run(`CREATE OR REPLACE TEMP MACRO _ws_rest_refused(t) AS pm_bad_token(t.asset) OR pm_bad_condition(t.conditionId)
    OR pm_long_name(t.side) OR pm_long_name(t.transactionHash)`);
  const refused = Number((await conn.runAndReadAll('SELECT count(*) FROM _ws_rest_tr WHERE _ws_rest_refused(t)')).getRows()[0]?.[0] ?? 0);
  if (refused > 0) {
    bump(ctx, 'refused_identifiers', refused);
    ctx.issues.push({
      file,
      message: `${refused} data-api trade(s) naming a token id that is not a uint256 in decimal, a condition id that is not 0x and 64 hex digits, or an over-long side or hash; skipped`,
      count: refused,
    });
  }
  await conn.run(`INSERT INTO stg_last_trades
    SELECT make_timestamp(TRY_CAST(t.timestamp AS BIGINT) * 1000000), make_timestamp(TRY_CAST(t.timestamp AS BIGINT) * 1000000),
           t.conditionId, t.asset, upper(t.side), TRY_CAST(t.price AS DECIMAL(10,6)), TRY_CAST(t.size AS DECIMAL(18,6)),
           NULL, t.transactionHash,
           -- seq on the same scale as the tape: receive ms * 1e6 + rank within the second's prints
           TRY_CAST(t.timestamp AS BIGINT) * 1000000000 + row_number() OVER (PARTITION BY t.timestamp ORDER BY t.transactionHash, t.asset) - 1
    FROM _ws_rest_tr
    WHERE t.asset IS NOT NULL AND TRY_CAST(t.timestamp AS BIGINT) IS NOT NULL AND NOT _ws_rest_refused(t)
      AND TRY_CAST(t.price AS DECIMAL(10,6)) IS NOT NULL AND TRY_CAST(t.size AS DECIMAL(18,6)) IS NOT NULL`);
  const n = (await conn.runAndReadAll('SELECT count(*) FROM _ws_rest_tr')).getRows()[0]?.[0];
  bump(ctx, 'rest_trades', Number(n));
  const hist = (
    await conn.runAndReadAll(`SELECT coalesce(sum(json_array_length(j -> '$.GET_prices_history.history')), 0)
       + coalesce(sum(CASE WHEN json_type(j -> '$.GET_prices_history') = 'ARRAY' THEN json_array_length(j -> '$.GET_prices_history') END), 0)
       FROM _ws_el`)
  ).getRows()[0]?.[0];
  if (Number(hist)) {
    bump(ctx, 'rest_price_history_points_not_stored', Number(hist));
    ctx.issues.push({ file, message: `${Number(hist)} /prices-history point(s) have no data set in the lake; counted, not stored`, count: Number(hist) });
  }
  await conn.run('DROP TABLE IF EXISTS _ws_rest_tr');
}
