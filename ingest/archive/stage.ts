import type { DuckDBConnection } from '@duckdb/node-api';
import type { BatchContext } from '../types.js';
import { bump, sqlStatements } from '../ws/common.js';
import { readSchema, sourceMacros } from './columns.js';

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

async function rows(conn: DuckDBConnection, sql: string, params?: Record<string, string>): Promise<Record<string, unknown>[]> {
  return (await conn.runAndReadAll(sql, params)).getRowObjectsJS();
}

type TypeCount = { n: number; untimed: number; untimedRn: number; firstRn: number };
/** One scan of the file's cheap columns: rows per market (for the pieces) and per event type (for the report). */
type Census = { markets: { m: string; n: number }[]; types: Map<string, TypeCount> };

async function census(conn: DuckDBConnection, file: string): Promise<Census> {
  const groups = await rows(
    conn,
    `SELECT CAST(market_n AS VARCHAR) AS m, t, n, untimed, untimed_rn, first_rn FROM (
       SELECT market_n, coalesce(event_type, '(none)') AS t, count(*) AS n,
              count(*) FILTER (WHERE recv_ms IS NULL OR market_n IS NULL) AS untimed,
              min(rn) FILTER (WHERE recv_ms IS NULL OR market_n IS NULL) AS untimed_rn, min(rn) AS first_rn
       FROM _ar_all($f) GROUP BY ALL)
     ORDER BY market_n NULLS LAST`,
    { f: file },
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
  return { markets, types };
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
  } finally {
    await dropPieceTables(conn);
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
