import { DuckDBListValue, type DuckDBConnection } from '@duckdb/node-api';
import type { VersionDraft } from '../versions.js';
import { IntegrityTracker, type TokenSeed } from './tracker.js';
import { dropGapTemps, writeGapState } from './gap-state.js';

/**
 * SQL around the integrity tracker (ingest/integrity/tracker.ts): what it needs from the lake before the replay
 * (each token's open stretch), and its output read back into staging — checkpoints, incidents (with the
 * frame-level ones ws_stage.sql found: duplicate, recv_backwards), l2.after_gap, and the stored
 * book_snapshots / top_of_book rows of a stretch this batch verified (rewritten with verified = true; both data
 * sets are onConflict 'replace'). Every statement is fixed text; file names and values are bound.
 */

/** Staging columns and tables ws_stage.sql adds; created here too for batches staged by other paths (tests). */
export async function ensureIntegrityStaging(conn: DuckDBConnection): Promise<void> {
  for (const c of ['chk_bid', 'chk_ask', 'chk_tick']) await conn.run(`ALTER TABLE stg_l2 ADD COLUMN IF NOT EXISTS ${c} DECIMAL(10,6)`);
  await conn.run(
    `CREATE TEMP TABLE IF NOT EXISTS stg_tape_flags (kind VARCHAR, asset_id VARCHAR, condition_id VARCHAR, recv_ms BIGINT, seq BIGINT, detail VARCHAR)`,
  );
}

/**
 * Per touched token (`_bk_touch.tok`): where its current stretch began (the last stored `book`, else its first
 * stored l2 row), whether stored rows wait in it, and whether a stored top_mismatch/crossed breaks it.
 * Needs _bk_known and _bk_seedkey (ingest/books.ts prepareSeeds).
 */
export async function loadSeeds(conn: DuckDBConnection, lake: VersionDraft): Promise<Map<number, TokenSeed>> {
  const incidents = lake.files('incidents');
  const rows = (
    await conn.runAndReadAll(
      `SELECT t.tok, k.book_seq // 1000000 AS book_ms, epoch_ms(kn.l2_lo) AS first_ms,
              kn.books > 0 OR kn.l2_rows > 0 AS open, k.book_seq
       FROM _bk_touch t JOIN _bk_known kn USING (asset_id) LEFT JOIN _bk_seedkey k USING (asset_id)
       WHERE kn.books > 0 OR kn.l2_rows > 0`,
    )
  ).getRowObjectsJS();
  await conn.run(`CREATE OR REPLACE TEMP TABLE _int_open AS
    SELECT t.tok, t.asset_id, k.book_seq, t.min_seq FROM _bk_touch t JOIN _bk_known kn USING (asset_id) LEFT JOIN _bk_seedkey k USING (asset_id)
    WHERE kn.books > 0 OR kn.l2_rows > 0`);
  const broken = new Set<number>();
  if (incidents.length > 0 && rows.length > 0) {
    const b = await conn.runAndReadAll(
      `SELECT DISTINCT o.tok FROM read_parquet($f::VARCHAR[], hive_partitioning = false) i JOIN _int_open o USING (asset_id)
       WHERE i.kind IN ('top_mismatch', 'crossed') AND i.seq > coalesce(o.book_seq, -1) AND i.seq < o.min_seq`,
      { f: new DuckDBListValue(incidents) },
    );
    for (const [tok] of b.getRows()) broken.add(Number(tok));
  }
  const seeds = new Map<number, TokenSeed>();
  for (const r of rows) {
    const since = r.book_ms !== null ? Number(r.book_ms) : r.first_ms !== null ? Number(r.first_ms) : Number.NaN;
    seeds.set(Number(r.tok), { sinceMs: since, open: Boolean(r.open), broken: broken.has(Number(r.tok)) });
  }
  return seeds;
}

/** Per touched token (`_bk_touch.tok`): its capture outages, staged in this batch or stored (receive ms from, to). */
export async function loadOutages(conn: DuckDBConnection, lake: VersionDraft): Promise<Map<number, [number, number][]>> {
  const files = lake.files('incidents');
  const stored = files.length
    ? `UNION ALL SELECT asset_id, from_ts, to_ts FROM read_parquet($f::VARCHAR[], hive_partitioning = false)
       WHERE kind = 'capture_disconnect' AND asset_id IN (SELECT asset_id FROM _bk_touch)`
    : '';
  const rows = (
    await conn.runAndReadAll(
      `SELECT t.tok, epoch_ms(i.from_ts), epoch_ms(i.to_ts)
       FROM (SELECT asset_id, from_ts, to_ts FROM stg_incidents WHERE kind = 'capture_disconnect' ${stored}) i JOIN _bk_touch t USING (asset_id)`,
      files.length ? { f: new DuckDBListValue(files) } : {},
    )
  ).getRows();
  const out = new Map<number, [number, number][]>();
  for (const [tok, from, to] of rows) {
    const list = out.get(Number(tok)) ?? [];
    list.push([Number(from), Number(to)]);
    out.set(Number(tok), list);
  }
  return out;
}

const CSV = `delim = '|', quote = '', escape = '', header = false, auto_detect = false`;

/** The tracker's files into staging (after the replay). */
export async function stageIntegrity(conn: DuckDBConnection, lake: VersionDraft, dir: string): Promise<void> {
  const f = IntegrityTracker.files(dir);
  await conn.run(
    `INSERT INTO stg_checkpoints
     SELECT make_timestamp(c.ms * 1000), t.condition_id, t.asset_id, c.ms * 1000000 + c.k, c.kind, c.ok, make_timestamp(c.since_ms * 1000)
     FROM read_csv($f, ${CSV}, columns = {'tok': 'INTEGER', 'ms': 'BIGINT', 'k': 'BIGINT', 'kind': 'VARCHAR', 'ok': 'BOOLEAN', 'since_ms': 'BIGINT'}) c
     JOIN _bk_touch t USING (tok)`,
    { f: f.checkpoints },
  );
  // One incident per key: a token's two off-tick prices in one message are one finding.
  await conn.run(
    `INSERT INTO stg_incidents
     SELECT t.asset_id, t.condition_id, i.kind, make_timestamp(i.from_ms * 1000), make_timestamp(i.to_ms * 1000), i.seq_ms * 1000000 + i.seq_k, i.detail
     FROM read_csv($f, ${CSV}, columns = {'tok': 'INTEGER', 'kind': 'VARCHAR', 'from_ms': 'BIGINT', 'to_ms': 'BIGINT', 'seq_ms': 'BIGINT',
                                         'seq_k': 'BIGINT', 'detail': 'VARCHAR'}) i
     JOIN _bk_touch t USING (tok)
     QUALIFY row_number() OVER (PARTITION BY t.asset_id, i.kind, i.from_ms, i.seq_ms, i.seq_k ORDER BY i.detail) = 1`,
    { f: f.incidents },
  );
  await conn.run(
    `INSERT INTO stg_incidents
     SELECT asset_id, any_value(condition_id ORDER BY condition_id NULLS LAST), kind, make_timestamp(recv_ms * 1000), make_timestamp(recv_ms * 1000), seq,
            coalesce(any_value(detail ORDER BY detail), '{}')
     FROM stg_tape_flags WHERE kind IN ('duplicate', 'recv_backwards') GROUP BY asset_id, kind, recv_ms, seq`,
  );
  await conn.run(
    `UPDATE stg_l2 SET after_gap = true
     FROM (SELECT DISTINCT t.asset_id, g.ms * 1000000 + g.k AS seq
           FROM read_csv($f, ${CSV}, columns = {'tok': 'INTEGER', 'ms': 'BIGINT', 'k': 'BIGINT'}) g JOIN _bk_touch t USING (tok)) g
     WHERE stg_l2.asset_id = g.asset_id AND stg_l2.seq = g.seq`,
    { f: f.afterGap },
  );
  await rewriteVerified(conn, lake, f.reopened);
  await writeGapState(conn, lake, f.gapStreams, f.gapOutages);
}

/**
 * Stored rows of a stretch that began in an earlier batch and that this batch's first `book` of the token
 * verified: re-staged with verified = true (they were written false, as an open stretch).
 */
async function rewriteVerified(conn: DuckDBConnection, lake: VersionDraft, reopened: string): Promise<void> {
  await conn.run(
    `CREATE OR REPLACE TEMP TABLE _int_reopen AS
     SELECT o.asset_id, coalesce(o.book_seq, -1) AS lo, o.min_seq AS hi, coalesce(o.book_seq // 1000000000, 0) AS lo_s
     FROM read_csv($f, ${CSV}, columns = {'tok': 'INTEGER'}) r JOIN _int_open o USING (tok)`,
    { f: reopened },
  );
  const lo = (await conn.runAndReadAll('SELECT min(lo_s) FROM _int_reopen')).getRows()[0]?.[0];
  if (lo === null || lo === undefined) return;
  const from = new Date(Number(lo) * 1000).toISOString().slice(0, 10);
  for (const [name, cols] of [
    ['book_snapshots', 'ts, condition_id, asset_id, reason, seq, best_bid, best_ask, bid_levels, ask_levels, bids, asks'],
    ['top_of_book', 'ts, condition_id, asset_id, seq, best_bid, best_bid_size, best_ask, best_ask_size, mid, spread'],
  ] as const) {
    const files = lake.partitionFiles(
      name,
      lake.partitionValues(name).filter((p) => p >= from),
    );
    if (files.length === 0) continue;
    await conn.run(
      // Rows already true come back identical and change nothing (the merge keeps what it holds).
      `INSERT INTO stg_${name}
       SELECT ${cols}, true FROM read_parquet($f::VARCHAR[], hive_partitioning = false, union_by_name = true) s
       WHERE s.asset_id IN (SELECT asset_id FROM _int_reopen)
         AND EXISTS (SELECT 1 FROM _int_reopen r WHERE r.asset_id = s.asset_id AND s.seq > r.lo AND s.seq < r.hi)`,
      { f: new DuckDBListValue(files) },
    );
  }
}

export async function dropIntegrityTemps(conn: DuckDBConnection): Promise<void> {
  for (const t of ['_int_open', '_int_reopen']) await conn.run(`DROP TABLE IF EXISTS ${t}`);
  await dropGapTemps(conn);
  await conn.run('DELETE FROM stg_tape_flags');
}
