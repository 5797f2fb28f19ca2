import { DuckDBListValue } from '@duckdb/node-api';
import type { BatchContext } from '../types.js';
import { bump } from './common.js';
import { identifierMacros } from '../identifiers.js';

const TAPE_TYPES = ['book', 'price_change', 'last_trade_price', 'tick_size_change', 'best_bid_ask'];

/**
 * A capture's frames that land but are not what the venue should have sent, each counted as an issue of its file
 * with the first line: frames that are not JSON (kept in raw as text), messages of an unknown event type (kept in
 * raw), messages for an asset not subscribed on the frame's connection at that line (landed like any other).
 * Runs after capture_recv.sql, on _ws_el, _ws_m, _cap_fr and _cap_subs.
 */
export async function reportFrameIssues(ctx: BatchContext, file: string, alsoKnown: readonly string[]): Promise<void> {
  const { conn } = ctx;
  await identifierMacros(conn);
  const report = (n: number, line: number, what: string, counter: string): void => {
    if (n === 0) return;
    bump(ctx, counter, n);
    ctx.issues.push({ file, line, message: `${n} ${what}; first at line ${line}`, count: n });
  };
  const notJson = (await conn.runAndReadAll(`SELECT count(*), min(el) FROM _ws_el WHERE NOT ok`)).getRows()[0];
  report(Number(notJson?.[0] ?? 0), Number(notJson?.[1]), 'frame(s) that are not JSON, kept in raw', 'frames_not_json');

  const known = [...TAPE_TYPES, ...alsoKnown];
  const unknown = (
    await conn.runAndReadAll(
      `SELECT count(*), min(el) FROM _ws_m WHERE jt = 'OBJECT' AND (event_type IS NULL OR NOT list_contains($k::VARCHAR[], event_type))`,
      { k: new DuckDBListValue(known) },
    )
  ).getRows()[0];
  report(Number(unknown?.[0] ?? 0), Number(unknown?.[1]), 'message(s) of an unknown event type, kept in raw', 'capture_unknown_messages');

  const unsubscribed = (
    await conn.runAndReadAll(
      `WITH ma AS (
         SELECT el, asset_id AS asset FROM _ws_m WHERE asset_id IS NOT NULL AND list_contains($t::VARCHAR[], event_type)
         UNION ALL
         SELECT el, unnest(price_changes).asset_id FROM _ws_m WHERE len(price_changes) > 0
       ), first_sub AS (SELECT conn, asset, min(line) AS line FROM _cap_subs GROUP BY ALL)
       -- A token id that is no uint256 is refused, not landed (ws_ids.sql); checked only on the frames found here.
       SELECT count(DISTINCT ma.el) FILTER (WHERE NOT pm_bad_token(ma.asset)), min(ma.el) FILTER (WHERE NOT pm_bad_token(ma.asset))
       FROM ma JOIN _cap_fr f USING (el) LEFT JOIN first_sub s ON s.conn = f.conn AND s.asset = ma.asset
       WHERE ma.asset IS NOT NULL AND (s.line IS NULL OR s.line > ma.el)`,
      { t: new DuckDBListValue(TAPE_TYPES) },
    )
  ).getRows()[0];
  report(
    Number(unsubscribed?.[0] ?? 0),
    Number(unsubscribed?.[1]),
    'frame(s) with a message for an asset not subscribed on its connection, landed',
    'capture_unsubscribed_frames',
  );
}
