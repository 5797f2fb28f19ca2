import type { LakeSession } from '../lake/session.js';
import type { Json } from '../lake/values.js';
import { marketStatsQuery, rowCountQuery, tradeSpanQuery } from '../query/stats.js';

/**
 * Public aggregate figures of the session's lake version: markets, series, tokens, trades and
 * their span, book rows. A data set without files counts 0 without a statement.
 */
export type LakeStats = {
  markets: number;
  active_markets: number;
  resolved_markets: number;
  series: number;
  tokens: number;
  trades: number;
  orderbook_snapshots: number;
  top_of_book_rows: number;
  data_from: string | null;
  data_to: string | null;
  lake_version: number;
};

const num = (v: Json | undefined): number => (v === null || v === undefined ? 0 : Number(v));
const iso = (ms: Json | undefined): string | null => (ms === null || ms === undefined ? null : new Date(Number(ms)).toISOString());

export async function computeStats(lake: LakeSession): Promise<LakeStats> {
  const src = lake.sources;
  const out: LakeStats = {
    markets: 0,
    active_markets: 0,
    resolved_markets: 0,
    series: 0,
    tokens: 0,
    trades: 0,
    orderbook_snapshots: 0,
    top_of_book_rows: 0,
    data_from: null,
    data_to: null,
    lake_version: lake.version.version,
  };
  if (lake.hasFiles('markets')) {
    const m = (await lake.one(marketStatsQuery(src))) ?? {};
    Object.assign(out, {
      markets: num(m.markets),
      active_markets: num(m.active),
      resolved_markets: num(m.resolved),
      series: num(m.series),
      tokens: num(m.tokens),
    });
  }
  if (lake.hasFiles('trades')) {
    const t = (await lake.one(tradeSpanQuery(src))) ?? {};
    Object.assign(out, { trades: num(t.n), data_from: iso(t.first), data_to: iso(t.last) });
  }
  if (lake.hasFiles('book_snapshots')) out.orderbook_snapshots = await lake.count(rowCountQuery(src, 'book_snapshots'));
  if (lake.hasFiles('top_of_book')) out.top_of_book_rows = await lake.count(rowCountQuery(src, 'top_of_book'));
  return out;
}
