import { DuckDBListValue } from '@duckdb/node-api';
import type { BatchContext } from '../types.js';
import { batchTables } from './capture-redundancy.js';
import { identifierMacros } from '../identifiers.js';

/**
 * A capture's `outage` lines (docs/capture-format.md): nothing was recorded for these assets in (from_ms, to_ms).
 * Each becomes one `capture_disconnect` incident per asset; the coverage of the stretch holding it is not verified
 * (sql/ingest/coverage.sql). The condition id comes from this chunk's messages of the asset, else the catalogue
 * (staged in this batch, or in the lake). Needs _cap_ev and _ws_m (before finishTape drops it).
 * Returns the lines that lack from_ms, to_ms or assets, and the assets refused (a token id that is no uint256, an
 * over-long reason: identifiers.sql) with their first line; the caller reports both. The other assets of a line land.
 */
export type OutagesStaged = { incidents: number; bad: number; badLine: number | null; refused: number; refusedLine: number | null };

export async function stageOutages(ctx: BatchContext, recorder: string): Promise<OutagesStaged> {
  const { conn } = ctx;
  const row = (
    await conn.runAndReadAll(
      `SELECT count(*) FILTER (WHERE ok), count(*) FILTER (WHERE NOT ok), min(line) FILTER (WHERE NOT ok)
       FROM (SELECT line, from_ms IS NOT NULL AND to_ms IS NOT NULL AND len(assets) > 0 AS ok FROM _cap_ev WHERE event = 'outage')`,
    )
  ).getRows()[0];
  const good = Number(row?.[0] ?? 0);
  const bad = Number(row?.[1] ?? 0);
  const badLine = row?.[2] === null || row?.[2] === undefined ? null : Number(row[2]);
  if (good === 0) return { incidents: 0, bad, badLine, refused: 0, refusedLine: null };
  await identifierMacros(conn);
  // Outage lines are few: each asset is checked as it stands.
  await conn.run(
    `CREATE OR REPLACE TEMP TABLE _cap_out_all AS
     SELECT DISTINCT line, unnest(assets) AS asset_id, from_ms, to_ms, reason FROM _cap_ev
     WHERE event = 'outage' AND from_ms IS NOT NULL AND to_ms IS NOT NULL AND len(assets) > 0`,
  );
  const refusedRow = (
    await conn.runAndReadAll(`SELECT count(*), min(line) FROM _cap_out_all WHERE pm_bad_token(asset_id) OR pm_long_name(reason)`)
  ).getRows()[0];
  const refused = Number(refusedRow?.[0] ?? 0);
  const refusedLine = refused > 0 ? Number(refusedRow?.[1]) : null;
  await conn.run(
    `CREATE OR REPLACE TEMP TABLE _cap_out AS
     SELECT DISTINCT asset_id, from_ms, to_ms, reason FROM _cap_out_all
     WHERE asset_id IS NOT NULL AND NOT pm_bad_token(asset_id) AND NOT pm_long_name(reason)`,
  );
  await conn.run('DROP TABLE _cap_out_all');
  const tokens = ctx.lake.files('tokens');
  const stored = tokens.length
    ? `UNION ALL SELECT token_id, condition_id, 2 FROM read_parquet($f::VARCHAR[], hive_partitioning = false) WHERE token_id IN (SELECT asset_id FROM _cap_out)`
    : '';
  await conn.run(
    `INSERT INTO stg_incidents
     WITH cond AS (
       SELECT asset_id, arg_min(condition_id, rank) AS condition_id FROM (
         -- The chunk's markets of these assets, checked (the catalogue's were checked when staged). Only an outage's
         -- assets are read, so the check meets few messages.
         SELECT asset_id, condition_id, rank FROM (
           SELECT DISTINCT asset_id, market AS condition_id, 0 AS rank FROM _ws_m WHERE asset_id IN (SELECT asset_id FROM _cap_out) AND market IS NOT NULL
           UNION
           SELECT pc.asset_id, market, 0 FROM (SELECT market, unnest(price_changes) AS pc FROM _ws_m WHERE len(price_changes) > 0)
           WHERE pc.asset_id IN (SELECT asset_id FROM _cap_out) AND market IS NOT NULL
         ) WHERE NOT pm_bad_condition(condition_id)
         UNION ALL
         SELECT token_id, condition_id, 1 FROM stg_tokens WHERE token_id IN (SELECT asset_id FROM _cap_out)
         ${stored}
       ) WHERE condition_id IS NOT NULL GROUP BY asset_id
     )
     SELECT o.asset_id, c.condition_id, 'capture_disconnect', make_timestamp(o.from_ms * 1000), make_timestamp(o.to_ms * 1000),
            o.to_ms * 1000000, json_object('recorder', $rec, 'reason', o.reason)::VARCHAR
     FROM _cap_out o LEFT JOIN cond c USING (asset_id)`,
    tokens.length ? { rec: recorder, f: new DuckDBListValue(tokens) } : { rec: recorder },
  );
  const n = Number((await conn.runAndReadAll('SELECT count(*) FROM _cap_out')).getRows()[0]?.[0] ?? 0);
  await conn.run('DROP TABLE IF EXISTS _cap_out');
  return { incidents: n, bad, badLine, refused, refusedLine };
}

/**
 * At the end of a file: the stretches it proves its recorder was subscribed to each asset — from the line that
 * subscribed it to the connection's loss, else to the file's last line — join the batch's list; then every staged
 * outage of another recorder that one such stretch holds whole is dropped: that recorder's frames filled it (its
 * copies land, capture-redundancy.ts). One file's stretch, never several files pieced together: a file of the other
 * recorder missing from the batch could hold its own loss. Returns the incidents dropped.
 */
export async function dropCoveredOutages(ctx: BatchContext, recorder: string, lastMs: number): Promise<number> {
  const { conn } = ctx;
  await batchTables(ctx);
  await conn.run(
    `INSERT INTO stg_capture_spans
     SELECT hash($rec::VARCHAR), hash(s.asset), s.recv_ms, coalesce((SELECT min(d.recv_ms) FROM _cap_disc d WHERE d.conn = s.conn AND d.line > s.line), $last)
     FROM _cap_subs s WHERE s.recv_ms IS NOT NULL`,
    { rec: recorder, last: lastMs },
  );
  const covered = `kind = 'capture_disconnect' AND EXISTS (
       SELECT 1 FROM stg_capture_spans s WHERE s.asset = hash(stg_incidents.asset_id)
         AND s.recorder <> hash(json_extract_string(stg_incidents.detail, '$.recorder'))
         AND s.lo <= epoch_ms(stg_incidents.from_ts) AND s.hi >= epoch_ms(stg_incidents.to_ts))`;
  const n = Number((await conn.runAndReadAll(`SELECT count(*) FROM stg_incidents WHERE ${covered}`)).getRows()[0]?.[0] ?? 0);
  if (n > 0) await conn.run(`DELETE FROM stg_incidents WHERE ${covered}`);
  return n;
}
