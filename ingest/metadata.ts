import path from 'node:path';
import type { DuckDBConnection, DuckDBValue } from '@duckdb/node-api';
import { ensureCatalogStaging, SOURCE_PRIORITY } from './catalog.js';
import { csvHeader, firstLine, loadJsonObjects } from './metadata/json.js';
import { ingestSql } from './metadata/sql.js';
import type { BatchContext, SourceHandler } from './types.js';
import { identifierMacros, PREVIEW_CHARS, refusedValue } from './identifiers.js';

/**
 * Market metadata in the venue's formats → catalogue source records (see ingest/catalog.ts):
 * Gamma /events (markets nested in events) and /markets (events nested in markets), CLOB /markets pages
 * (bare array or {data, next_cursor} envelope), JSONL(.gz) market dumps ({slug, condition_id, token_ids, …,
 * raw: <Gamma market>}), and the catalogue CSV. DuckDB parses every file; one set-based statement per format.
 */

const CSV_REQUIRED = ['market_id', 'question'];

/** Content that belongs to other handlers: websocket frames / REST books (asset_id, event_type) and fills. */
const FOREIGN = /"(asset_id|event_type|bids|makerAssetId|maker_asset_id|OrderFilled)"|OrderFilled/;
const GAMMA_MARKET = /"(clobTokenIds|outcomePrices)"/;
const GAMMA_EVENT = /"ticker"\s*:/;
const CLOB_MARKET = /"condition_id"\s*:[\s\S]*"(tokens|token_ids|market_slug|question_id)"\s*:|"(tokens|market_slug|question_id)"\s*:[\s\S]*"condition_id"\s*:/;

function detect(file: string, head: string): boolean {
  const name = path.basename(file).toLowerCase();
  if (/\.csv(\.gz)?$/.test(name)) {
    const cols = csvHeader(head.replace(/^\uFEFF/, '').split(/\r?\n/, 1)[0] ?? '');
    return CSV_REQUIRED.every((c) => cols.includes(c));
  }
  const start = head.trimStart()[0];
  if (start !== '[' && start !== '{') return false;
  if (FOREIGN.test(head)) return false;
  if (GAMMA_MARKET.test(head) || CLOB_MARKET.test(head)) return true;
  if (GAMMA_EVENT.test(head) && /"(markets|seriesSlug|series|title)"\s*:/.test(head)) return true;
  // A Gamma /events record whose markets start beyond the head: fall back on the name.
  return /gamma|markets|events/.test(name) && /"(conditionId|question|slug)"\s*:/.test(head);
}

const PRIORITIES: Record<string, DuckDBValue> = {
  gamma: SOURCE_PRIORITY.gamma,
  dump: SOURCE_PRIORITY.gamma_dump,
  clob: SOURCE_PRIORITY.clob,
  csv: SOURCE_PRIORITY.csv,
};

async function countRecords(ctx: BatchContext): Promise<number> {
  const r = await ctx.conn.runAndReadAll('SELECT count(*) AS n FROM stg_market_records');
  return Number(r.getRowObjectsJS()[0]!.n);
}

async function stageCsv(ctx: BatchContext, file: string): Promise<void> {
  const cols = csvHeader(firstLine(file));
  const missing = CSV_REQUIRED.filter((c) => !cols.includes(c));
  if (missing.length > 0) {
    ctx.issues.push({ file, line: 1, message: `catalogue CSV lacks column(s) ${missing.join(', ')}` });
    return;
  }
  // Optional columns absent from this file's header are read as NULL, so one statement serves every variant.
  const known = ['market_id', 'question', 'category', 'volume', 'volume_24h', 'liquidity', 'end_date', 'created_date', 'outcomes', 'outcome_prices', 'active'];
  const select = known.map((c) => (cols.includes(c) ? `"${c}"` : `NULL::VARCHAR AS "${c}"`)).join(', ');
  await ctx.conn.run(
    `CREATE OR REPLACE TEMP TABLE _meta_csv AS
     SELECT row_number() OVER () + 1 AS line, ${select} FROM read_csv($file, header = true, all_varchar = true)`,
    { file },
  );
  const blank = await ctx.conn.runAndReadAll(`SELECT line FROM _meta_csv WHERE nullif(trim(market_id), '') IS NULL ORDER BY line LIMIT 20`);
  for (const r of blank.getRowObjectsJS()) ctx.issues.push({ file, line: Number(r.line), message: 'row without market_id skipped' });
  await identifierMacros(ctx.conn);
  const refused = (await ctx.conn.runAndReadAll(ingestSql('metadata', 'refused_csv'), { named: MAX_NAMED })).getRowObjectsJS();
  const what = 'a market id that is not a decimal of 1 to 17 digits, or a question, category or outcome over its bound; skipped';
  for (const r of refused) ctx.issues.push({ file, line: Number(r.line), message: `row naming ${what}` });
  const rest = Number(refused[0]?.total ?? 0) - refused.length;
  if (rest > 0) ctx.issues.push({ file, message: `${rest} more row(s) naming ${what}`, count: rest });
  if (refused.length > 0) {
    ctx.counts.refused_identifiers = (ctx.counts.refused_identifiers ?? 0) + Number(refused[0]!.total);
    await ctx.conn.run(ingestSql('metadata', 'drop_refused_csv'));
  }
  await ctx.conn.run(ingestSql('metadata', 'csv_records'), { csv: PRIORITIES.csv! });
  await ctx.conn.run('DROP TABLE IF EXISTS _meta_csv');
}

/**
 * The JSON records in TEMP table `_meta_objs(ord, obj)` → `_meta_items` (CLOB envelopes opened), `_meta_gamma`
 * (Gamma markets with their event) and `_meta_clob` (CLOB markets). Shared with the catalogue poll files
 * (ingest/catalogue/polls.ts), whose page bodies are the same records; dropMetaTables removes them.
 */
export async function classifyMetaObjs(conn: DuckDBConnection): Promise<void> {
  await conn.run(ingestSql('metadata', 'expand'));
  await conn.run(ingestSql('metadata', 'classify'));
  await conn.run(ingestSql('metadata', 'classify_clob'));
}

/** Refused records and series named one by one per file; beyond that, one more issue counts the rest. */
const MAX_NAMED = 20;

/**
 * Removes from the classified records every Gamma and CLOB market naming an identifier or text the ingest refuses
 * (sql/ingest/metadata.sql `refuse`, identifiers.sql), each an issue at the line `lineOf` gives for its record, before
 * anything is staged from them; Gamma series over their bounds are counted (gamma_records does not stage them).
 */
export async function refuseMetaRecords(ctx: BatchContext, file: string, lineOf: (ord: number) => number): Promise<void> {
  const { conn } = ctx;
  await identifierMacros(conn);
  await conn.run(ingestSql('metadata', 'refuse'), { chars: PREVIEW_CHARS });
  const rows = (await conn.runAndReadAll(ingestSql('metadata', 'refused'), { named: MAX_NAMED })).getRowObjectsJS();
  for (const r of rows) {
    const market = r.head === null ? '' : ` (${refusedValue(r.head, r.bytes)})`;
    ctx.issues.push({ file, line: lineOf(Number(r.ord)), message: `${String(r.t)} market${market} names ${String(r.why)}; not landed` });
  }
  const total = Number(rows[0]?.total ?? 0);
  if (total > rows.length) {
    ctx.issues.push({ file, message: `${total - rows.length} more market(s) naming a refused identifier or text; not landed`, count: total - rows.length });
  }
  if (total > 0) {
    ctx.counts.refused_identifiers = (ctx.counts.refused_identifiers ?? 0) + total;
    await conn.run(ingestSql('metadata', 'drop_refused_gamma'));
    await conn.run(ingestSql('metadata', 'drop_refused_clob'));
  }
  await conn.run('DROP TABLE _meta_refused');
  const series = (await conn.runAndReadAll(ingestSql('metadata', 'refused_series'))).getRowObjectsJS()[0];
  const n = Number(series?.n ?? 0);
  if (n > 0) {
    ctx.counts.refused_identifiers = (ctx.counts.refused_identifiers ?? 0) + n;
    ctx.issues.push({
      file,
      line: lineOf(Number(series!.ord)),
      message: `${n} series with a slug, ticker, id, title or recurrence over 256 bytes (or a description over 65536); not landed`,
      ...(n > 1 ? { count: n } : {}),
    });
  }
}

/** Catalogue source records (stg_market_records, stg_series_records) from the classified records. */
export async function stageMetaRecords(conn: DuckDBConnection): Promise<void> {
  // gamma_series checks the series' bounds (identifiers.sql).
  await identifierMacros(conn);
  await conn.run(ingestSql('metadata', 'gamma_records'), { gamma: PRIORITIES.gamma!, dump: PRIORITIES.dump! });
  await conn.run(ingestSql('metadata', 'gamma_series'), { gamma: PRIORITIES.gamma! });
  await conn.run(ingestSql('metadata', 'clob_records'), { clob: PRIORITIES.clob! });
}

export async function dropMetaTables(conn: DuckDBConnection): Promise<void> {
  for (const t of ['_meta_objs', '_meta_items', '_meta_gamma', '_meta_clob']) await conn.run(`DROP TABLE IF EXISTS ${t}`);
}

async function stageJson(ctx: BatchContext, file: string): Promise<void> {
  if (!(await loadJsonObjects(ctx, file, '_meta_objs'))) return;
  const { conn } = ctx;
  await classifyMetaObjs(conn);
  const odd = await conn.runAndReadAll(ingestSql('metadata', 'unrecognized'));
  for (const r of odd.getRowObjectsJS()) {
    ctx.issues.push({ file, line: Number(r.ord), message: 'JSON record is neither a Gamma market/event nor a CLOB market; skipped' });
  }
  await refuseMetaRecords(ctx, file, (ord) => ord);
  await stageMetaRecords(conn);
  await dropMetaTables(conn);
}

export const metadataHandler: SourceHandler = {
  kind: 'metadata',
  name: 'market metadata (Gamma /events and /markets JSON, CLOB /markets pages, catalogue CSV, JSONL(.gz) dumps)',
  detect,
  async stage(ctx, file) {
    await ensureCatalogStaging(ctx.conn);
    const before = await countRecords(ctx);
    if (/\.csv(\.gz)?$/i.test(file)) await stageCsv(ctx, file);
    else await stageJson(ctx, file);
    const added = (await countRecords(ctx)) - before;
    ctx.counts.market_records = (ctx.counts.market_records ?? 0) + added;
    ctx.log.debug({ file, market_records: added }, 'metadata staged');
  },
};
