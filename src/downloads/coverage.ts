import type { LakeSession } from '../lake/session.js';
import { coverageByDayQuery, type CoverageScope, type CoverageStatus } from '../query/coverage.js';
import { dateOf, type Window } from '../query/common.js';

/**
 * The tape's coverage of a pull, for estimates and the bulk manifest: the worst status of each UTC day the window
 * touches (days the tape has for the scope; none before its first or after its last), and the worst of all, so a
 * batch job can refuse a degraded day before it pulls. Only data derived from the websocket tape has a coverage:
 * book snapshots, top of book and the raw tape (frames, l2 levels, tape trades). Trades and OHLCV are on-chain
 * fills (ingest/fills.ts) that no lost websocket message can change, and options come from another venue.
 */
export type PullCoverage = { worst: CoverageStatus | null; days: { date: string; status: CoverageStatus }[] };

const RANK: Readonly<Record<CoverageStatus, number>> = { verified: 0, unverified: 1, degraded: 2, missing: 3 };

export async function pullCoverage(lake: LakeSession, scope: CoverageScope, w: Window): Promise<PullCoverage> {
  const from = w.start === undefined ? undefined : dateOf(w.start);
  // The end is exclusive: a window ending at midnight does not touch that day.
  const to = w.end === undefined ? undefined : dateOf(w.end - 1n);
  if (from !== undefined && to !== undefined && from > to) return { worst: null, days: [] };
  const rows = await lake.rows(coverageByDayQuery(lake.sources, scope, from, to));
  const days = rows.map((r) => ({ date: String(r.date), status: r.status as CoverageStatus }));
  return { worst: worstOf(days.map((d) => d.status)), days };
}

/** The worst of some statuses (null ones ignored); null when there is none. */
export function worstOf(statuses: readonly (CoverageStatus | null)[]): CoverageStatus | null {
  let worst: CoverageStatus | null = null;
  for (const s of statuses) if (s !== null && (worst === null || RANK[s] > RANK[worst])) worst = s;
  return worst;
}
