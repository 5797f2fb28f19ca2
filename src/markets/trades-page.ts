import type { LakeSession } from '../lake/session.js';
import { tradesCountQuery, tradesPageQuery } from '../query/trades.js';
import { TRADE_SHAPE } from '../query/shapes.js';
import { planTradePage } from '../query/trade-plan.js';
import { tradeHours, tradePartitions } from './trade-hours.js';
import { PageCache } from './page-cache.js';
import { monthOf } from '../query/common.js';
import { nextByTime } from '../query/time-cursor.js';

/** A page of GET /v1/trades: its filters (instants in epoch microseconds), limit and offset. */
export type TradesPageRequest = {
  outcome?: number | undefined;
  side?: 'buy' | 'sell' | undefined;
  start?: bigint | undefined;
  end?: bigint | undefined;
  limit: number;
  offset: number;
};

/** A page as JSON text, and where the next one starts when more trades match. */
export type TradesPage = { json: string; rows: number; next?: { end: string; offset: number } | undefined };

/** Answered pages by request and trades file versions: 32 MB, pages of up to 2 MB (≈ 4,000 trades). */
const pages = new PageCache<TradesPage>(32 * 2 ** 20, 2 * 2 ** 20);

/**
 * One page of trades, and where the next one starts when more trades match (read one row beyond the page to
 * know; src/query/time-cursor.ts). A market's page is read from the partitions it lands in, each token from the
 * newest hours that hold the page (src/query/trade-plan.ts) — not a top-N over the whole market — and the answer
 * is kept until a trades file changes: the busiest markets' first pages are what a crowd asks for. A page still
 * deep after the plan's skipped partitions (offset ≥ DEEP_PAGE_OFFSET) takes two steps in its statement: the
 * page's keys from the narrow sort columns, then those rows in full (tradesPageQuery, src/query/trades.ts).
 * `admit` is awaited only when the page must be computed (a kept one waits for nothing); when it resolves false
 * (the caller gave up meanwhile) the answer is null.
 */
export async function tradesPage(
  lake: LakeSession,
  q: TradesPageRequest,
  tokens: string[] | undefined,
  admit?: () => Promise<boolean>,
): Promise<TradesPage | null> {
  const parts = tradePartitions(lake);
  const key = JSON.stringify([
    lake.lakeDir,
    parts.map((p) => p.version),
    tokens ?? null,
    q.outcome ?? null,
    q.side ?? null,
    String(q.start),
    String(q.end),
    q.limit,
    q.offset,
  ]);
  const hit = pages.get(key);
  if (hit) return hit;
  if (admit && !(await admit())) return null;
  const page = { limit: q.limit + 1, offset: q.offset };
  const from = q.start === undefined ? undefined : monthOf(q.start);
  const to = q.end === undefined ? undefined : monthOf(q.end);
  const inWindow = parts.filter((p) => (from === undefined || p.month >= from) && (to === undefined || p.month <= to));
  const plan = tokens === undefined ? undefined : await planTradePage(tradeHours(lake, inWindow, tokens, q.side), q, page);
  const f = { tokens, outcome: q.outcome, side: q.side, start: q.start, end: q.end, plan };
  const src = lake.sources;
  const rows = await lake.jsonRows(tradesPageQuery(src, f, page), TRADE_SHAPE);
  const shown = rows.slice(0, q.limit);
  let next: TradesPage['next'];
  if (rows.length > q.limit) {
    // Newest first: the rest is at or before the last trade's instant (src/query/time-cursor.ts); "beyond" it is newer.
    const n = await nextByTime(shown, 'desc', { offset: q.offset, bound: q.end }, (at) => lake.count(tradesCountQuery(src, { ...f, start: at })));
    next = { end: n.at, offset: n.offset };
  }
  const out: TradesPage = { json: `[${shown.join(',')}]`, rows: shown.length, next };
  pages.set(key, out);
  return out;
}
