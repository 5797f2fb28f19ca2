import { DuckDBInstance } from '@duckdb/node-api';
import { currentVersion, type SetName } from '../../src/lake/versions.js';

/**
 * Lake content as the archive path and the websocket path must agree on it. What legitimately differs is
 * normalized away, and only that:
 * - seq: k (the rank within a receive millisecond) follows the file's message order on the websocket path and
 *   (venue time, type, file position) within a market on the archive path. The receive ms (seq / 1e6) must
 *   match, and so must the order of each token's rows: l2 is compared as each token's sequence of level
 *   updates (position in the token's tape instead of seq and level_idx), the other sets with the rank of
 *   seq within the token.
 * - Message boundaries: two price_change messages of one market with the same receive and venue ms are one
 *   message on the archive path (its rows do not say where the first ended), so the top of book between them
 *   is not emitted. top_of_book is compared as the top at the end of each token's (receive ms, venue ms), and
 *   coverage without its message count (checked apart: fewer by at most the messages so merged).
 * - l2.hash: the archive carries no book hash (the archive path writes pmlake-rebuilt:<seq>).
 * raw is compared apart: its frames are rebuilt on the archive path.
 */
const RANK = `seq // 1000000 AS seq_ms, dense_rank() OVER (PARTITION BY asset_id ORDER BY seq) AS msg_no`;
const KEEP: Record<string, string> = {
  l2: `recv_ts, ts, condition_id, asset_id, side, price, size, is_snapshot, after_gap,
       row_number() OVER (PARTITION BY asset_id ORDER BY seq, level_idx) AS pos`,
  book_snapshots: `* EXCLUDE (seq), ${RANK}`,
  top_of_book: `* EXCLUDE (seq), seq // 1000000 AS seq_ms FROM (SELECT * FROM read_parquet($files)
       QUALIFY row_number() OVER (PARTITION BY asset_id, seq // 1000000, ts ORDER BY seq DESC) = 1)`,
  checkpoints: `* EXCLUDE (seq), ${RANK}`,
  incidents: `* EXCLUDE (seq), seq // 1000000 AS seq_ms`,
  last_trades: `* EXCLUDE (seq), ${RANK}`,
  coverage: `* EXCLUDE (messages)`,
};
export const COMPARED = Object.keys(KEEP);

/** The data set's rows (normalized as above), one text line each, sorted. */
export async function normalizedRows(lakeDir: string, set: string): Promise<string[]> {
  const files = currentVersion(lakeDir).files(set as SetName);
  if (files.length === 0) return [];
  const db = await DuckDBInstance.create(':memory:');
  const conn = await db.connect();
  try {
    await conn.run(`SET TimeZone = 'UTC'`);
    const list = `[${files.map((f) => `'${f.replaceAll("'", "''")}'`).join(', ')}]`;
    const keep = KEEP[set]!;
    const from = keep.includes('$files') ? keep.replace('$files', list) : `${keep} FROM read_parquet(${list})`;
    const rows = (await conn.runAndReadAll(`SELECT CAST(s AS VARCHAR) AS r FROM (SELECT ${from}) s ORDER BY r`)).getRows();
    return rows.map((r) => String(r[0]));
  } finally {
    conn.closeSync();
    db.closeSync();
  }
}

/** The raw frames of a lake, in (recv_ts, seq) order. */
export async function rawFrames(lakeDir: string): Promise<string[]> {
  const files = currentVersion(lakeDir).files('raw' as SetName);
  if (files.length === 0) return [];
  const db = await DuckDBInstance.create(':memory:');
  const conn = await db.connect();
  try {
    const list = `[${files.map((f) => `'${f.replaceAll("'", "''")}'`).join(', ')}]`;
    return (await conn.runAndReadAll(`SELECT frame FROM read_parquet(${list}) ORDER BY recv_ts, seq`)).getRows().map((r) => String(r[0]));
  } finally {
    conn.closeSync();
    db.closeSync();
  }
}

/** coverage.messages per token and day ("asset|YYYY-MM-DD" → messages). */
export async function coverageMessages(lakeDir: string): Promise<Map<string, number>> {
  const files = currentVersion(lakeDir).files('coverage' as SetName);
  if (files.length === 0) return new Map();
  const db = await DuckDBInstance.create(':memory:');
  const conn = await db.connect();
  try {
    const list = `[${files.map((f) => `'${f.replaceAll("'", "''")}'`).join(', ')}]`;
    const rows = (await conn.runAndReadAll(`SELECT asset_id || '|' || CAST(date AS VARCHAR), messages FROM read_parquet(${list})`)).getRows();
    return new Map(rows.map((r) => [String(r[0]), Number(r[1])]));
  } finally {
    conn.closeSync();
    db.closeSync();
  }
}
