import path from 'node:path';
import { sqlIdent } from '../src/lake/duckdb.js';
import { csvHeader, firstLine, loadJsonObjects } from './metadata/json.js';
import { ingestSql } from './metadata/sql.js';
import type { BatchContext, SourceHandler } from './types.js';
import { surveyFills } from './fills-survey.js';
import { JSON_CAP, jsonObjectLimit } from './memory.js';
import { stageLineChunks } from './chunked.js';
import { identifierMacros } from './identifiers.js';

/**
 * On-chain OrderFilled events → trades. Accepted shapes (documented in lake/README.md):
 *  - JSON array or JSON lines of decoded events, snake_case (block_timestamp, maker_asset_id, …) or camelCase
 *    (timestamp, makerAssetId, …), amounts as integer strings with 6 decimals;
 *  - a subgraph GraphQL answer {"data": {"orderFilledEvents": [ … camelCase events … ]}};
 *  - CSV with Goldsky orderFilledEvents columns (id, transactionHash, timestamp, orderHash, maker, taker,
 *    makerAssetId, takerAssetId, makerAmountFilled, takerAmountFilled, fee, optional blockNumber/logIndex).
 * Derivation (side, price, size, exchange-taker fills dropped, collateral) is one SQL statement for every fills
 * source, chain files included: sql/ingest/fills.sql, run by `deriveFills`.
 */

/**
 * The venue's exchange contracts (lower-case), V1 and V2 (docs/chain-v2.md): a fill whose taker is one of them is
 * the match's echo; a fill a V2 contract emitted is paid in PMCT.
 */
export const EXCHANGE_CONTRACTS = {
  ctf: '0x4bfb41d5b3570defd03c39a9a4d8de6bd8b8982e',
  negrisk: '0xc5d563a36ae78145c45a50134d48a1215220f80a',
  ctf_v2: '0xe111180000d2663c0091e4f400237545b87b996b',
  negrisk_v2: '0xe2222d279d744050d28e00520010520000310f59',
} as const;

/** Target field → accepted source names (first present wins). */
const FIELDS: Record<string, readonly string[]> = {
  event: ['event', 'event_name', 'eventName'],
  block_number: ['block_number', 'blockNumber'],
  block_timestamp: ['block_timestamp', 'timestamp', 'blockTimestamp', 'block_time'],
  transaction_hash: ['transaction_hash', 'transactionHash', 'tx_hash'],
  log_index: ['log_index', 'logIndex'],
  order_hash: ['order_hash', 'orderHash'],
  maker: ['maker'],
  taker: ['taker'],
  // DuckDB matches JSON keys case-insensitively, so makerAssetID needs no entry of its own.
  maker_asset_id: ['maker_asset_id', 'makerAssetId'],
  taker_asset_id: ['taker_asset_id', 'takerAssetId'],
  maker_amount_filled: ['maker_amount_filled', 'makerAmountFilled'],
  taker_amount_filled: ['taker_amount_filled', 'takerAmountFilled'],
  fee: ['fee'],
  source_id: ['id'],
  // V2 events name the filled order's side (0 BUY, 1 SELL) and one token instead of the two asset ids.
  side: ['side'],
  token_id: ['token_id', 'tokenId'],
  contract: ['contract', 'contract_address'],
};
const REQUIRED = ['block_timestamp', 'transaction_hash', 'maker', 'taker', 'maker_asset_id', 'taker_asset_id', 'maker_amount_filled', 'taker_amount_filled'];

function detect(file: string, head: string): boolean {
  const name = path.basename(file).toLowerCase();
  if (/\.csv(\.gz)?$/.test(name)) {
    const cols = csvHeader(head.replace(/^\uFEFF/, '').split(/\r?\n/, 1)[0] ?? '');
    return cols.some((c) => FIELDS.maker_asset_id!.includes(c)) && cols.some((c) => FIELDS.taker_asset_id!.includes(c));
  }
  const start = head.trimStart()[0];
  if (start !== '[' && start !== '{') return false;
  return /"OrderFilled"|"orderFilledEvents"|"(maker_asset_id|makerAssetId)"\s*:/.test(head);
}

/**
 * The accepted key spellings present in the first records (read_json slows down with every extra column),
 * and whether the file is a subgraph GraphQL answer `{"data": {"orderFilledEvents": [...]}}`.
 */
async function sniffKeys(ctx: BatchContext, file: string): Promise<{ names: string[]; graphql: boolean }> {
  const all = [...new Set(Object.values(FIELDS).flat())];
  try {
    const r = await ctx.conn.runAndReadAll(
      `SELECT DISTINCT lower(k) AS k FROM (SELECT unnest(json_keys(json)) AS k
         FROM (SELECT json FROM read_json_objects($file, format = 'auto') LIMIT 1000))`,
      { file },
    );
    const keys = new Set(r.getRowObjectsJS().map((x) => String(x.k)));
    const present = all.filter((n) => keys.has(n.toLowerCase()));
    return { names: present.length > 0 ? present : all, graphql: present.length === 0 && keys.has('data') };
  } catch {
    return { names: all, graphql: false };
  }
}

async function loadJson(ctx: BatchContext, file: string): Promise<boolean> {
  const { names, graphql } = await sniffKeys(ctx, file);
  // Every accepted spelling is a VARCHAR column (absent keys read as NULL; coalesce picks the one this file
  // uses). Reading numbers as text keeps every digit of amounts beyond 64 bits.
  const coalesced = (col: (n: string) => string): string =>
    Object.entries(FIELDS)
      .map(([target, ns]) => {
        const have = ns.filter((n) => names.includes(n));
        return `${have.length > 0 ? `coalesce(${have.map(col).join(', ')})` : 'NULL::VARCHAR'} AS ${sqlIdent(target)}`;
      })
      .join(', ');
  const fromObjects = async (): Promise<boolean> => {
    if (!(await loadJsonObjects(ctx, file, '_fills_objs'))) return false;
    if (graphql) {
      // The events are the array under data.orderFilledEvents; `line` is then the event's position in it.
      await ctx.conn.run(
        `CREATE OR REPLACE TEMP TABLE _fills_objs AS
         SELECT row_number() OVER () AS ord, obj FROM (
           SELECT unnest(json_extract(obj, '$.data.orderFilledEvents[*]')) AS obj FROM _fills_objs ORDER BY ord)`,
      );
    }
    await ctx.conn.run(`CREATE OR REPLACE TEMP TABLE _fills_raw AS SELECT ord AS line, ${coalesced((n) => `(obj->>'${n}')`)} FROM _fills_objs`);
    await ctx.conn.run('DROP TABLE IF EXISTS _fills_objs');
    return true;
  };
  if (graphql) return fromObjects();
  try {
    const columns = `{${names.map((n) => `${sqlIdent(n)}: 'VARCHAR'`).join(', ')}}`;
    await ctx.conn.run(
      `CREATE OR REPLACE TEMP TABLE _fills_raw AS
       SELECT row_number() OVER () AS line, ${coalesced(sqlIdent)}
       FROM read_json($file, format = 'auto', columns = ${columns}, maximum_object_size = $max)`,
      { file, max: jsonObjectLimit(file, JSON_CAP) },
    );
    return true;
  } catch (err) {
    // DuckDB refused the file (a malformed line): parse object by object to name the bad lines, keep the rest.
    ctx.log.debug({ file, err: (err as Error).message }, 'fills: falling back to per-object parsing');
    return fromObjects();
  }
}

async function loadCsv(ctx: BatchContext, file: string): Promise<boolean> {
  const cols = csvHeader(firstLine(file));
  const pickCol = (target: string): string | undefined => FIELDS[target]!.find((n) => cols.includes(n));
  const missing = REQUIRED.filter((t) => pickCol(t) === undefined);
  if (missing.length > 0) {
    ctx.issues.push({ file, line: 1, message: `fills CSV lacks column(s) for ${missing.join(', ')}` });
    return false;
  }
  const select = Object.keys(FIELDS)
    .map((t) => {
      const c = pickCol(t);
      return c === undefined ? `NULL::VARCHAR AS ${sqlIdent(t)}` : `${sqlIdent(c)} AS ${sqlIdent(t)}`;
    })
    .join(', ');
  await ctx.conn.run(
    `CREATE OR REPLACE TEMP TABLE _fills_raw AS
     SELECT row_number() OVER () + 1 AS line, ${select} FROM read_csv($file, header = true, all_varchar = true)`,
    { file },
  );
  return true;
}

/**
 * Stages the trades of `_fills_raw` (its columns: sql/ingest/fills.sql) into stg_trades, reports the rejected
 * records against `file` by their `line`, adds the counts, and drops the temporary tables.
 */
export async function deriveFills(ctx: BatchContext, file: string): Promise<void> {
  const { conn } = ctx;
  await identifierMacros(conn);
  await conn.run(ingestSql('fills', 'parse'));
  const problems = await conn.runAndReadAll(ingestSql('fills', 'problems'));
  for (const r of problems.getRowObjectsJS()) {
    ctx.issues.push({ file, line: Number(r.line), message: `fill skipped: ${String(r.problem)}` });
  }
  const params = { ...EXCHANGE_CONTRACTS };
  const c = (await conn.runAndReadAll(ingestSql('fills', 'counts'), params)).getRowObjectsJS()[0]!;
  await conn.run(ingestSql('fills', 'stage'), params);
  const add = (k: string, v: unknown) => (ctx.counts[k] = (ctx.counts[k] ?? 0) + Number(v));
  add('fills', c.fills);
  add('fills_exchange_taker_dropped', c.exchange_taker);
  add('fills_rejected', c.rejected);
  add('fills_other_events', c.other_events);
  ctx.log.debug({ file, fills: Number(c.fills), rejected: Number(c.rejected) }, 'fills staged');
  for (const t of ['_fills_raw', '_fills_parsed']) await conn.run(`DROP TABLE IF EXISTS ${t}`);
}

export const fillsHandler: SourceHandler = {
  kind: 'fills',
  name: 'on-chain OrderFilled events (JSON / JSONL decoded events, Goldsky CSV)',
  detect,
  async stage(ctx, file) {
    if (/\.csv(\.gz)?$/i.test(file)) {
      if (await loadCsv(ctx, file)) await deriveFills(ctx, file);
      return;
    }
    await stageLineChunks(ctx, file, async (part) => {
      if (await loadJson(ctx, part)) await deriveFills(ctx, part);
    });
  },
  survey: (conn, file) => surveyFills(conn, file, Object.values(EXCHANGE_CONTRACTS)),
};
