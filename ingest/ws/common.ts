import type { DuckDBConnection } from '@duckdb/node-api';
import type { BatchContext } from '../types.js';
import { identifierMacros, PREVIEW_CHARS, refusedValue } from '../identifiers.js';
import { runSqlFile } from '../sql-file.js';

// The tape's handlers (and the archive's) read the SQL files through here.
export { runSqlFile, sqlStatements } from '../sql-file.js';

async function scalar(conn: DuckDBConnection, sql: string): Promise<number> {
  const rows = (await conn.runAndReadAll(sql)).getRows();
  const v = rows[0]?.[0];
  return v === null || v === undefined ? 0 : Number(v);
}

export function bump(ctx: BatchContext, key: string, n: number): void {
  if (n) ctx.counts[key] = (ctx.counts[key] ?? 0) + n;
}

const KNOWN = ['book', 'price_change', 'last_trade_price', 'tick_size_change', 'best_bid_ask'];

/**
 * Runs the common tail (ws_stage.sql) over _ws_el/_ws_fr/_ws_m, then counts what was read and reports what was not.
 * `where(el)` names a frame's position for messages ("line 12" for JSONL, "frame 3" for arrays). `alsoKnown`: event
 * types a format expects beyond the tape's (kept in raw, counted by name rather than as unknown).
 */
/** Where the previous chunk of a file ended: its last receive ms and the next k within that ms. */
export type Carry = { recvMs: number | null; nextK: number };
export const NO_CARRY: Carry = { recvMs: null, nextK: 0 };

/**
 * A batch context whose orchestrator may flush between chunks of one big file (ingest/run.ts), chunks of about
 * `tapeChunkBytes` (its memory budget's, ingest/memory.ts).
 */
export type TapeBatchContext = BatchContext & { maybeFlush?: () => Promise<void>; tapeChunkBytes?: number };

export async function finishTape(
  ctx: BatchContext,
  file: string,
  where: (el: number) => { line?: number; at: string },
  carry: Carry = NO_CARRY,
  alsoKnown: readonly string[] = [],
): Promise<Carry> {
  const { conn } = ctx;
  await conn.run(`CREATE OR REPLACE TEMP TABLE _ws_carry AS SELECT $r::BIGINT AS recv_ms, $k::BIGINT AS next_k`, {
    r: carry.recvMs,
    k: carry.nextK,
  });
  const l2Before = await scalar(conn, 'SELECT count(*) FROM stg_l2');
  await identifierMacros(conn);
  await runSqlFile(conn, 'ws_ids.sql');
  await runSqlFile(conn, 'ws_stage.sql');
  const l2Added = (await scalar(conn, 'SELECT count(*) FROM stg_l2')) - l2Before;
  // One pass over the messages for every count and check below (each was a scan of its own).
  const lastTradeBad = `m.event_type = 'last_trade_price' AND (m.asset_id IS NULL
       OR TRY_CAST(m.price AS DECIMAL(10,6)) IS NULL OR TRY_CAST(m.size AS DECIMAL(18,6)) IS NULL)`;
  const types = (
    await conn.runAndReadAll(
      `SELECT coalesce(m.event_type, '(none)') AS t, count(*) AS n,
              coalesce(sum(CASE WHEN NOT timed THEN 0
                                WHEN m.event_type = 'book' THEN greatest(coalesce(len(m.bids), 0) + coalesce(len(m.asks), 0), 1)
                                WHEN m.event_type <> 'price_change' THEN 0
                                WHEN coalesce(len(m.price_changes), 0) > 0 THEN len(m.price_changes)
                                ELSE coalesce(len(m.changes), 0) END), 0) AS levels,
              count(*) FILTER (WHERE m.jt IS DISTINCT FROM 'OBJECT') AS not_obj, min(m.el) FILTER (WHERE m.jt IS DISTINCT FROM 'OBJECT') AS not_obj_el,
              count(*) FILTER (WHERE ${lastTradeBad}) AS bad_lt, min(m.el) FILTER (WHERE ${lastTradeBad}) AS bad_lt_el
       FROM (SELECT *, el IN (SELECT el FROM _ws_recv WHERE recv_ms IS NOT NULL) AS timed FROM _ws_m) m GROUP BY 1`,
    )
  ).getRowObjectsJS();
  const total = (k: 'levels' | 'not_obj' | 'bad_lt'): number => types.reduce((a, r) => a + Number(r[k] ?? 0), 0);
  const firstEl = (k: 'not_obj_el' | 'bad_lt_el'): number => Math.min(...types.map((r) => (r[k] === null ? Infinity : Number(r[k]))));
  const levelsSent = total('levels');
  bump(ctx, 'frames', await scalar(conn, 'SELECT count(*) FROM _ws_el'));
  bump(
    ctx,
    'messages',
    types.reduce((a, r) => a + Number(r.n), 0),
  );
  for (const r of types) {
    const type = String(r.t);
    if (KNOWN.includes(type) || alsoKnown.includes(type)) bump(ctx, `msg_${type}`, Number(r.n));
    else bump(ctx, 'unknown_event_types', Number(r.n));
  }
  bump(ctx, 'level_updates', l2Added);

  const noTime = await scalar(conn, 'SELECT count(*) FROM _ws_recv WHERE recv_ms IS NULL');
  if (noTime > 0) {
    ctx.issues.push({ file, message: `${noTime} frame(s) carry no timestamp at all; skipped`, count: noTime });
    bump(ctx, 'frames_without_time', noTime);
  }
  const report = (n: number, el: number, what: string, counter: string): void => {
    if (n === 0) return;
    bump(ctx, counter, n);
    const w = where(el);
    ctx.issues.push({ file, ...(w.line !== undefined ? { line: w.line } : {}), message: `${n} ${what}; first at ${w.at}`, count: n });
  };
  report(total('not_obj'), firstEl('not_obj_el'), 'message(s) that are not JSON objects, skipped', 'malformed_messages');
  if (levelsSent > l2Added) {
    const r = (await conn.runAndReadAll(`SELECT count(*), min(el) FROM _ws_lv WHERE bad AND NOT refused`)).getRows()[0];
    report(Number(r?.[0] ?? 0), Number(r?.[1]), 'level update(s) with a missing token, bad side or unparsable price/size, skipped', 'bad_level_updates');
  }
  report(total('bad_lt'), firstEl('bad_lt_el'), 'last_trade_price message(s) without token, price or size, skipped', 'bad_last_trades');
  await reportRefused(conn, report);
  const last = (
    await conn.runAndReadAll(`SELECT recv_ms, seq0 + n - recv_ms * 1000000 FROM _ws_recv WHERE recv_ms IS NOT NULL ORDER BY el DESC LIMIT 1`)
  ).getRows()[0];
  const next: Carry = last ? { recvMs: Number(last[0]), nextK: Number(last[1]) } : carry;
  await conn.run('DROP VIEW IF EXISTS _ws_lv');
  for (const t of ['_ws_el', '_ws_fr', '_ws_m', '_ws_b', '_ws_recv', '_ws_carry', '_ws_refused']) await conn.run(`DROP TABLE IF EXISTS ${t}`);
  return next;
}

/** How each kind of value ws_ids.sql refuses is told in an issue (lake/README.md, "What the ingest accepts"). */
const REFUSED: Record<string, string> = {
  token: 'a token id that is not a uint256 in decimal',
  condition: 'a condition id that is not 0x and 64 hex digits',
  event_type: 'an event type over 256 bytes',
  text: 'a hash, side or transaction hash over 256 bytes',
};

/** Refused values named one by one per chunk; beyond that, one more issue counts the rest. */
const REFUSED_NAMED = 20;

/**
 * One issue per value ws_ids.sql refused (_ws_refused) in the order the chunk first names them: the value (its head
 * and size: it may be megabytes), how many messages and price_change entries name it and the first that does.
 */
async function reportRefused(conn: DuckDBConnection, report: (n: number, el: number, what: string, counter: string) => void): Promise<void> {
  const rows = (
    await conn.runAndReadAll(
      `SELECT kind, n, el, left(id, $chars) AS head, strlen(id) AS bytes, count(*) OVER () AS total,
              sum(n) OVER (ORDER BY el, kind, id ROWS BETWEEN CURRENT ROW AND UNBOUNDED FOLLOWING) AS n_rest
       FROM _ws_refused ORDER BY el, kind, id LIMIT $named + 1`,
      { chars: PREVIEW_CHARS, named: REFUSED_NAMED },
    )
  ).getRowObjectsJS();
  const tail = 'not derived; their frames stay in raw';
  for (const [i, r] of rows.entries()) {
    if (i === REFUSED_NAMED) {
      const more = Number(r.total) - REFUSED_NAMED;
      report(Number(r.n_rest), Number(r.el), `message(s) or price_change entries naming ${more} more refused value(s), ${tail}`, 'refused_identifiers');
      break;
    }
    const value = r.head === null ? '' : ` (${refusedValue(r.head, r.bytes)})`;
    report(Number(r.n), Number(r.el), `message(s) or price_change entries naming ${REFUSED[String(r.kind)]}${value}, ${tail}`, 'refused_identifiers');
  }
}
