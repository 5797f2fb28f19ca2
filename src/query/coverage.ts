import type { Query } from '../lake/duckdb.js';
import type { Lake } from '../lake/sources.js';
import { dateOf, perToken, query, tsParam, type Params } from './common.js';

/**
 * Builders over the tape-integrity data sets (lake/README.md: `coverage`, `incidents`, `checkpoints`, written by
 * the ingest's book replay). Coverage is one row per token and UTC day, so every read here is small; each filters
 * on the sort key (asset_id) first.
 */

/**
 * Statuses from best to worst. `missing` is the worst: a day inside the token's tape with no message at all holds
 * nothing a client could use; `degraded` holds data known wrong somewhere; `unverified` data not yet proven.
 */
export const COVERAGE_STATUSES = ['verified', 'unverified', 'degraded', 'missing'] as const;
export type CoverageStatus = (typeof COVERAGE_STATUSES)[number];

/** SQL rank of a status column (0 best … 3 worst; an unknown text ranks as unverified: nothing proves it). */
function rankSql(col: string): string {
  return `CASE ${col} WHEN 'verified' THEN 0 WHEN 'unverified' THEN 1 WHEN 'degraded' THEN 2 WHEN 'missing' THEN 3 ELSE 1 END`;
}

/** The status of a rank computed by rankSql (DuckDB lists are 1-based). */
function statusOfRank(expr: string): string {
  return `['verified', 'unverified', 'degraded', 'missing'][${expr} + 1]`;
}

/** The first and last coverage day of some tokens (the default window of a market's coverage). */
export function coverageSpanQuery(lake: Lake, tokens: readonly string[]): Query {
  const params: Params = {};
  const rows = perToken(lake.from('coverage'), 'asset_id', tokens, 'date', [], params);
  return query(`SELECT strftime(min(date), '%Y-%m-%d') AS first_day, strftime(max(date), '%Y-%m-%d') AS last_day FROM ${rows} c`, params);
}

/** Coverage rows of some tokens from day `from` to day `to` (YYYY-MM-DD, inclusive), by day then token. */
export function coverageDaysQuery(lake: Lake, tokens: readonly string[], from: string, to: string): Query {
  const params: Params = { from_day: from, to_day: to };
  const rows = perToken(
    lake.from('coverage'),
    'asset_id',
    tokens,
    'date, asset_id, status, seconds_verified, seconds_degraded, seconds_unverified, checkpoints_passed, checkpoints_failed, messages, first_recv_ts, last_recv_ts',
    ['date >= $from_day::DATE', 'date <= $to_day::DATE'],
    params,
  );
  return query(
    `SELECT strftime(date, '%Y-%m-%d') AS date, asset_id, status, seconds_verified, seconds_degraded, seconds_unverified,
  checkpoints_passed, checkpoints_failed, messages, first_recv_ts, last_recv_ts
FROM ${rows} c
ORDER BY date, asset_id`,
    params,
  );
}

/**
 * Incidents of some tokens whose stretch [from_ts, to_ts] meets [start, end): a silence that began the day before
 * the window still shows. Files are partitioned by from_ts's day, so only the upper bound prunes partitions.
 * `limit` rows at most (the caller asks one more to know whether it cut).
 */
export function incidentsQuery(lake: Lake, tokens: readonly string[], start: bigint, end: bigint, limit: number): Query {
  const params: Params = { start: tsParam(start), end: tsParam(end), last_day: dateOf(end - 1n), limit };
  const rows = perToken(
    lake.from('incidents'),
    'asset_id',
    tokens,
    'asset_id, kind, from_ts, to_ts, seq, detail',
    ['from_ts < $end', 'to_ts >= $start', 'date <= $last_day'],
    params,
  );
  return query(`SELECT asset_id, kind, from_ts, to_ts, seq, detail FROM ${rows} i ORDER BY from_ts, asset_id, seq LIMIT $limit`, params);
}

/**
 * A sum of seconds stored exact to the millisecond (ms / 1000 as DOUBLE, sql/ingest/coverage.sql), summed in whole
 * milliseconds: a sum of the doubles carries binary noise (`3025.4610000000002`); whole ms over 1000 is the double
 * nearest the three-decimal value, which a JSON writer prints as such (`3025.461`).
 */
function msSum(col: string): string {
  return `(sum(CAST(round(${col} * 1000) AS BIGINT)) / 1000)::DOUBLE`;
}

/**
 * One venue day, per market: the worst status of its tokens, their seconds and checkpoints, and the incidents that
 * began that day. Tokens map to markets through the catalogue (its outcome token lists, as the market resolver
 * reads them); a token the catalogue lacks is listed under a null market_id with its condition id. Worst first.
 */
export function venueCoverageQuery(lake: Lake, day: string): Query {
  return query(
    `WITH cov AS (
  SELECT asset_id, condition_id, status, seconds_verified, seconds_degraded, checkpoints_passed, checkpoints_failed
  FROM ${lake.from('coverage')}
  WHERE date = $day::DATE
),
inc AS (
  SELECT asset_id, count(*) AS n FROM ${lake.from('incidents')} WHERE date = $day GROUP BY asset_id
),
tok AS (
  SELECT id AS market_id, unnest(outcome_token_ids) AS asset_id FROM ${lake.from('markets')}
)
SELECT tok.market_id, cov.condition_id, ${statusOfRank(`max(${rankSql('cov.status')})`)} AS status, count(*) AS tokens,
  ${msSum('cov.seconds_verified')} AS seconds_verified, ${msSum('cov.seconds_degraded')} AS seconds_degraded,
  sum(cov.checkpoints_passed)::BIGINT AS checkpoints_passed, sum(cov.checkpoints_failed)::BIGINT AS checkpoints_failed,
  coalesce(sum(inc.n), 0)::BIGINT AS incidents
FROM cov
LEFT JOIN tok USING (asset_id)
LEFT JOIN inc USING (asset_id)
GROUP BY tok.market_id, cov.condition_id
ORDER BY max(${rankSql('cov.status')}) DESC, tok.market_id, cov.condition_id`,
    { day },
  );
}

/** Which tape the coverage of a pull is read for: tokens, one market's condition id, a series' markets, or all. */
export type CoverageScope = { tokens: readonly string[] } | { conditionId: string } | { seriesId: string } | { all: true };

/**
 * The worst status per UTC day a pull touches (days `from` … `to` inclusive, either open), for estimates and the
 * bulk manifest: a day with any token degraded is degraded, and so on (rankSql).
 */
export function coverageByDayQuery(lake: Lake, scope: CoverageScope, from: string | undefined, to: string | undefined): Query {
  const params: Params = {};
  const where: string[] = [];
  if (from !== undefined) {
    where.push('date >= $from_day::DATE');
    params.from_day = from;
  }
  if (to !== undefined) {
    where.push('date <= $to_day::DATE');
    params.to_day = to;
  }
  let rows: string;
  if ('tokens' in scope) {
    rows = perToken(lake.from('coverage'), 'asset_id', scope.tokens, 'date, status', where, params);
  } else {
    if ('conditionId' in scope) {
      where.push('condition_id = $condition_id');
      params.condition_id = scope.conditionId;
    } else if ('seriesId' in scope) {
      where.push(`asset_id IN (SELECT unnest(outcome_token_ids) FROM ${lake.from('markets')} WHERE series_id = $series_id)`);
      params.series_id = scope.seriesId;
    }
    rows = `(SELECT date, status FROM ${lake.from('coverage')}${where.length ? ` WHERE ${where.join(' AND ')}` : ''})`;
  }
  return query(
    `SELECT strftime(date, '%Y-%m-%d') AS date, ${statusOfRank(`max(${rankSql('status')})`)} AS status
FROM ${rows} c
GROUP BY date
ORDER BY date`,
    params,
  );
}

/**
 * The `book` checkpoints of a token on one day (its one file, named explicitly), in arrival order: when each was
 * received, the start of the stretch it closes (since_ts) and whether it passed (µs since the epoch as BIGINT).
 */
export function dayCheckpointsQuery(lake: Lake, assetId: string, day: string): Query {
  const source = lake.partitions ? lake.partitions('checkpoints', [day]) : lake.from('checkpoints');
  return query(
    `SELECT epoch_us(ts) AS ts_us, epoch_us(since_ts) AS since_us, ok
FROM ${source}
WHERE asset_id = $asset AND kind = 'book' AND date = $day
ORDER BY ts, seq`,
    { asset: assetId, day },
  );
}

/**
 * The first `book` checkpoint of a token received after day `day` (the one that closes a stretch still open at
 * the end of that day), in the form of dayCheckpointsQuery.
 */
export function nextDayCheckpointQuery(lake: Lake, assetId: string, day: string): Query {
  return query(
    `SELECT epoch_us(ts) AS ts_us, epoch_us(since_ts) AS since_us, ok
FROM ${lake.from('checkpoints')}
WHERE asset_id = $asset AND kind = 'book' AND date > $day
ORDER BY ts, seq
LIMIT 1`,
    { asset: assetId, day },
  );
}
