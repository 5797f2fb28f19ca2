import { headerLine } from '../detect.js';
import { deriveFills } from '../fills.js';
import { loadJsonObjects } from '../metadata/json.js';
import { ingestSql } from '../metadata/sql.js';
import { identifierMacros } from '../identifiers.js';
import { noteLanded, type BatchContext, type SourceHandler } from '../types.js';

/**
 * Chain files of `pmlake chain` (docs/chain-format.md) → every `log` line in chain_logs, every `OrderFilled`
 * (V1 and V2) through the one fills derivation (sql/ingest/fills.sql) into trades. The checks of the file
 * (torn, missing or inconsistent block lines, timestamps going backwards, the indexer's `error` lines) are
 * issues naming the file and line; what is sound lands. SQL: sql/ingest/chain_files.sql.
 */

/** Issues of one file beyond this many are summed up in one. */
const MAX_ISSUES = 100;
const TEMP_TABLES = ['_chain_objs', '_chain_blocks', '_chain_logs'];

/** The first line names the format; a later format is not guessed at. */
async function checkHeader(ctx: BatchContext): Promise<void> {
  const r = await ctx.conn.runAndReadAll(`SELECT kind, obj->>'format' AS format FROM _chain_objs WHERE ord = 1`);
  const head = r.getRowObjectsJS()[0];
  if (head?.kind !== 'chain_range') throw Object.assign(new Error('the first line is not a chain_range line'), { line: 1 });
  if (head.format !== '1') throw Object.assign(new Error(`chain file format ${String(head.format)}; this ingest reads format 1`), { line: 1 });
}

async function reportProblems(ctx: BatchContext, file: string): Promise<void> {
  const rows = (await ctx.conn.runAndReadAll(ingestSql('chain_files', 'problems'))).getRowObjectsJS();
  for (const r of rows.slice(0, MAX_ISSUES)) {
    const n = Number(r.n);
    ctx.issues.push({ file, line: Number(r.line), message: `chain file: ${String(r.message)}`, ...(n > 1 ? { count: n } : {}) });
  }
  if (rows.length > MAX_ISSUES) {
    const rest = rows.slice(MAX_ISSUES);
    ctx.issues.push({
      file,
      line: Number(rest[0]!.line),
      message: `chain file: ${rest.length} more issues`,
      count: rest.reduce((a, r) => a + Number(r.n), 0),
    });
  }
}

async function stage(ctx: BatchContext, file: string): Promise<void> {
  const { conn } = ctx;
  // DuckDB reads the lines; only a file it refuses (a torn or malformed line) is salvaged line by line, naming them.
  if (!(await loadJsonObjects(ctx, file, '_chain_objs'))) return;
  await identifierMacros(conn);
  try {
    await conn.run(ingestSql('chain_files', 'lines'));
    await checkHeader(ctx);
    await conn.run(ingestSql('chain_files', 'blocks'));
    await conn.run(ingestSql('chain_files', 'logs'));
    await reportProblems(ctx, file);
    await conn.run(ingestSql('chain_files', 'stage_logs'));
    await conn.run(ingestSql('chain_files', 'fills_raw'));
    await deriveFills(ctx, file);
    const s = (await conn.runAndReadAll(ingestSql('chain_files', 'summary'))).getRowObjectsJS()[0]!;
    const add = (k: string, v: unknown) => (ctx.counts[k] = (ctx.counts[k] ?? 0) + Number(v));
    add('chain_logs', s.logs);
    add('chain_logs_not_landed', s.logs_not_landed);
    add('chain_error_lines', s.error_lines);
    if (s.newest_block_ms !== null) noteLanded(ctx, 'chain', Number(s.newest_block_ms));
    ctx.log.debug({ file, logs: Number(s.logs), not_landed: Number(s.logs_not_landed) }, 'chain file staged');
  } finally {
    for (const t of [...TEMP_TABLES, '_fills_raw']) await conn.run(`DROP TABLE IF EXISTS ${t}`);
  }
}

export const chainFilesHandler: SourceHandler = {
  kind: 'fills',
  name: 'chain files (pmlake chain)',
  // The first line names the format (docs/chain-format.md), whatever its spacing.
  detect: (_file, head) => headerLine(head)?.kind === 'chain_range',
  stage,
};
