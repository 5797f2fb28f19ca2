import type { DuckDBConnection } from '@duckdb/node-api';
import type { BatchContext } from '../types.js';
import { bump, sqlStatements } from '../ws/common.js';
import { readSchema, sourceMacros } from './columns.js';
import { identifierMacros, PREVIEW_CHARS, refusedValue } from '../identifiers.js';

const KNOWN = ['book', 'price_change', 'last_trade_price', 'tick_size_change'];

/**
 * Rows per piece: a file is staged in pieces of whole markets of about this many rows, so the staging SQL's
 * intermediate tables (the rows read, their message ranks) hold one piece, not the hour. Message ranks are
 * local to a market: the pieces stage the same rows as the file whole. The batch is not written between pieces:
 * a batch of some markets only would look, to the tape's silence checks (ingest/integrity/gaps.ts), like a
 * capture that lost the others.
 */
export function pieceRows(): number {
  return Number(process.env.PMLAKE_ARCHIVE_PIECE_ROWS ?? 2_000_000);
}

type Piece = { lo: string; hi: string; rows: number };

async function dropPieceTables(conn: DuckDBConnection): Promise<void> {
  await conn.run('DROP VIEW IF EXISTS _ar_m');
  for (const t of ['_ar_r', '_ar_k', '_ar_bk']) await conn.run(`DROP TABLE IF EXISTS ${t}`);
}

const FILE_TABLES = ['_ar_census', '_ar_bad_tokens', '_ar_bad_markets'];

async function rows(conn: DuckDBConnection, sql: string, params?: Record<string, string | number>): Promise<Record<string, unknown>[]> {
  return (await conn.runAndReadAll(sql, params)).getRowObjectsJS();
}

type TypeCount = { n: number; untimed: number; untimedRn: number; firstRn: number };
/**
 * One scan of the file's cheap columns: rows per market (for the pieces) and per event type (for the report), and
 * the token and market ids the ingest refuses (identifiers.sql), each distinct value checked once: a file names a
 * few thousand of them in millions of rows. archive_stage.sql stages no row naming one (raw's messages are rebuilt
 * from the rows, so these land nowhere); `refused` lists them for the report.
 */
type Refused = { kind: string; head: string; bytes: number; n: number; rn: number };
type Census = { markets: { m: string; n: number }[]; types: Map<string, TypeCount>; refused: Refused[] };

async function census(conn: DuckDBConnection, file: string): Promise<Census> {
  await identifierMacros(conn);
  await conn.run(
    `CREATE OR REPLACE TEMP TABLE _ar_census AS
     SELECT market_n, coalesce(event_type, '(none)') AS t, asset_id, count(*) AS n,
            count(*) FILTER (WHERE recv_ms IS NULL OR market_n IS NULL) AS untimed,
            min(rn) FILTER (WHERE recv_ms IS NULL OR market_n IS NULL) AS untimed_rn, min(rn) AS first_rn
     FROM _ar_all($f) GROUP BY ALL`,
    { f: file },
  );
  // Kept in the file's own types: the staging filters compare them as read.
  await conn.run(`CREATE OR REPLACE TEMP TABLE _ar_bad_tokens AS
    SELECT asset_id, sum(n) AS n, min(first_rn) AS rn FROM _ar_census WHERE pm_bad_token(asset_id) GROUP BY asset_id`);
  await conn.run(`CREATE OR REPLACE TEMP TABLE _ar_bad_markets AS
    SELECT market_n, sum(n) AS n, min(first_rn) AS rn FROM _ar_census WHERE pm_bad_condition(CAST(market_n AS VARCHAR)) GROUP BY market_n`);
  const refused = (
    await rows(
      conn,
      `SELECT 'token' AS kind, left(asset_id, $chars) AS head, strlen(asset_id) AS bytes, n, rn FROM _ar_bad_tokens
       UNION ALL
       SELECT 'condition', left(CAST(market_n AS VARCHAR), $chars), strlen(CAST(market_n AS VARCHAR)), n, rn FROM _ar_bad_markets
       ORDER BY rn`,
      { chars: PREVIEW_CHARS },
    )
  ).map((r) => ({ kind: String(r.kind), head: String(r.head), bytes: Number(r.bytes), n: Number(r.n), rn: Number(r.rn) }));
  // An unknown event type is named in the report: as a name, bounded.
  const groups = await rows(
    conn,
    `SELECT CAST(market_n AS VARCHAR) AS m, CASE WHEN pm_long_name(t) THEN left(t, $chars) || '…' ELSE t END AS t,
            sum(n) AS n, sum(untimed) AS untimed, min(untimed_rn) AS untimed_rn, min(first_rn) AS first_rn
     FROM _ar_census GROUP BY market_n, t
     ORDER BY market_n NULLS LAST`,
    { chars: PREVIEW_CHARS },
  );
  const markets: { m: string; n: number }[] = [];
  const types = new Map<string, TypeCount>();
  for (const g of groups) {
    const n = Number(g.n);
    if (g.m !== null) {
      const last = markets.at(-1);
      if (last && last.m === String(g.m)) last.n += n;
      else markets.push({ m: String(g.m), n });
    }
    const t = types.get(String(g.t)) ?? { n: 0, untimed: 0, untimedRn: Infinity, firstRn: Infinity };
    t.n += n;
    t.untimed += Number(g.untimed);
    if (g.untimed_rn !== null) t.untimedRn = Math.min(t.untimedRn, Number(g.untimed_rn));
    t.firstRn = Math.min(t.firstRn, Number(g.first_rn));
    types.set(String(g.t), t);
  }
  return { markets, types, refused };
}

/** Consecutive markets (in the file's order) grouped into pieces of about `size` rows. */
function pieces(markets: Census['markets'], size: number): Piece[] {
  const out: Piece[] = [];
  for (const { m, n } of markets) {
    const last = out.at(-1);
    if (last && last.rows + n <= size) {
      last.hi = m;
      last.rows += n;
    } else out.push({ lo: m, hi: m, rows: n });
  }
  return out;
}

/** What the pieces could not stage, summed over them: count and first file row of each kind. */
type Tally = Record<string, { n: number; first: number }>;

async function stagePiece(conn: DuckDBConnection, file: string, p: Piece, tally: Tally): Promise<number> {
  const profile = process.env.PMLAKE_PROFILE === '1';
  const params = { f: file, lo: p.lo, hi: p.hi };
  // No step relies on the order of rows (ranks are joined on the file row; staged rows are keyed), so DuckDB
  // need not keep it, which lets it stage in parallel without ordering the output.
  await conn.run('SET preserve_insertion_order = false');
  try {
    for (const sql of sqlStatements('archive_stage.sql')) {
      const t = performance.now();
      // Only statements that read the file take its parameters.
      await (sql.includes('$f') ? conn.run(sql, params) : conn.run(sql));
      if (profile) process.stderr.write(`[profile] archive_stage.sql ${(performance.now() - t).toFixed(0)} ms: ${sql.slice(0, 60).replace(/\s+/g, ' ')}\n`);
    }
  } finally {
    await conn.run('SET preserve_insertion_order = true');
  }
  const badPc = `et_rank = 2 AND (asset_id IS NULL OR price IS NULL OR size IS NULL OR side IS NULL OR upper(side) NOT IN ('BUY', 'SELL'))`;
  const badLt = `et_rank = 0 AND (asset_id IS NULL OR price IS NULL OR size IS NULL)`;
  const m = (
    await rows(
      conn,
      // price_change messages: a market's distinct ranks within a receive ms (the market by the ranks' own hash).
      `SELECT (SELECT count(*) FROM (SELECT DISTINCT mh, k_recv_ms, k FROM _ar_k WHERE k_pc)) AS pc_msgs,
              count(*) FILTER (WHERE ${badPc}) AS bad_pc, min(rn) FILTER (WHERE ${badPc}) AS bad_pc_rn,
              count(*) FILTER (WHERE ${badLt}) AS bad_lt, min(rn) FILTER (WHERE ${badLt}) AS bad_lt_rn,
              (SELECT count(*) FROM _ar_bk WHERE bad) AS bad_bk, (SELECT min(rn) FROM _ar_bk WHERE bad) AS bad_bk_rn
       FROM _ar_r`,
    )
  )[0]!;
  const add = (key: string, n: unknown, first: unknown): void => {
    if (!Number(n)) return;
    const t = (tally[key] ??= { n: 0, first: Infinity });
    t.n += Number(n);
    t.first = Math.min(t.first, Number(first));
  };
  add('bad_pc', m.bad_pc, m.bad_pc_rn);
  add('bad_lt', m.bad_lt, m.bad_lt_rn);
  add('bad_bk', m.bad_bk, m.bad_bk_rn);
  await dropPieceTables(conn);
  return Number(m.pc_msgs);
}

/**
 * Stages one archive file (sql/ingest/archive_stage.sql) piece by piece, then counts what it read and reports,
 * with the file row (0-based, as Parquet readers number them) of the first, what it could not stage.
 */
export async function stageArchive(ctx: BatchContext, file: string): Promise<void> {
  const { conn } = ctx;
  const schema = await readSchema(conn, file);
  if (schema.missingRequired.length > 0) {
    throw new Error(`not an archive v2 file: column(s) ${schema.missingRequired.join(', ')} missing`);
  }
  if (schema.missingOptional.length > 0) {
    ctx.issues.push({ file, message: `archive column(s) ${schema.missingOptional.join(', ')} missing: read as NULL` });
    bump(ctx, 'archive_missing_columns', schema.missingOptional.length);
  }
  for (const sql of sourceMacros(schema)) await conn.run(sql);
  const tally: Tally = {};
  try {
    const counted = await census(conn, file);
    // Market ids as plain text (no byte that CAST would escape): read them without CAST's escaping.
    if (counted.markets.every(({ m }) => !m.includes('\\'))) for (const sql of sourceMacros(schema, true)) await conn.run(sql);
    const parts = pieces(counted.markets, pieceRows());
    for (const p of parts) {
      const before = Number((await rows(conn, 'SELECT count(*) AS n FROM stg_l2'))[0]?.n ?? 0);
      bump(ctx, 'msg_price_change', await stagePiece(conn, file, p, tally));
      bump(ctx, 'level_updates', Number((await rows(conn, 'SELECT count(*) AS n FROM stg_l2'))[0]?.n ?? 0) - before);
      if (parts.length > 1) bump(ctx, 'archive_pieces', 1);
    }
    report(ctx, file, counted.types, tally);
    reportRefused(ctx, file, counted.refused);
  } finally {
    await dropPieceTables(conn);
    for (const t of FILE_TABLES) await conn.run(`DROP TABLE IF EXISTS ${t}`);
    await conn.run('DROP MACRO TABLE IF EXISTS _ar_src');
    await conn.run('DROP MACRO TABLE IF EXISTS _ar_all');
  }
}

function report(ctx: BatchContext, file: string, types: Map<string, TypeCount>, tally: Tally): void {
  const issue = (n: number, first: unknown, what: string, counter: string): void => {
    if (!n) return;
    bump(ctx, counter, n);
    ctx.issues.push({ file, message: `${n} ${what}; first at file row ${String(first)}`, count: n });
  };
  // Every row of the file by type, and the rows the pieces left out (they read only known, timed rows).
  let untimed = 0;
  let untimedRn = Infinity;
  for (const [type, r] of types) {
    bump(ctx, 'archive_rows', r.n);
    if (KNOWN.includes(type)) {
      if (type !== 'price_change') bump(ctx, `msg_${type}`, r.n - r.untimed);
      untimed += r.untimed;
      untimedRn = Math.min(untimedRn, r.untimedRn);
    } else issue(r.n, r.firstRn, `row(s) of unknown event_type "${type}", skipped`, 'unknown_event_types');
  }
  issue(untimed, untimedRn, 'row(s) without timestamp_received or market, skipped', 'archive_rows_untimed');
  const t = (k: string): { n: number; first: number } => tally[k] ?? { n: 0, first: 0 };
  issue(t('bad_pc').n, t('bad_pc').first, 'price_change row(s) with a missing token, bad side or missing price/size, skipped', 'bad_level_updates');
  issue(t('bad_lt').n, t('bad_lt').first, 'last_trade_price row(s) without token, price or size, skipped', 'bad_last_trades');
  issue(
    t('bad_bk').n,
    t('bad_bk').first,
    'book row(s) whose bids/asks are not a JSON list of [price, size] pairs (or lack a token), skipped whole',
    'bad_books',
  );
}

/** Refused values named one by one per file; beyond that, one more issue counts the rest. */
const REFUSED_NAMED = 20;
const REFUSED_WHAT: Record<string, string> = {
  token: 'a token id that is not a uint256 in decimal',
  condition: 'a market that is not a condition id (0x and 64 hex digits)',
};

/** One issue per refused value, with the file row of its first row (0-based, as Parquet readers number them). */
function reportRefused(ctx: BatchContext, file: string, refused: Refused[]): void {
  for (const r of refused.slice(0, REFUSED_NAMED)) {
    bump(ctx, 'refused_identifiers', r.n);
    ctx.issues.push({
      file,
      message: `${r.n} row(s) naming ${REFUSED_WHAT[r.kind]!} (${refusedValue(r.head, r.bytes)}), skipped; first at file row ${r.rn}`,
      count: r.n,
    });
  }
  const rest = refused.slice(REFUSED_NAMED);
  if (rest.length === 0) return;
  const n = rest.reduce((a, r) => a + r.n, 0);
  bump(ctx, 'refused_identifiers', n);
  ctx.issues.push({
    file,
    message: `${n} row(s) naming ${rest.length} more refused token or market id(s), skipped; first at file row ${Math.min(...rest.map((r) => r.rn))}`,
    count: n,
  });
}
