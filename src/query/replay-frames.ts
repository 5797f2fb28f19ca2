import type { Query } from '../lake/duckdb.js';
import type { Lake } from '../lake/sources.js';
import { query, tsParam, windowWhere, type Params } from './common.js';

/**
 * One page of the raw tape for a replay: frames received in [sliceStart, sliceEnd), after the cursor (the last
 * frame already read: receive time, then seq), in receive order, at most `limit`. `conditionIds` narrows to frames
 * holding a message of those markets (null: every frame); `announcements` keeps `new_market` frames whatever their
 * market, as the venue sends them to every custom-feature connection.
 */
export type ReplayPage = {
  sliceStart: bigint;
  sliceEnd: bigint;
  after: { recvUs: bigint; seq: bigint } | null;
  conditionIds: readonly string[] | null;
  announcements: boolean;
  limit: number;
};

export function replayFramesQuery(lake: Lake, p: ReplayPage): Query {
  const params: Params = { limit: p.limit };
  const where = windowWhere('recv_ts', { start: p.sliceStart, end: p.sliceEnd }, params, { column: 'date' });
  if (p.after) {
    params.after_ts = tsParam(p.after.recvUs);
    params.after_seq = p.after.seq;
    where.push('(recv_ts > $after_ts OR (recv_ts = $after_ts AND seq > $after_seq))');
  }
  if (p.conditionIds) {
    // Condition ids are 0x hex: a comma never occurs in one, so the list travels as one bound text.
    params.cids = p.conditionIds.join(',');
    const markets = "list_has_any(condition_ids, string_split($cids, ','))";
    where.push(p.announcements ? `(${markets} OR list_contains(event_types, 'new_market'))` : markets);
  }
  const sql = `SELECT epoch_us(recv_ts) AS recv_us, seq, frame FROM ${lake.from('raw')}
  WHERE ${where.join(' AND ')} ORDER BY recv_ts, seq LIMIT $limit`;
  return query(sql, params);
}
