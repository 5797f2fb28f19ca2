import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { BatchContext, SourceHandler } from '../types.js';
import { bump, finishTape, runSqlFile } from './common.js';

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
    await stageJson(ctx, file);
  },
};

async function loadElements(ctx: BatchContext, file: string): Promise<void> {
  await ctx.conn.run(
    `CREATE OR REPLACE TEMP TABLE _ws_el AS
     SELECT ordinality AS el, json AS j FROM read_json_objects($f, format = 'auto', maximum_object_size = 268435456) WITH ORDINALITY`,
    { f: file },
  );
}

async function stageJson(ctx: BatchContext, file: string): Promise<void> {
  const isLines = /\.(jsonl|ndjson)(\.gz)?$/i.test(file);
  let lineOf: (el: number) => number | undefined = (el) => (isLines ? el : undefined);
  let cleanup = (): void => {};
  try {
    await loadElements(ctx, file);
  } catch (err) {
    // Malformed JSON: find the bad lines in JavaScript, report each, and stage the good ones.
    const salvaged = salvageLines(ctx, file, (err as Error).message);
    cleanup = salvaged.cleanup;
    lineOf = (el) => salvaged.lines[el - 1];
    await loadElements(ctx, salvaged.path);
  }
  try {
    await runSqlFile(ctx.conn, 'ws_json_messages.sql');
    await stageRestExtras(ctx, file);
    await finishTape(ctx, file, (el) => {
      const line = lineOf(el);
      return line !== undefined ? { line, at: `line ${line}` } : { at: `frame ${el}` };
    });
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
  file: string,
  duckdbMessage: string,
): { path: string; lines: number[]; cleanup(): void } {
  const text = fs.readFileSync(file, 'utf8');
  const rows = text.split('\n');
  const good: string[] = [];
  const lines: number[] = [];
  const bad: number[] = [];
  rows.forEach((row, i) => {
    if (!row.trim()) return;
    try {
      JSON.parse(row);
      good.push(row);
      lines.push(i + 1);
    } catch {
      bad.push(i + 1);
    }
  });
  if (good.length === 0 || (bad.length > 0 && good.length < 2 && rows.length < 3)) {
    let line: number | undefined;
    try {
      JSON.parse(text);
    } catch (e) {
      const pos = /position (\d+)/.exec((e as Error).message);
      if (pos) line = text.slice(0, Number(pos[1])).split('\n').length;
      else if (/end of JSON input/.test((e as Error).message)) line = text.trimEnd().split('\n').length;
    }
    throw Object.assign(new Error(`not valid JSON (${duckdbMessage.split('\n')[0]})`), line ? { line } : {});
  }
  if (bad.length === 0) {
    // DuckDB failed for another reason (e.g. a pretty-printed multi-line document it could not split).
    throw new Error(duckdbMessage.split('\n')[0]);
  }
  for (const line of bad.slice(0, 20)) ctx.issues.push({ file, line, message: 'malformed JSON line skipped' });
  if (bad.length > 20) ctx.issues.push({ file, message: `${bad.length - 20} more malformed JSON lines skipped` });
  bump(ctx, 'malformed_lines', bad.length);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pmlake-salvage-'));
  const out = path.join(dir, 'good.jsonl');
  fs.writeFileSync(out, good.join('\n') + '\n');
  return { path: out, lines, cleanup: () => fs.rmSync(dir, { recursive: true, force: true }) };
}

/**
 * A REST capture may hold other endpoints beside GET_book: data-api /trades rows are public prints of the
 * same kind as last_trade_price and go to last_trades (no receive time: recv_ts = ts, timestamps in
 * seconds); /prices-history points have no home in the lake and are only counted.
 */
async function stageRestExtras(ctx: BatchContext, file: string): Promise<void> {
  const { conn } = ctx;
  const has = (await conn.runAndReadAll(`SELECT count(*) FROM _ws_fr WHERE kind = 'rest'`)).getRows()[0]?.[0];
  if (!Number(has)) return;
  await conn.run(`CREATE OR REPLACE TEMP TABLE _ws_rest_tr AS
    SELECT unnest(from_json(j -> '$.GET_data_api_trades',
      '[{"asset":"VARCHAR","conditionId":"VARCHAR","side":"VARCHAR","size":"VARCHAR","price":"VARCHAR","timestamp":"VARCHAR","transactionHash":"VARCHAR"}]')) AS t
    FROM _ws_el WHERE json_exists(j, '$.GET_data_api_trades')`);
  await conn.run(`INSERT INTO stg_last_trades
    SELECT make_timestamp(TRY_CAST(t.timestamp AS BIGINT) * 1000000), make_timestamp(TRY_CAST(t.timestamp AS BIGINT) * 1000000),
           t.conditionId, t.asset, upper(t.side), TRY_CAST(t.price AS DECIMAL(10,6)), TRY_CAST(t.size AS DECIMAL(18,6)),
           NULL, t.transactionHash,
           -- seq on the same scale as the tape: receive ms * 1e6 + rank within the second's prints
           TRY_CAST(t.timestamp AS BIGINT) * 1000000000 + row_number() OVER (PARTITION BY t.timestamp ORDER BY t.transactionHash, t.asset) - 1
    FROM _ws_rest_tr
    WHERE t.asset IS NOT NULL AND TRY_CAST(t.timestamp AS BIGINT) IS NOT NULL
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
    ctx.issues.push({ file, message: `${Number(hist)} /prices-history point(s) have no data set in the lake; counted, not stored` });
  }
  await conn.run('DROP TABLE IF EXISTS _ws_rest_tr');
}
