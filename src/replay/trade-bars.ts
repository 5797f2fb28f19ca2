import { parseIsoMicros } from '../iso-time.js';
import { isoFromMicros } from '../lake/values.js';
import { ohlcvSelect } from '../query/ohlcv.js';
import { bucketFloor } from '../timeframe.js';
import type { Keyed } from './merge.js';
import { head, RANK, type StreamContext } from './normalized-streams.js';
import type { DataType, ReplayAsset, TradeBarMessage } from './normalized-types.js';

type BarType = Extract<DataType, { kind: 'trade_bar' }>;

/**
 * OHLCV bars of one token's trades, each sent when it closes (at its bucket's end) — the bars closing within
 * (from, to]. They are the OHLCV endpoint's candles (src/query/ohlcv.ts, the same statement: the same trades,
 * buckets, open/close rule, empty buckets omitted), read a run of `pageRows` buckets at a time.
 */
export async function* tradeBars(c: StreamContext, a: ReplayAsset, t: BarType): AsyncGenerator<Keyed<TradeBarMessage>> {
  const tf = t.timeframe;
  const step = BigInt(tf.seconds) * 1_000_000n;
  const first = bucketFloor(tf, c.window.start);
  const last = bucketFloor(tf, c.window.end - step);
  const chunk = step * BigInt(c.pageRows);
  for (let from = first; from <= last; from += chunk) {
    if (c.signal?.aborted) return;
    const to = from + chunk < last + step ? from + chunk : last + step;
    const q = ohlcvSelect(c.session.sources, { token: a.asset_id, outcome: a.outcome_index, timeframe: tf, start: from, end: to }, 'asc');
    for (const r of await c.session.rows(q)) {
      const open = parseIsoMicros(String(r.timestamp))!;
      const close = open + step;
      const value: TradeBarMessage = {
        ...head(a, t.name, close),
        interval: tf.label,
        open_ts: isoFromMicros(open),
        open: Number(r.open),
        high: Number(r.high),
        low: Number(r.low),
        close: Number(r.close),
        volume: Number(r.volume),
        trade_count: Number(r.trade_count),
      };
      yield { us: close, rank: RANK.bar, seq: 0n, sub: 0, value };
    }
  }
}
