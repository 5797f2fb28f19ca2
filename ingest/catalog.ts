import path from 'node:path';
import type { DuckDBConnection } from '@duckdb/node-api';
import { DATASETS } from '../src/lake/layout.js';
import { sqlIdent, sqlString } from '../src/lake/duckdb.js';
import { writeParquetFile } from './partitions.js';
import type { VersionDraft } from './versions.js';
import type { SetName } from '../src/lake/versions.js';
import type { BatchContext } from './types.js';

/**
 * The catalogue (markets, tokens, series) is rebuilt at the end of every batch from *source records*: one
 * row per (source, record) as each source described a market or series. Keeping the records, not only the
 * merged result, is what lets a field be chosen by source priority no matter in which order files arrive,
 * and lets later metadata complete a placeholder created from the tape or from fills.
 *
 * Records are staged by the metadata handler into TEMP tables stg_market_records / stg_series_records,
 * merged with the records already in the lake (catalog/market_records, catalog/series_records), and the
 * markets/tokens/series files are recomputed from them with set-based SQL.
 */

/** Higher wins when two sources disagree on a field; within a source, the newest record (record_ts) wins. */
export const SOURCE_PRIORITY = {
  gamma: 50, // Gamma /markets and /events: the venue's own catalogue, richest and with numeric ids
  gamma_dump: 45, // JSONL dumps: a Gamma market under `raw` plus the dumper's own fields
  clob: 40, // CLOB /markets: condition id, tokens with winner flags, no numeric id
  csv: 30, // the catalogue CSV: numeric id, question, volumes; no condition id, no tokens
  tape: 20, // placeholder: a condition id / token seen on the websocket tape
  fills: 10, // placeholder: a token seen in on-chain fills
} as const;
export type CatalogSource = keyof typeof SOURCE_PRIORITY;

const M = DATASETS.markets.columns;
/** Market fields a source record can carry (availability, ids and bookkeeping are computed). */
const MARKET_FIELDS = [
  'id',
  'condition_id',
  'question_id',
  'event_id',
  'slug',
  'question',
  'description',
  'category',
  'outcomes',
  'outcome_prices',
  'outcome_token_ids',
  'active',
  'closed',
  'resolved',
  'neg_risk',
  'winning_outcome',
  'resolution_date',
  'volume',
  'volume_24h',
  'liquidity',
  'start_date',
  'end_date',
  'created_at',
  'series_id',
  'tick_size',
] as const satisfies readonly (keyof typeof M)[];

export const MARKET_RECORD_COLUMNS: Readonly<Record<string, string>> = {
  source: 'VARCHAR',
  priority: 'INTEGER',
  record_key: 'VARCHAR',
  record_ts: 'TIMESTAMP',
  ...Object.fromEntries(MARKET_FIELDS.map((f) => [f, M[f]])),
};

const S = DATASETS.series.columns;
const SERIES_FIELDS = Object.keys(S) as (keyof typeof S)[];
export const SERIES_RECORD_COLUMNS: Readonly<Record<string, string>> = {
  source: 'VARCHAR',
  priority: 'INTEGER',
  record_ts: 'TIMESTAMP',
  ...S,
};

function ddl(cols: Readonly<Record<string, string>>): string {
  return Object.entries(cols)
    .map(([c, t]) => `${sqlIdent(c)} ${t}`)
    .join(', ');
}

/** Creates the record staging tables and the small SQL macros the metadata statements use (idempotent). */
export async function ensureCatalogStaging(conn: DuckDBConnection): Promise<void> {
  await conn.run(`CREATE TEMP TABLE IF NOT EXISTS stg_market_records (${ddl(MARKET_RECORD_COLUMNS)})`);
  await conn.run(`CREATE TEMP TABLE IF NOT EXISTS stg_series_records (${ddl(SERIES_RECORD_COLUMNS)})`);
  // Venue timestamps come as ISO text with 'Z', '+00' or a bare date; the session is UTC, so TIMESTAMPTZ →
  // TIMESTAMP yields UTC wall time.
  await conn.run(`CREATE OR REPLACE TEMP MACRO pm_ts(x) AS TRY_CAST(TRY_CAST(nullif(trim(x), '') AS TIMESTAMPTZ) AS TIMESTAMP)`);
  // Categories arrive as 'Sports', 'Pop-Culture ', 'science_tech', tags like 'Politics': one spelling.
  await conn.run(`CREATE OR REPLACE TEMP MACRO pm_cat(x) AS nullif(trim(regexp_replace(lower(trim(x)), '[^a-z0-9]+', '_', 'g'), '_'), '')`);
  // Tags are free-form ('World Elections', 'Solana', '1H'); only these name a top-level category.
  await conn.run(
    `CREATE OR REPLACE TEMP MACRO pm_tag_cat(tags) AS list_filter(list_transform(tags, t -> pm_cat(t)), c -> c IN
       ('politics', 'sports', 'crypto', 'economics', 'economy', 'geopolitics', 'science_tech', 'science', 'tech',
        'entertainment', 'weather', 'pop_culture', 'culture', 'business', 'finance', 'esports'))[1]`,
  );
  // Gamma encodes arrays as JSON text inside a string ("[\"Yes\", \"No\"]"); ->> yields that text either way.
  await conn.run(`CREATE OR REPLACE TEMP MACRO pm_str_list(x) AS TRY_CAST(TRY_CAST(x AS JSON) AS VARCHAR[])`);
  await conn.run(`CREATE OR REPLACE TEMP MACRO pm_num_list(x) AS TRY_CAST(TRY_CAST(x AS JSON) AS DOUBLE[])`);
  await conn.run(`CREATE OR REPLACE TEMP MACRO pm_bool(x) AS TRY_CAST(x AS BOOLEAN)`);
  // Stable derived market id: '9' + 17 digits from md5(key). Gamma ids are sequential and 7 digits today, so an
  // 18-digit id starting with 9 cannot collide with one for the foreseeable future.
  await conn.run(
    `CREATE OR REPLACE TEMP MACRO pm_derived_id(k) AS
       '9' || lpad(((('0x' || substr(md5(k), 1, 15))::UBIGINT) % 100000000000000000)::VARCHAR, 17, '0')`,
  );
}

/** The derived id rule in plain TypeScript (documentation and tests; the lake computes it in SQL). */
export function derivedMarketId(key: string, md5Hex: (s: string) => string): string {
  const n = BigInt(`0x${md5Hex(key).slice(0, 15)}`) % 10n ** 17n;
  return `9${n.toString().padStart(17, '0')}`;
}

async function tableExists(conn: DuckDBConnection, name: string): Promise<boolean> {
  const r = await conn.runAndReadAll(`SELECT count(*) AS n FROM duckdb_tables() WHERE table_name = $n`, { n: name });
  return Number(r.getRowObjectsJS()[0]!.n) > 0;
}

export function parquetList(files: string[]): string {
  return `[${files.map(sqlString).join(', ')}]`;
}

/** Loads a single-file data set (or record store) into a TEMP table with the given columns. */
async function loadSingle(conn: DuckDBConnection, table: string, cols: Readonly<Record<string, string>>, files: string[]) {
  await conn.run(`CREATE OR REPLACE TEMP TABLE ${sqlIdent(table)} (${ddl(cols)})`);
  if (files.length > 0) {
    const names = Object.keys(cols).map(sqlIdent).join(', ');
    await conn.run(`INSERT INTO ${sqlIdent(table)} SELECT ${names} FROM read_parquet(${parquetList(files)})`);
  }
}

/**
 * Resolves the staged trades' token → condition id, outcome index and label through the catalogue: staged
 * metadata records first (they may be newer), then the lake's tokens file. Run before trades are written;
 * tokens still unknown keep NULLs and get a placeholder market in finalizeCatalog.
 */
export async function resolveTradeTokens(ctx: BatchContext): Promise<void> {
  const { conn } = ctx;
  if (!(await tableExists(conn, 'stg_trades'))) return;
  await ensureCatalogStaging(conn);
  const tokenFiles = ctx.lake.files('tokens');
  const lakeTokens =
    tokenFiles.length > 0
      ? `SELECT token_id, condition_id, outcome_index, outcome_label, 1 AS rank FROM read_parquet(${parquetList(tokenFiles)})`
      : `SELECT NULL::VARCHAR AS token_id, NULL::VARCHAR, NULL::INTEGER, NULL::VARCHAR, 1 WHERE false`;
  await conn.run(
    `CREATE OR REPLACE TEMP TABLE _trade_token_map AS
     SELECT token_id, condition_id, outcome_index, outcome_label FROM (
       SELECT tok AS token_id, condition_id,
              CASE WHEN len(outcomes) = len(outcome_token_ids) THEN idx - 1 END AS outcome_index,
              CASE WHEN len(outcomes) = len(outcome_token_ids) THEN outcomes[idx] END AS outcome_label,
              0 AS rank, priority, record_ts
       FROM (SELECT *, unnest(outcome_token_ids) AS tok, generate_subscripts(outcome_token_ids, 1) AS idx
             FROM stg_market_records WHERE outcome_token_ids IS NOT NULL AND source NOT IN ('tape', 'fills'))
       UNION ALL BY NAME
       SELECT *, NULL AS priority, NULL AS record_ts FROM (${lakeTokens})
     )
     QUALIFY row_number() OVER (PARTITION BY token_id ORDER BY rank, priority DESC, record_ts DESC NULLS LAST) = 1`,
  );
  await conn.run(
    `UPDATE stg_trades AS t SET
       condition_id = coalesce(m.condition_id, t.condition_id),
       outcome_index = coalesce(m.outcome_index, t.outcome_index),
       outcome_label = coalesce(m.outcome_label, t.outcome_label)
     FROM _trade_token_map m WHERE m.token_id = t.token_id`,
  );
  await conn.run('DROP TABLE IF EXISTS _trade_token_map');
}

/** Tokens and condition ids seen on the tape or in fills this batch, for placeholder catalogue entries. */
async function collectSeenTokens(conn: DuckDBConnection): Promise<void> {
  await conn.run(`CREATE OR REPLACE TEMP TABLE _cat_seen (source VARCHAR, condition_id VARCHAR, token_id VARCHAR)`);
  for (const t of ['stg_l2', 'stg_last_trades', 'stg_book_snapshots', 'stg_top_of_book']) {
    if (await tableExists(conn, t)) {
      // DISTINCT before lower(): a day of l2 is half a million rows of a few hundred pairs.
      await conn.run(
        `INSERT INTO _cat_seen SELECT DISTINCT 'tape', lower(condition_id), asset_id
         FROM (SELECT DISTINCT condition_id, asset_id FROM ${sqlIdent(t)} WHERE asset_id IS NOT NULL)`,
      );
    }
  }
  if (await tableExists(conn, 'stg_raw')) {
    await conn.run(
      `INSERT INTO _cat_seen SELECT DISTINCT 'tape', lower(c), NULL
       FROM (SELECT unnest(condition_ids) AS c FROM (SELECT DISTINCT condition_ids FROM stg_raw)) WHERE c IS NOT NULL`,
    );
  }
  if (await tableExists(conn, 'stg_trades')) {
    await conn.run(`INSERT INTO _cat_seen SELECT DISTINCT 'fills', lower(condition_id), token_id FROM stg_trades WHERE token_id IS NOT NULL`);
  }
}

/** `first(col)` by source priority, then newest record, ignoring sources that said nothing. */
function pick(col: string, extraFilter = ''): string {
  const c = sqlIdent(col);
  return `first(${c} ORDER BY priority DESC, record_ts DESC NULLS LAST) FILTER (WHERE ${c} IS NOT NULL${extraFilter})`;
}

/**
 * Merges staged catalogue records with the lake's, adds placeholders for tokens seen on the tape or in fills,
 * recomputes availability from the lake, and writes markets, tokens, series (and the record stores).
 * Called after every partition of the batch is written, so the lake's trades and book snapshots are current.
 */
export async function finalizeCatalog(ctx: BatchContext): Promise<void> {
  const { conn } = ctx;
  const lake = ctx.lake;
  await ensureCatalogStaging(conn);
  await loadSingle(conn, '_cat_stored_markets', MARKET_RECORD_COLUMNS, lake.files('market_records'));
  await loadSingle(conn, '_cat_stored_series', SERIES_RECORD_COLUMNS, lake.files('series_records'));

  // One record per (source, record_key): the newest by record_ts; on a tie the one staged now (a re-sent
  // record replaces its earlier copy); then a content fingerprint so the choice never depends on file order.
  await conn.run(
    `CREATE OR REPLACE TEMP TABLE _cat_records AS
     SELECT * EXCLUDE (_src, _fp) FROM (
       SELECT s.*, 0 AS _src, md5(s::VARCHAR) AS _fp FROM _cat_stored_markets s
       UNION ALL SELECT r.*, 1, md5(r::VARCHAR) FROM stg_market_records r WHERE record_key IS NOT NULL)
     QUALIFY row_number() OVER (PARTITION BY source, record_key ORDER BY record_ts DESC NULLS LAST, _src DESC, _fp) = 1`,
  );

  // Placeholders: a token (or condition id) seen on the tape or in fills that no record knows yet.
  await collectSeenTokens(conn);
  await conn.run(
    `INSERT INTO _cat_records BY NAME
     SELECT source, CASE source WHEN 'tape' THEN ${SOURCE_PRIORITY.tape} ELSE ${SOURCE_PRIORITY.fills} END AS priority,
            coalesce('token:' || token_id, condition_id) AS record_key, condition_id,
            CASE WHEN token_id IS NOT NULL THEN [token_id] END AS outcome_token_ids
     FROM (SELECT token_id, arg_min(source, source <> 'tape') AS source, max(condition_id) AS condition_id
           FROM _cat_seen WHERE token_id IS NOT NULL GROUP BY token_id
           UNION ALL
           SELECT NULL, 'tape', condition_id FROM _cat_seen WHERE token_id IS NULL AND condition_id IS NOT NULL GROUP BY condition_id) s
     WHERE (token_id IS NOT NULL AND NOT EXISTS (
              SELECT 1 FROM (SELECT unnest(outcome_token_ids) AS tok, condition_id FROM _cat_records) k
              WHERE k.tok = s.token_id AND (k.condition_id IS NOT NULL OR s.condition_id IS NULL)))
        OR (token_id IS NULL AND NOT EXISTS (SELECT 1 FROM _cat_records k WHERE k.condition_id = s.condition_id))`,
  );

  // Market key: the condition id (lower-case hex), found directly, through the Gamma id, or through a token;
  // else the Gamma id; else the token (a fills-only placeholder).
  await conn.run(
    `CREATE OR REPLACE TEMP TABLE _cat_keyed AS
     WITH r AS (SELECT *, row_number() OVER () AS _rid FROM _cat_records),
     tok_cid AS (SELECT tok, min(condition_id) AS cid
                 FROM (SELECT unnest(outcome_token_ids) AS tok, condition_id FROM r WHERE condition_id IS NOT NULL)
                 GROUP BY tok),
     gid_cid AS (SELECT id, min(condition_id) AS cid FROM r WHERE id IS NOT NULL AND condition_id IS NOT NULL GROUP BY id),
     by_tok AS (SELECT _rid, min(t.cid) AS cid
                FROM (SELECT _rid, unnest(outcome_token_ids) AS tok FROM r) u JOIN tok_cid t USING (tok) GROUP BY _rid)
     SELECT r.* EXCLUDE (_rid),
            coalesce(r.condition_id, g.cid, b.cid, 'id:' || r.id, 'token:' || list_min(r.outcome_token_ids)) AS mkey
     FROM r LEFT JOIN gid_cid g ON g.id = r.id LEFT JOIN by_tok b USING (_rid)`,
  );

  const plainFields = MARKET_FIELDS.filter((f) => !['id', 'condition_id', 'closed', 'resolved', 'outcome_token_ids', 'outcomes', 'outcome_prices'].includes(f));
  const META = `AND source NOT IN ('tape', 'fills')`;
  await conn.run(
    `CREATE OR REPLACE TEMP TABLE _cat_markets AS
     SELECT mkey,
       ${pick('id')} AS real_id,
       CASE WHEN mkey LIKE '0x%' THEN mkey ELSE ${pick('condition_id')} END AS condition_id,
       ${plainFields.map((f) => `${pick(f)} AS ${sqlIdent(f)}`).join(',\n       ')},
       ${pick('outcomes', ' AND len(outcomes) > 0')} AS outcomes,
       ${pick('outcome_prices', ' AND len(outcome_prices) > 0')} AS outcome_prices,
       -- A market never reopens: closed / resolved from any source stays true.
       bool_or(closed) AS closed,
       bool_or(resolved) AS resolved,
       -- Token order must match outcomes, so only metadata lists count; placeholders only add unlisted tokens.
       ${pick('outcome_token_ids', ` AND len(outcome_token_ids) > 0 ${META}`)} AS listed_tokens,
       list_sort(list_distinct(flatten(list(outcome_token_ids)))) AS all_tokens,
       list_sort(list_distinct(list(source))) AS sources,
       max(record_ts) AS updated_at
     FROM _cat_keyed GROUP BY mkey`,
  );

  await computeAvailability(conn, lake);
  await mergeSeries(conn);

  const mcols = Object.keys(M);
  const marketSelect = `
    SELECT coalesce(real_id, pm_derived_id(CASE WHEN mkey LIKE 'token:%' THEN mkey ELSE condition_id END)) AS id,
           real_id IS NULL AS id_derived,
           condition_id, question_id, event_id, m.slug, question, m.description,
           -- A market without its own category takes its series' (BTC 5-minute markets carry none).
           coalesce(m.category, sr.category) AS category, outcomes, outcome_prices,
           coalesce(listed_tokens, CASE WHEN len(all_tokens) > 0 THEN all_tokens END) AS outcome_token_ids,
           coalesce(active, NOT coalesce(closed, false)) AS active, coalesce(closed, false) AS closed,
           coalesce(resolved, false) AS resolved, neg_risk,
           CASE WHEN coalesce(resolved, false) THEN winning_outcome END AS winning_outcome,
           resolution_date, volume, volume_24h, liquidity, start_date, end_date, created_at, m.series_id, tick_size,
           coalesce(a.trade_count, 0) AS trade_count, coalesce(a.orderbook_count, 0) AS orderbook_count,
           a.data_from, a.data_to, sources, updated_at, all_tokens AS _all_tokens
    FROM _cat_markets m LEFT JOIN _cat_avail a USING (mkey) LEFT JOIN _cat_series_out sr ON sr.series_id = m.series_id`;
  await conn.run(`CREATE OR REPLACE TEMP TABLE _cat_markets_out AS ${marketSelect}`);

  // Tokens: every token listed for the market (index = position in outcome_token_ids when it parallels
  // outcomes) plus tokens only a placeholder knew (index NULL), so every token seen is reachable.
  await conn.run(
    `CREATE OR REPLACE TEMP TABLE _cat_tokens_out AS
     SELECT token_id, id AS market_id, condition_id,
            CASE WHEN len(outcomes) = len(outcome_token_ids) THEN nullif(list_position(outcome_token_ids, token_id), 0) - 1 END AS outcome_index,
            CASE WHEN len(outcomes) = len(outcome_token_ids) THEN outcomes[list_position(outcome_token_ids, token_id)] END AS outcome_label
     FROM (SELECT *, unnest(list_distinct(list_concat(coalesce(outcome_token_ids, []), coalesce(_all_tokens, [])))) AS token_id
           FROM _cat_markets_out)
     WHERE token_id IS NOT NULL AND token_id <> ''
     QUALIFY row_number() OVER (PARTITION BY token_id ORDER BY outcome_index IS NULL, id_derived, id) = 1`,
  );

  const backfilled = await backfillTradeOutcomes(conn, lake);
  if (backfilled > 0) ctx.counts.trades_outcome_backfilled = (ctx.counts.trades_outcome_backfilled ?? 0) + backfilled;
  const n = await writeIfChanged(conn, `SELECT ${mcols.map(sqlIdent).join(', ')} FROM _cat_markets_out ORDER BY id`, lake, 'markets');
  const t = await writeIfChanged(
    conn,
    `SELECT ${Object.keys(DATASETS.tokens.columns).map(sqlIdent).join(', ')} FROM _cat_tokens_out ORDER BY token_id`,
    lake,
    'tokens',
  );
  const s = await writeIfChanged(conn, `SELECT ${Object.keys(S).map(sqlIdent).join(', ')} FROM _cat_series_out ORDER BY series_id`, lake, 'series');
  const recCols = Object.keys(MARKET_RECORD_COLUMNS).map(sqlIdent).join(', ');
  await writeIfChanged(conn, `SELECT ${recCols} FROM _cat_records ORDER BY source, record_key`, lake, 'market_records');
  const srecCols = Object.keys(SERIES_RECORD_COLUMNS).map(sqlIdent).join(', ');
  await writeIfChanged(conn, `SELECT ${srecCols} FROM _cat_series_records ORDER BY source, series_id`, lake, 'series_records');
  ctx.counts.catalog_markets = n;
  ctx.counts.catalog_tokens = t;
  ctx.counts.catalog_series = s;
  // The records are in the lake now; the next batch of the same run starts from there.
  await conn.run('DELETE FROM stg_market_records');
  await conn.run('DELETE FROM stg_series_records');
  for (const tmp of [
    '_cat_stored_markets',
    '_cat_stored_series',
    '_cat_records',
    '_cat_seen',
    '_cat_keyed',
    '_cat_markets',
    '_cat_avail',
    '_cat_markets_out',
    '_cat_tokens_out',
    '_cat_series_records',
    '_cat_series_out',
    '_cat_write',
    '_cat_token_changes',
    '_cat_token_stats',
  ]) {
    await conn.run(`DROP TABLE IF EXISTS ${sqlIdent(tmp)}`);
  }
}

/**
 * Trades take condition id and outcome from the catalogue at ingest. When fills arrived before their metadata
 * (or a placeholder's tokens gained outcomes), the tokens file changes for tokens that already have trades:
 * rewrite just the trades partitions holding those tokens. Returns the number of trade rows updated.
 */
async function backfillTradeOutcomes(conn: DuckDBConnection, lake: VersionDraft): Promise<number> {
  const tokenFiles = lake.files('tokens');
  if (tokenFiles.length === 0) return 0;
  await conn.run(
    `CREATE OR REPLACE TEMP TABLE _cat_token_changes AS
     SELECT n.token_id, n.condition_id, n.outcome_index, n.outcome_label
     FROM _cat_tokens_out n JOIN read_parquet(${parquetList(tokenFiles)}) o USING (token_id)
     WHERE n.condition_id IS DISTINCT FROM o.condition_id OR n.outcome_index IS DISTINCT FROM o.outcome_index
        OR n.outcome_label IS DISTINCT FROM o.outcome_label`,
  );
  const changed = Number((await conn.runAndReadAll('SELECT count(*) AS n FROM _cat_token_changes')).getRowObjectsJS()[0]!.n);
  if (changed === 0) return 0;
  const def = DATASETS.trades;
  const cols = Object.keys(def.columns);
  const fix = new Set(['condition_id', 'outcome_index', 'outcome_label']);
  const select = cols.map((c) => (fix.has(c) ? `coalesce(c.${sqlIdent(c)}, t.${sqlIdent(c)}) AS ${sqlIdent(c)}` : `t.${sqlIdent(c)}`)).join(', ');
  let updated = 0;
  for (const entry of [...lake.entries('trades')]) {
    const file = path.join(lake.lakeDir, entry.path);
    // Files are sorted by token_id, so row-group statistics make this probe cheap.
    const hit = await conn.runAndReadAll(
      `SELECT count(*) AS n FROM read_parquet(${sqlString(file)}) WHERE token_id IN (SELECT token_id FROM _cat_token_changes)`,
    );
    const n = Number(hit.getRowObjectsJS()[0]!.n);
    if (n === 0) continue;
    // Copy on write: the corrected file is new, the old one is retired with the version (readers may hold it).
    const out = lake.newFile('trades', entry.partition);
    const rows = await writeParquetFile(
      conn,
      `SELECT ${select} FROM read_parquet(${sqlString(file)}) t LEFT JOIN _cat_token_changes c USING (token_id)
       ORDER BY ${def.sortBy.map((c) => `t.${sqlIdent(c)}`).join(', ')}`,
      out,
    );
    lake.retire('trades', [entry.path]);
    lake.add('trades', entry.partition, out, rows);
    updated += n;
  }
  return updated;
}

/**
 * Availability per market: trades and book snapshots (by token), summed over the market's tokens; data_from /
 * data_to span both. Per-token figures live in `catalog/token_stats` (also the token's stored l2 rows and their
 * first receive time, which the book replay uses to skip history a token does not have) and are carried
 * forward: the stored stats plus the rows of the files this batch added (appends only add rows, and each row
 * once). Counting the whole lake every batch would cost a large lake's scan (book_snapshots' small row groups)
 * for a small append. When the batch retired a file of a counted set (a rewrite, e.g. the outcome backfill), or the
 * lake has no stats yet, they are counted from every file once.
 */
async function computeAvailability(conn: DuckDBConnection, lake: VersionDraft): Promise<void> {
  await updateTokenStats(conn, lake);
  await conn.run(
    `CREATE OR REPLACE TEMP TABLE _cat_avail AS
     SELECT mkey, sum(trades)::BIGINT AS trade_count, sum(books)::BIGINT AS orderbook_count,
            min(lo) AS data_from, max(hi) AS data_to
     FROM (SELECT mkey, unnest(all_tokens) AS tok FROM _cat_markets) mt JOIN _cat_token_stats st USING (tok)
     GROUP BY mkey`,
  );
}

/** Recomputes `_cat_token_stats` (and the draft's token_stats file): carried forward, or counted in full. */
export async function updateTokenStats(conn: DuckDBConnection, lake: VersionDraft): Promise<void> {
  const stored = lake.files('token_stats');
  const incremental = stored.length > 0 && !(['trades', 'book_snapshots', 'l2'] as const).some((d) => lake.retiredFrom(d));
  const pick = (d: 'trades' | 'book_snapshots' | 'l2'): string[] => (incremental ? lake.addedFiles(d) : lake.files(d));
  const parts: string[] = [];
  if (incremental) parts.push(`SELECT token_id AS tok, trades, books, lo, hi, l2_rows, l2_lo FROM read_parquet(${parquetList(stored)})`);
  const trades = pick('trades');
  if (trades.length > 0) {
    parts.push(`SELECT token_id, count(*), 0, min(ts), max(ts), 0, NULL::TIMESTAMP FROM read_parquet(${parquetList(trades)}) GROUP BY token_id`);
  }
  const books = pick('book_snapshots');
  if (books.length > 0) {
    parts.push(`SELECT asset_id, 0, count(*), min(ts), max(ts), 0, NULL::TIMESTAMP FROM read_parquet(${parquetList(books)}) GROUP BY asset_id`);
  }
  const l2 = pick('l2');
  if (l2.length > 0) {
    parts.push(`SELECT asset_id, 0, 0, NULL::TIMESTAMP, NULL::TIMESTAMP, count(*), min(recv_ts) FROM read_parquet(${parquetList(l2)}) GROUP BY asset_id`);
  }
  const stats =
    parts.length > 0
      ? `SELECT tok, sum(trades)::BIGINT AS trades, sum(books)::BIGINT AS books, min(lo) AS lo, max(hi) AS hi,
              sum(l2_rows)::BIGINT AS l2_rows, min(l2_lo) AS l2_lo
       FROM (${parts.join(' UNION ALL ')}) x(tok, trades, books, lo, hi, l2_rows, l2_lo)
       WHERE tok IS NOT NULL GROUP BY tok`
      : `SELECT NULL::VARCHAR AS tok, 0::BIGINT AS trades, 0::BIGINT AS books, NULL::TIMESTAMP AS lo, NULL::TIMESTAMP AS hi,
              0::BIGINT AS l2_rows, NULL::TIMESTAMP AS l2_lo WHERE false`;
  await conn.run(`CREATE OR REPLACE TEMP TABLE _cat_token_stats AS ${stats}`);
  await writeIfChanged(conn, `SELECT tok AS token_id, trades, books, lo, hi, l2_rows, l2_lo FROM _cat_token_stats ORDER BY tok`, lake, 'token_stats');
}

/** Series: records merged by priority; crypto Up/Down slugs fill asset, symbol and timeframe. */
async function mergeSeries(conn: DuckDBConnection): Promise<void> {
  await conn.run(
    `CREATE OR REPLACE TEMP TABLE _cat_series_records AS
     SELECT * EXCLUDE (_src, _fp) FROM (
       SELECT s.*, 0 AS _src, md5(s::VARCHAR) AS _fp FROM _cat_stored_series s
       UNION ALL SELECT r.*, 1, md5(r::VARCHAR) FROM stg_series_records r WHERE series_id IS NOT NULL)
     QUALIFY row_number() OVER (PARTITION BY source, series_id ORDER BY record_ts DESC NULLS LAST, _src DESC, _fp) = 1`,
  );
  const fields = SERIES_FIELDS.filter((f) => f !== 'series_id');
  // Recurring crypto series are named '<asset>-up-or-down-<timeframe>' (e.g. btc-up-or-down-5m).
  const re = `'^([a-z]+)-up-or-down-([0-9]+[mhd]|hourly|daily|weekly)$'`;
  await conn.run(
    `CREATE OR REPLACE TEMP TABLE _cat_series_out AS
     WITH merged AS (
       SELECT series_id, ${fields.map((f) => `${pick(f)} AS ${sqlIdent(f)}`).join(', ')}
       FROM _cat_series_records GROUP BY series_id
       UNION ALL
       -- A market may name a series no record describes (slug only): list it so the id resolves.
       SELECT DISTINCT series_id, series_id, ${fields
         .slice(1)
         .map(() => 'NULL')
         .join(', ')}
       FROM _cat_markets WHERE series_id IS NOT NULL
         AND series_id NOT IN (SELECT series_id FROM _cat_series_records)),
     m AS (SELECT *, regexp_extract(series_id, ${re}, 1) AS c_sym, regexp_extract(series_id, ${re}, 2) AS c_tf,
                  -- Crypto series name their asset first (btc-…, bitcoin-above-…, eth-weeklies).
                  CASE split_part(series_id, '-', 1)
                    WHEN 'btc' THEN 'BTC' WHEN 'bitcoin' THEN 'BTC' WHEN 'eth' THEN 'ETH' WHEN 'ethereum' THEN 'ETH'
                    WHEN 'sol' THEN 'SOL' WHEN 'solana' THEN 'SOL' WHEN 'xrp' THEN 'XRP'
                    WHEN 'doge' THEN 'DOGE' WHEN 'dogecoin' THEN 'DOGE' END AS known_sym
           FROM merged),
     mk AS (SELECT series_id, mode(category) AS market_cat FROM _cat_markets WHERE category IS NOT NULL GROUP BY series_id),
     k AS (SELECT m.*, coalesce(category, market_cat, CASE WHEN c_sym <> '' THEN 'crypto' END) AS cat,
                  CASE WHEN c_sym <> '' OR coalesce(category, market_cat, '') = 'crypto' THEN coalesce(known_sym, nullif(upper(c_sym), '')) END AS sym
           FROM m LEFT JOIN mk USING (series_id))
     SELECT series_id, coalesce(slug, series_id) AS slug, coalesce(name, series_id) AS name, description,
            cat AS category,
            coalesce(asset_class, CASE WHEN sym IS NOT NULL THEN 'crypto' END, cat) AS asset_class,
            coalesce(asset, CASE sym WHEN 'BTC' THEN 'Bitcoin' WHEN 'ETH' THEN 'Ethereum' WHEN 'SOL' THEN 'Solana'
                                     WHEN 'XRP' THEN 'XRP' WHEN 'DOGE' THEN 'Dogecoin' ELSE sym END, name) AS asset,
            coalesce(asset_symbol, sym) AS asset_symbol,
            coalesce(timeframe, nullif(c_tf, ''), recurrence) AS timeframe,
            coalesce(recurrence, nullif(c_tf, '')) AS recurrence
     FROM k`,
  );
}

/**
 * Writes the query as the set's new file unless the set already holds exactly these rows, so a batch that
 * changes nothing leaves the catalogue as it was. Returns the row count.
 */
async function writeIfChanged(conn: DuckDBConnection, selectSql: string, lake: VersionDraft, name: SetName): Promise<number> {
  await conn.run(`CREATE OR REPLACE TEMP TABLE _cat_write AS ${selectSql}`);
  const total = Number((await conn.runAndReadAll('SELECT count(*) AS n FROM _cat_write')).getRowObjectsJS()[0]!.n);
  const old = lake.files(name);
  if (old.length > 0) {
    const diff = await conn.runAndReadAll(
      `SELECT (SELECT count(*) FROM read_parquet(${parquetList(old)})) AS old_n,
              (SELECT count(*) FROM (SELECT * FROM _cat_write EXCEPT ALL SELECT * FROM read_parquet(${parquetList(old)}))) AS changed`,
    );
    const r = diff.getRowObjectsJS()[0]!;
    if (Number(r.old_n) === total && Number(r.changed) === 0) return total;
  }
  const file = lake.newFile(name, null);
  await writeParquetFile(conn, 'SELECT * FROM _cat_write', file);
  lake.replaceSingle(name, file, total);
  return total;
}
