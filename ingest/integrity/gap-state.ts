import { DuckDBListValue, type DuckDBConnection } from '@duckdb/node-api';
import { writeParquetFile } from '../partitions.js';
import type { VersionDraft } from '../versions.js';
import { FRESH_AFTER_MS, type GapSeed, type Outage, type StreamSeed } from './gaps.js';

/**
 * The silence finder's state in the lake (`integrity/tape_gaps`, one file rewritten by every batch that lands
 * tape): per token its last receive ms and spacing histogram (`asset_id`, `last_ms`, `spacing_hist`: counts by
 * quarter-octave bucket, comma-separated text only the finder reads), the capture's (`asset_id` NULL), and the
 * capture's outages (`outage_from_ms`, `outage_to_ms`, `outage_typical_ms`; `last_ms` NULL). Tokens and outages
 * more than FRESH_AFTER_DAYS behind the capture's last receive time are dropped: no later gap can use them.
 * With it a batch decides the gaps that end in it exactly as one batch of all the tape would
 * (ingest/integrity/gaps.ts). Needs `_bk_touch` (ingest/books.ts).
 */

const NAMES = 'asset_id, last_ms, spacing_hist, outage_from_ms, outage_to_ms, outage_typical_ms';

/** The stored state, or an empty relation of its columns. */
function stored(lake: VersionDraft): { sql: string; params: Record<string, DuckDBListValue> } {
  const files = lake.files('tape_gaps');
  return files.length > 0
    ? { sql: 'read_parquet($s::VARCHAR[])', params: { s: new DuckDBListValue(files) } }
    : {
        sql: `(SELECT * FROM (VALUES (NULL::VARCHAR, NULL::BIGINT, NULL::VARCHAR, NULL::BIGINT, NULL::BIGINT, NULL::DOUBLE)) v(${NAMES}) WHERE false)`,
        params: {},
      };
}

/**
 * The state of the batch's tokens and of the capture (only their rows are read, never the whole file into memory);
 * only outages a touched token can have lived through.
 */
export async function loadGapSeed(conn: DuckDBConnection, lake: VersionDraft): Promise<GapSeed> {
  if (lake.files('tape_gaps').length === 0) return { tokens: new Map(), capture: undefined, outages: [] };
  const src = stored(lake);
  const tokens = new Map<number, StreamSeed>();
  let capture: StreamSeed | undefined;
  const rows = await conn.runAndReadAll(
    `SELECT coalesce(t.tok, 0) AS tok, s.last_ms::DOUBLE AS last_ms, s.spacing_hist FROM ${src.sql} s LEFT JOIN _bk_touch t USING (asset_id)
     WHERE s.last_ms IS NOT NULL AND (s.asset_id IS NULL OR t.tok IS NOT NULL)`,
    src.params,
  );
  for (const [tok, last, hist] of rows.getRowsJS()) {
    const seed = { lastMs: Number(last), hist: String(hist ?? '') };
    if (Number(tok) === 0) capture = seed;
    else tokens.set(Number(tok), seed);
  }
  // A touched token's gaps begin at its last stored time at the earliest, or in this batch.
  let since = Infinity;
  for (const t of tokens.values()) since = Math.min(since, t.lastMs);
  const first = (await conn.runAndReadAll('SELECT min(min_seq) // 1000000 FROM _bk_touch')).getRowsJS()[0]?.[0];
  if (first !== null && first !== undefined) since = Math.min(since, Number(first));
  const outages: Outage[] = [];
  if (Number.isFinite(since)) {
    const o = await conn.runAndReadAll(
      `SELECT outage_from_ms::DOUBLE, outage_to_ms::DOUBLE, outage_typical_ms FROM ${src.sql}
       WHERE outage_from_ms IS NOT NULL AND outage_to_ms > $since ORDER BY outage_from_ms, outage_to_ms`,
      { ...src.params, since },
    );
    for (const [from, to, typical] of o.getRowsJS()) outages.push({ fromMs: Number(from), toMs: Number(to), typicalMs: Number(typical) });
  }
  return { tokens, capture, outages };
}

const CSV = `delim = '|', quote = '', escape = '', header = false, auto_detect = false`;

/**
 * The new state file: the stored rows of tokens this batch did not touch, the touched tokens' and the capture's
 * new state, the stored outages and the new ones. Files: ingest/integrity/tracker.ts `files`.
 */
export async function writeGapState(conn: DuckDBConnection, lake: VersionDraft, streamFile: string, outageFile: string): Promise<void> {
  const src = stored(lake);
  await conn.run(
    `CREATE OR REPLACE TEMP TABLE _gap_new AS
     SELECT t.asset_id, r.last_ms, coalesce(r.hist, '') AS spacing_hist
     FROM read_csv($f, ${CSV}, columns = {'tok': 'INTEGER', 'last_ms': 'BIGINT', 'hist': 'VARCHAR'}) r LEFT JOIN _bk_touch t USING (tok)
     WHERE r.tok = 0 OR t.asset_id IS NOT NULL`,
    { f: streamFile },
  );
  // Later tape comes after the capture's last receive time: a token behind it by more than FRESH_AFTER_MS starts
  // afresh, and an outage that old lies in no gap still judged.
  const last = await conn.runAndReadAll(
    `SELECT max(last_ms) FROM (SELECT last_ms FROM _gap_new WHERE asset_id IS NULL
                               UNION ALL SELECT last_ms FROM ${src.sql} s WHERE s.asset_id IS NULL AND s.last_ms IS NOT NULL)`,
    src.params,
  );
  const cutoff = Number(last.getRowsJS()[0]?.[0] ?? 0) - FRESH_AFTER_MS;
  const select = `
    SELECT asset_id, last_ms, spacing_hist, NULL::BIGINT AS outage_from_ms, NULL::BIGINT AS outage_to_ms, NULL::DOUBLE AS outage_typical_ms
    FROM ${src.sql} s
    WHERE s.last_ms >= $cutoff AND NOT EXISTS (SELECT 1 FROM _gap_new r WHERE r.asset_id IS NOT DISTINCT FROM s.asset_id)
    UNION ALL SELECT asset_id, last_ms, spacing_hist, NULL, NULL, NULL FROM _gap_new WHERE last_ms >= $cutoff
    UNION ALL SELECT NULL, NULL, NULL, outage_from_ms, outage_to_ms, any_value(outage_typical_ms ORDER BY src) FROM (
      SELECT outage_from_ms, outage_to_ms, outage_typical_ms, 0 AS src FROM ${src.sql} WHERE outage_from_ms IS NOT NULL
      UNION ALL SELECT o.f, o.t, o.typical, 1 FROM read_csv($o, ${CSV}, columns = {'f': 'BIGINT', 't': 'BIGINT', 'typical': 'DOUBLE'}) o)
    WHERE outage_from_ms >= $cutoff
    GROUP BY outage_from_ms, outage_to_ms`;
  // A batch that changes no state (tape the lake already holds) writes nothing: re-ingesting publishes no version.
  const changed = await conn.runAndReadAll(
    `SELECT (SELECT count(*) FROM (SELECT asset_id, last_ms, spacing_hist FROM _gap_new
               EXCEPT SELECT asset_id, last_ms, spacing_hist FROM ${src.sql} s
               WHERE s.last_ms IS NOT NULL AND (s.asset_id IS NULL OR s.asset_id IN (SELECT asset_id FROM _gap_new))))
          + (SELECT count(*) FROM read_csv($o, ${CSV}, columns = {'f': 'BIGINT', 't': 'BIGINT', 'typical': 'DOUBLE'}) o
             WHERE NOT EXISTS (SELECT 1 FROM ${src.sql} s WHERE s.outage_from_ms = o.f AND s.outage_to_ms = o.t)) AS n`,
    { ...src.params, o: outageFile },
  );
  if (Number(changed.getRowsJS()[0]?.[0] ?? 0) === 0) return;
  const file = lake.newFile('tape_gaps', null);
  const rows = await writeParquetFile(conn, select, file, { ...src.params, o: outageFile, cutoff });
  lake.replaceSingle('tape_gaps', file, rows);
}

export async function dropGapTemps(conn: DuckDBConnection): Promise<void> {
  await conn.run('DROP TABLE IF EXISTS _gap_new');
}
