import { DuckDBListValue, type DuckDBConnection } from '@duckdb/node-api';
import { writeParquetFile } from '../partitions.js';
import type { VersionDraft } from '../versions.js';
import type { GapSeed, Outage } from './gaps.js';

/**
 * The silence finder's state in the lake (`integrity/tape_gaps`, one file rewritten by every batch that lands
 * tape): per token its last RECENT distinct receive ms (`asset_id`, `recent_ms`), the capture's (`asset_id`
 * NULL), and the capture's outages (`outage_from_ms`, `outage_to_ms`, `outage_typical_ms`; `recent_ms` NULL).
 * With it a batch decides the gaps that end in it exactly as one batch of all the tape would
 * (ingest/integrity/gaps.ts). Needs `_bk_touch` (ingest/books.ts).
 */

const COLUMNS = 'asset_id VARCHAR, recent_ms BIGINT[], outage_from_ms BIGINT, outage_to_ms BIGINT, outage_typical_ms DOUBLE';

/** The state for the batch's tokens; only outages a touched token can have lived through are read. */
export async function loadGapSeed(conn: DuckDBConnection, lake: VersionDraft): Promise<GapSeed> {
  const files = lake.files('tape_gaps');
  if (files.length === 0) return { tokens: new Map(), capture: [], outages: [] };
  const f = new DuckDBListValue(files);
  await conn.run(`CREATE OR REPLACE TEMP TABLE _gap_stored AS SELECT * FROM read_parquet($f::VARCHAR[])`, { f });
  const tokens = new Map<number, number[]>();
  let capture: number[] = [];
  const rows = await conn.runAndReadAll(
    `SELECT coalesce(t.tok, 0) AS tok, s.recent_ms::DOUBLE[] AS r FROM _gap_stored s LEFT JOIN _bk_touch t USING (asset_id)
     WHERE s.recent_ms IS NOT NULL AND (s.asset_id IS NULL OR t.tok IS NOT NULL)`,
  );
  for (const [tok, list] of rows.getRowsJS()) {
    const times = (list as number[]).map(Number);
    if (Number(tok) === 0) capture = times;
    else tokens.set(Number(tok), times);
  }
  // A touched token's gaps begin at its last stored time at the earliest, or in this batch.
  let since = Math.min(...[...tokens.values()].map((t) => t[t.length - 1] ?? Infinity));
  const first = (await conn.runAndReadAll('SELECT min(min_seq) // 1000000 FROM _bk_touch')).getRowsJS()[0]?.[0];
  if (first !== null && first !== undefined) since = Math.min(since, Number(first));
  const outages: Outage[] = [];
  if (Number.isFinite(since)) {
    const o = await conn.runAndReadAll(
      `SELECT outage_from_ms::DOUBLE, outage_to_ms::DOUBLE, outage_typical_ms FROM _gap_stored
       WHERE outage_from_ms IS NOT NULL AND outage_to_ms > $since ORDER BY outage_from_ms, outage_to_ms`,
      { since },
    );
    for (const [from, to, typical] of o.getRowsJS()) outages.push({ fromMs: Number(from), toMs: Number(to), typicalMs: Number(typical) });
  }
  return { tokens, capture, outages };
}

const CSV = `delim = '|', quote = '', escape = '', header = false, auto_detect = false`;

/**
 * The new state file: the stored rows of tokens this batch did not touch, the touched tokens' and the capture's
 * new recent times, the stored outages and the new ones. Files: ingest/integrity/tracker.ts `files`.
 */
export async function writeGapState(conn: DuckDBConnection, lake: VersionDraft, recentFile: string, outageFile: string): Promise<void> {
  if (lake.files('tape_gaps').length === 0) await conn.run(`CREATE OR REPLACE TEMP TABLE _gap_stored (${COLUMNS})`);
  await conn.run(
    `CREATE OR REPLACE TEMP TABLE _gap_recent AS
     SELECT t.asset_id, list_transform(string_split(r.times, ','), x -> x::BIGINT) AS recent_ms
     FROM read_csv($f, ${CSV}, columns = {'tok': 'INTEGER', 'times': 'VARCHAR'}) r LEFT JOIN _bk_touch t USING (tok)
     WHERE r.tok = 0 OR t.asset_id IS NOT NULL`,
    { f: recentFile },
  );
  const select = `
    SELECT asset_id, recent_ms, NULL::BIGINT AS outage_from_ms, NULL::BIGINT AS outage_to_ms, NULL::DOUBLE AS outage_typical_ms FROM _gap_stored s
    WHERE s.recent_ms IS NOT NULL AND NOT EXISTS (SELECT 1 FROM _gap_recent r WHERE r.asset_id IS NOT DISTINCT FROM s.asset_id)
    UNION ALL SELECT asset_id, recent_ms, NULL, NULL, NULL FROM _gap_recent
    UNION ALL SELECT NULL, NULL, outage_from_ms, outage_to_ms, any_value(outage_typical_ms ORDER BY src) FROM (
      SELECT outage_from_ms, outage_to_ms, outage_typical_ms, 0 AS src FROM _gap_stored WHERE outage_from_ms IS NOT NULL
      UNION ALL SELECT o.f, o.t, o.typical, 1 FROM read_csv($o, ${CSV}, columns = {'f': 'BIGINT', 't': 'BIGINT', 'typical': 'DOUBLE'}) o)
    GROUP BY outage_from_ms, outage_to_ms
    ORDER BY 1 NULLS FIRST, 3, 4`;
  const file = lake.newFile('tape_gaps', null);
  const rows = await writeParquetFile(conn, select, file, { o: outageFile });
  lake.replaceSingle('tape_gaps', file, rows);
}

export async function dropGapTemps(conn: DuckDBConnection): Promise<void> {
  for (const t of ['_gap_stored', '_gap_recent']) await conn.run(`DROP TABLE IF EXISTS ${t}`);
}
