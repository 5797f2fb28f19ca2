import type { DuckDBInstance } from '@duckdb/node-api';
import { marketStatsQuery, rowCountQuery, tradeSpanQuery } from '../query/stats.js';
import { hasFiles, lakeSources, runCount, runOne, type Json } from './runner.js';
import { lakeVersion } from './versions.js';

/**
 * Public aggregate figures of the lake's version (the request's pinned one): markets, series, tokens, trades and
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

export async function computeStats(deps: { db: DuckDBInstance; lakeDir: string }): Promise<LakeStats> {
  const { db, lakeDir } = deps;
  const lake = lakeSources(lakeDir);
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
    lake_version: lakeVersion(lakeDir).version,
  };
  if (hasFiles(lakeDir, 'markets')) {
    const m = (await runOne(db, marketStatsQuery(lake))) ?? {};
    Object.assign(out, { markets: num(m.markets), active_markets: num(m.active), resolved_markets: num(m.resolved), series: num(m.series), tokens: num(m.tokens) });
  }
  if (hasFiles(lakeDir, 'trades')) {
    const t = (await runOne(db, tradeSpanQuery(lake))) ?? {};
    Object.assign(out, { trades: num(t.n), data_from: iso(t.first), data_to: iso(t.last) });
  }
  if (hasFiles(lakeDir, 'book_snapshots')) out.orderbook_snapshots = await runCount(db, rowCountQuery(lake, 'book_snapshots'));
  if (hasFiles(lakeDir, 'top_of_book')) out.top_of_book_rows = await runCount(db, rowCountQuery(lake, 'top_of_book'));
  return out;
}
