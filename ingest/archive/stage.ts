import type { DuckDBConnection } from '@duckdb/node-api';
import type { BatchContext } from '../types.js';
import { bump, sqlStatements } from '../ws/common.js';
import { readSchema, sourceMacro } from './columns.js';

const KNOWN = ['book', 'price_change', 'last_trade_price', 'tick_size_change'];

async function run(conn: DuckDBConnection, sql: string, file: string): Promise<void> {
  const profile = process.env.PMLAKE_PROFILE === '1';
  const t = performance.now();
  // Only statements that read the file take it as a parameter.
  await (sql.includes('$f') ? conn.run(sql, { f: file }) : conn.run(sql));
  if (profile) process.stderr.write(`[profile] archive_stage.sql ${(performance.now() - t).toFixed(0)} ms: ${sql.slice(0, 60).replace(/\s+/g, ' ')}\n`);
}

async function rows(conn: DuckDBConnection, sql: string): Promise<Record<string, unknown>[]> {
  return (await conn.runAndReadAll(sql)).getRowObjectsJS();
}

/**
 * Stages one archive file (sql/ingest/archive_stage.sql), then counts what it read and reports, with the
 * file row (0-based, as Parquet readers number them) of the first, what it could not stage.
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
  await conn.run(sourceMacro(schema));
  const l2Before = Number((await rows(conn, 'SELECT count(*) AS n FROM stg_l2'))[0]?.n ?? 0);
  try {
    for (const s of sqlStatements('archive_stage.sql')) await run(conn, s, file);
    // The positional join of the ranks with the rows relies on both being in file order; never stage a mismatch.
    const off = Number((await rows(conn, 'SELECT count(*) AS n FROM _ar_m WHERE rn <> k_rn'))[0]?.n ?? 0);
    if (off > 0) throw new Error(`internal: ${off} archive row(s) out of step with their message ranks`);
    await report(ctx, file, l2Before);
  } finally {
    for (const t of ['_ar_k', '_ar_m', '_ar_bk']) await conn.run(`DROP TABLE IF EXISTS ${t}`);
    await conn.run('DROP MACRO TABLE IF EXISTS _ar_src');
  }
}

async function report(ctx: BatchContext, file: string, l2Before: number): Promise<void> {
  const { conn } = ctx;
  const issue = (n: number, first: unknown, what: string, counter: string): void => {
    if (!n) return;
    bump(ctx, counter, n);
    ctx.issues.push({ file, message: `${n} ${what}; first at file row ${String(first)}`, count: n });
  };
  // Every row of the file by type, and the rows the staging SQL left out (it reads only known, timed rows).
  const all = await conn.runAndReadAll(
    `SELECT coalesce(event_type, '(none)') AS t, count(*) AS n,
            count(*) FILTER (WHERE recv_ms IS NULL OR market IS NULL) AS untimed, min(rn) FILTER (WHERE recv_ms IS NULL OR market IS NULL) AS untimed_rn,
            min(rn) AS first_rn
     FROM _ar_src($f) GROUP BY 1`,
    { f: file },
  );
  let untimed = 0;
  let untimedRn = Infinity;
  for (const r of all.getRowObjectsJS()) {
    const type = String(r.t);
    const n = Number(r.n);
    bump(ctx, 'archive_rows', n);
    if (KNOWN.includes(type)) {
      bump(ctx, `msg_${type}`, type === 'price_change' ? 0 : n - Number(r.untimed));
      untimed += Number(r.untimed);
      if (r.untimed_rn !== null) untimedRn = Math.min(untimedRn, Number(r.untimed_rn));
    } else issue(n, r.first_rn, `row(s) of unknown event_type "${type}", skipped`, 'unknown_event_types');
  }
  issue(untimed, untimedRn, 'row(s) without timestamp_received or market, skipped', 'archive_rows_untimed');
  const m = (
    await rows(
      conn,
      `SELECT count(DISTINCT (market, recv_ms, k)) FILTER (WHERE et_rank = 2) AS pc_msgs,
              count(*) FILTER (WHERE et_rank = 2 AND (asset_id IS NULL OR price IS NULL OR size IS NULL OR upper(side) NOT IN ('BUY', 'SELL') OR side IS NULL)) AS bad_pc,
              min(rn) FILTER (WHERE et_rank = 2 AND (asset_id IS NULL OR price IS NULL OR size IS NULL OR upper(side) NOT IN ('BUY', 'SELL') OR side IS NULL)) AS bad_pc_rn,
              count(*) FILTER (WHERE et_rank = 0 AND (asset_id IS NULL OR price IS NULL OR size IS NULL)) AS bad_lt,
              min(rn) FILTER (WHERE et_rank = 0 AND (asset_id IS NULL OR price IS NULL OR size IS NULL)) AS bad_lt_rn
       FROM _ar_m`,
    )
  )[0]!;
  bump(ctx, 'msg_price_change', Number(m.pc_msgs));
  issue(Number(m.bad_pc), m.bad_pc_rn, 'price_change row(s) with a missing token, bad side or missing price/size, skipped', 'bad_level_updates');
  issue(Number(m.bad_lt), m.bad_lt_rn, 'last_trade_price row(s) without token, price or size, skipped', 'bad_last_trades');
  const b = (await rows(conn, `SELECT count(*) FILTER (WHERE bad) AS n, min(rn) FILTER (WHERE bad) AS rn FROM _ar_bk`))[0]!;
  issue(Number(b.n), b.rn, 'book row(s) whose bids/asks are not a JSON list of [price, size] pairs (or lack a token), skipped whole', 'bad_books');
  const l2 = Number((await rows(conn, 'SELECT count(*) AS n FROM stg_l2'))[0]?.n ?? 0);
  bump(ctx, 'level_updates', l2 - l2Before);
}
