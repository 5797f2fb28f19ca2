import { DuckDBListValue, type DuckDBConnection } from '@duckdb/node-api';
import type { VersionDraft } from '../versions.js';
import { runSqlFile } from '../ws/common.js';

/**
 * Coverage rows for the tokens of this batch (sql/ingest/coverage.sql): loads what the lake holds of their
 * checkpoints, breaking incidents and l2 rows on the days to recompute, then derives every day from the stretch
 * left open before the batch to the token's last message (a capture outage landed by an earlier batch still
 * unverifies the stretch this batch closes). Needs _bk_touch and _bk_known (ingest/books.ts) and
 * this batch's stg_checkpoints / stg_incidents.
 */
export async function deriveCoverage(conn: DuckDBConnection, lake: VersionDraft): Promise<void> {
  const stored = async (table: string, name: 'checkpoints' | 'incidents', select: string, where: string): Promise<void> => {
    const files = lake.files(name);
    if (files.length === 0) {
      await conn.run(`CREATE OR REPLACE TEMP TABLE ${table} AS SELECT ${select} FROM stg_${name} WHERE false`);
      return;
    }
    await conn.run(
      `CREATE OR REPLACE TEMP TABLE ${table} AS SELECT ${select} FROM read_parquet($f::VARCHAR[], hive_partitioning = false)
       WHERE ${where} AND asset_id IN (SELECT asset_id FROM _bk_touch)`,
      { f: new DuckDBListValue(files) },
    );
  };
  await stored('_cov_ck_stored', 'checkpoints', 'asset_id, seq, ts, since_ts, ok', `kind = 'book'`);
  await stored('_cov_inc_stored', 'incidents', 'asset_id, kind, from_ts, to_ts', `kind IN ('top_mismatch', 'crossed', 'capture_disconnect')`);

  // The first day any touched token needs: its last stored checkpoint before the batch, else its first stored l2 row.
  const l2 = lake.files('l2');
  let files: string[] = [];
  if (l2.length > 0) {
    const row = (
      await conn.runAndReadAll(
        `WITH b AS (SELECT asset_id, min(recv_ts) AS lo, max(recv_ts) AS hi FROM stg_l2 WHERE asset_id IS NOT NULL GROUP BY asset_id),
         c AS (SELECT b.asset_id, max(c.ts) AS last_ck FROM b JOIN _cov_ck_stored c ON c.asset_id = b.asset_id AND c.ts < b.lo GROUP BY 1)
         SELECT strftime(min(coalesce(c.last_ck, k.l2_lo, CASE WHEN k.l2_rows > 0 THEN TIMESTAMP '1970-01-01' END, b.lo)), '%Y-%m-%d') AS f,
                strftime(max(b.hi), '%Y-%m-%d') AS t, count(*) FILTER (WHERE k.l2_rows > 0) AS stored
         FROM b JOIN _bk_known k USING (asset_id) LEFT JOIN c USING (asset_id)`,
      )
    ).getRowObjectsJS()[0];
    if (row && Number(row.stored) > 0) {
      const from = String(row.f);
      const to = String(row.t);
      files = lake.partitionFiles(
        'l2',
        lake.partitionValues('l2').filter((p) => p >= from && p <= to),
      );
    }
  }
  if (files.length > 0) {
    await conn.run(
      `CREATE OR REPLACE TEMP TABLE _cov_l2_stored AS SELECT asset_id, seq, recv_ts FROM read_parquet($f::VARCHAR[], hive_partitioning = false)
       WHERE asset_id IN (SELECT asset_id FROM _bk_touch)`,
      { f: new DuckDBListValue(files) },
    );
  } else {
    await conn.run(`CREATE OR REPLACE TEMP TABLE _cov_l2_stored AS SELECT asset_id, seq, recv_ts FROM stg_l2 WHERE false`);
  }
  try {
    await runSqlFile(conn, 'coverage.sql');
  } finally {
    for (const t of ['_cov_ck_stored', '_cov_inc_stored', '_cov_l2_stored', '_cov_ck', '_cov_msg', '_cov_tok', '_cov_stretch']) {
      await conn.run(`DROP TABLE IF EXISTS ${t}`);
    }
  }
}
