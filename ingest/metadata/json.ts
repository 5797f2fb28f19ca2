import fs from 'node:fs';
import path from 'node:path';
import zlib from 'node:zlib';
import { sqlIdent } from '../../src/lake/duckdb.js';
import type { BatchContext } from '../types.js';
import { makeScratchDir } from '../scratch.js';
import { JSON_CAP, jsonObjectLimit } from '../memory.js';

/**
 * Loads every top-level JSON object of a file (a JSON array, one object, or JSON lines; .gz transparently)
 * into TEMP table `table(ord BIGINT, obj JSON)`. DuckDB parses; only when it refuses the file do we look at
 * it line by line in JavaScript, to name the bad lines and still load the good ones.
 * Returns false when nothing could be loaded (an issue has been recorded).
 */
export async function loadJsonObjects(ctx: BatchContext, file: string, table: string): Promise<boolean> {
  const t = sqlIdent(table);
  try {
    await ctx.conn.run(
      `CREATE OR REPLACE TEMP TABLE ${t} AS
       SELECT row_number() OVER () AS ord, json AS obj
       FROM read_json_objects($file, format = 'auto', maximum_object_size = $max)`,
      { file, max: jsonObjectLimit(file, JSON_CAP) },
    );
    return true;
  } catch (err) {
    return loadLineByLine(ctx, file, t, (err as Error).message);
  }
}

function readText(file: string): string {
  const buf = fs.readFileSync(file);
  return (file.endsWith('.gz') ? zlib.gunzipSync(buf) : buf).toString('utf8');
}

function lineOfPosition(text: string, message: string): number | undefined {
  const m = /line (\d+)/.exec(message);
  if (m) return Number(m[1]);
  const p = /position (\d+)/.exec(message);
  if (!p) return undefined;
  return text.slice(0, Number(p[1])).split('\n').length;
}

async function loadLineByLine(ctx: BatchContext, file: string, t: string, duckMessage: string): Promise<boolean> {
  const text = readText(file);
  const trimmed = text.trimStart();
  if (!trimmed.startsWith('{') || !trimmed.includes('\n')) {
    // One JSON document (array or object) that does not parse: report where.
    try {
      JSON.parse(text);
      ctx.issues.push({ file, message: duckMessage });
    } catch (e) {
      const line = lineOfPosition(text, (e as Error).message);
      ctx.issues.push({ file, ...(line ? { line } : {}), message: `invalid JSON: ${(e as Error).message}` });
    }
    return false;
  }
  const good: string[] = [];
  text.split('\n').forEach((raw, i) => {
    const line = raw.trim();
    if (line === '') return;
    try {
      const obj: unknown = JSON.parse(line);
      if (obj === null || typeof obj !== 'object' || Array.isArray(obj)) throw new Error('not a JSON object');
      good.push(`{"l":${i + 1},"o":${line}}`);
    } catch (e) {
      ctx.issues.push({ file, line: i + 1, message: `invalid JSON line: ${(e as Error).message}` });
    }
  });
  if (good.length === 0) return false;
  const dir = makeScratchDir(ctx.lakeDir, 'jsonl');
  const tmp = path.join(dir, 'good.jsonl');
  fs.writeFileSync(tmp, good.join('\n'));
  try {
    await ctx.conn.run(
      `CREATE OR REPLACE TEMP TABLE ${t} AS
       SELECT (json->>'l')::BIGINT AS ord, json->'o' AS obj
       FROM read_json_objects($tmp, format = 'newline_delimited', maximum_object_size = $max)`,
      { tmp, max: jsonObjectLimit(tmp, JSON_CAP) },
    );
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
  return true;
}

/** The first line of a (possibly gzipped) text file, for CSV headers. */
export function firstLine(file: string): string {
  const fd = fs.openSync(file, 'r');
  try {
    const buf = Buffer.alloc(65536);
    const n = fs.readSync(fd, buf, 0, buf.length, 0);
    let head = buf.subarray(0, n);
    if (file.endsWith('.gz')) head = zlib.gunzipSync(fs.readFileSync(file)).subarray(0, 65536);
    const s = head.toString('utf8').replace(/^\uFEFF/, '');
    const nl = s.indexOf('\n');
    return (nl === -1 ? s : s.slice(0, nl)).replace(/\r$/, '');
  } finally {
    fs.closeSync(fd);
  }
}

/** Splits a CSV header line into column names (quotes removed). */
export function csvHeader(line: string): string[] {
  return line.split(',').map((c) => c.trim().replace(/^"|"$/g, ''));
}
