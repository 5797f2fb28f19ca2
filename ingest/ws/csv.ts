import type { SourceHandler } from '../types.js';
import { surveyTapeCsv } from './survey.js';
import { finishTape } from './common.js';
import { identifierMacros } from '../identifiers.js';

/**
 * Old-shape price_change messages exported from a database table: columns id, asset_id, market, timestamp,
 * hash, changes. `changes` is JSON inside a CSV field (keys in any order); `timestamp` is local-time text
 * with a numeric offset (`2025-01-25 18:15:47.925 +0100`) and is converted to UTC; hash quoting varies, which
 * the CSV reader absorbs. Rows arrive in the table's id order (its insertion order = arrival order). There is
 * no original frame: the raw tape gets the message rebuilt as venue-shaped JSON, so a row naming a token or condition
 * id the ingest refuses, or with an over-long hash (identifiers.sql), is reported and left out of raw too.
 */
export const wsCsvHandler: SourceHandler = {
  kind: 'ws',
  name: 'ws-db-export-csv',
  detect(file, head) {
    if (!/\.csv(\.gz)?$/i.test(file)) return false;
    const header = (head.split('\n')[0] ?? '').toLowerCase().replaceAll('"', '');
    const cols = header.split(',').map((c) => c.trim());
    return cols.includes('asset_id') && cols.includes('changes') && cols.includes('timestamp');
  },
  async stage(ctx, file) {
    const { conn } = ctx;
    await conn.run(
      `CREATE OR REPLACE TEMP TABLE _ws_csv AS
       SELECT ordinality AS line_no, * FROM read_csv($f, header = true, all_varchar = true, quote = '"', escape = '"') WITH ORDINALITY`,
      { f: file },
    );
    // Frame position = arrival order: the export's id when every id is an integer, else file order.
    await conn.run(`CREATE OR REPLACE TEMP TABLE _ws_csv2 AS
      SELECT row_number() OVER (ORDER BY TRY_CAST(id AS BIGINT) NULLS LAST, line_no) AS el, line_no + 1 AS line, *
      FROM _ws_csv`);
    await conn.run(`CREATE OR REPLACE TEMP TABLE _ws_m AS
      SELECT el, 0::INTEGER AS mi, NULL::BIGINT AS wrap_ms, false AS multi, 'OBJECT' AS jt, 'price_change' AS event_type,
             asset_id, market,
             epoch_ms(try_strptime(timestamp, ['%Y-%m-%d %H:%M:%S.%g %z', '%Y-%m-%d %H:%M:%S.%f %z', '%Y-%m-%d %H:%M:%S %z', '%Y-%m-%dT%H:%M:%S.%g%z'])::TIMESTAMP)
               AS ts_ms,
             hash,
             NULL::STRUCT(price VARCHAR, size VARCHAR)[] AS bids, NULL::STRUCT(price VARCHAR, size VARCHAR)[] AS asks,
             TRY_CAST(from_json(changes, '[{"price":"VARCHAR","side":"VARCHAR","size":"VARCHAR"}]') AS STRUCT(price VARCHAR, side VARCHAR, size VARCHAR)[]) AS changes,
             NULL::STRUCT(asset_id VARCHAR, price VARCHAR, size VARCHAR, side VARCHAR, hash VARCHAR, best_bid VARCHAR, best_ask VARCHAR)[] AS price_changes,
             NULL::VARCHAR AS price, NULL::VARCHAR AS size, NULL::VARCHAR AS side, NULL::VARCHAR AS fee_rate_bps, NULL::VARCHAR AS transaction_hash,
             NULL::JSON AS message, NULL::JSON AS rest_book
      FROM _ws_csv2`);
    const bad = (
      await conn.runAndReadAll(`SELECT count(*), min(line) FROM _ws_csv2 c JOIN _ws_m m USING (el)
         WHERE m.ts_ms IS NULL OR m.changes IS NULL OR m.asset_id IS NULL`)
    ).getRows()[0];
    if (Number(bad?.[0])) {
      ctx.issues.push({
        file,
        line: Number(bad?.[1]),
        message: `${Number(bad?.[0])} row(s) with an unreadable timestamp, changes or asset_id; first at this line`,
        count: Number(bad?.[0]),
      });
      ctx.counts.bad_csv_rows = (ctx.counts.bad_csv_rows ?? 0) + Number(bad?.[0]);
      await conn.run('DELETE FROM _ws_m WHERE ts_ms IS NULL OR changes IS NULL OR asset_id IS NULL');
    }
    await identifierMacros(conn);
    // Each distinct token and market is checked once (a table of many rows names few), into a table of its own so the
    // patterns stay off the rows; hashes are measured per row.
    await conn.run(`CREATE OR REPLACE TEMP TABLE _ws_csv_ids AS SELECT DISTINCT asset_id, market FROM _ws_m`);
    await conn.run(`CREATE OR REPLACE TEMP TABLE _ws_csv_refused AS
      SELECT m.el FROM _ws_m m
      LEFT JOIN (SELECT * FROM _ws_csv_ids WHERE pm_bad_token(asset_id) OR pm_bad_condition(market)) b
        ON b.asset_id = m.asset_id AND b.market IS NOT DISTINCT FROM m.market
      WHERE b.asset_id IS NOT NULL OR pm_long_name(m.hash)`);
    const refused = (await conn.runAndReadAll(`SELECT count(*), min(line) FROM _ws_csv2 JOIN _ws_csv_refused USING (el)`)).getRows()[0];
    if (Number(refused?.[0])) {
      ctx.issues.push({
        file,
        line: Number(refused?.[1]),
        message: `${Number(refused?.[0])} row(s) naming a token id that is not a uint256 in decimal, a condition id that is not 0x and 64 hex digits, or with a hash over 256 bytes, skipped; first at this line`,
        count: Number(refused?.[0]),
      });
      ctx.counts.refused_identifiers = (ctx.counts.refused_identifiers ?? 0) + Number(refused?.[0]);
      await conn.run('DELETE FROM _ws_m WHERE el IN (SELECT el FROM _ws_csv_refused)');
    }
    for (const t of ['_ws_csv_ids', '_ws_csv_refused']) await conn.run(`DROP TABLE ${t}`);
    await conn.run(`CREATE OR REPLACE TEMP TABLE _ws_fr AS
      SELECT m.el, 'csv' AS kind, NULL::BIGINT AS wrap_ms,
             json_object('event_type', 'price_change', 'asset_id', m.asset_id, 'market', m.market,
               'timestamp', CAST(m.ts_ms AS VARCHAR), 'hash', m.hash, 'changes', TRY_CAST(c.changes AS JSON)) AS frame
      FROM _ws_m m JOIN _ws_csv2 c USING (el)`);
    await conn.run(`CREATE OR REPLACE TEMP TABLE _ws_el AS SELECT el, NULL::JSON AS j FROM _ws_fr`);
    const lines = new Map<number, number>();
    for (const [el, line] of (await conn.runAndReadAll('SELECT el, line FROM _ws_csv2')).getRows()) lines.set(Number(el), Number(line));
    await conn.run('DROP TABLE IF EXISTS _ws_csv');
    await conn.run('DROP TABLE IF EXISTS _ws_csv2');
    await finishTape(ctx, file, (el) => {
      const line = lines.get(el);
      return line !== undefined ? { line, at: `line ${line}` } : { at: `row ${el}` };
    });
  },
  survey: surveyTapeCsv,
};
