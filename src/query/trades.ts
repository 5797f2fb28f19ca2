import type { Query } from '../lake/duckdb.js';
import type { Lake } from '../lake/sources.js';
import { perToken, query, tsParam, windowWhere, type Params, type Window } from './common.js';
import type { PagePlan } from './trade-plan.js';

/** Trade rows as the API shows them: the token id in market_id (the spec's second meaning of market_id). */
export const TRADE_COLUMNS = `id, token_id AS market_id, ts AS "timestamp", block_number, transaction_hash,
  outcome_index AS outcome, outcome_label, side, price, size, usd_value, maker, taker, fee, collateral`;

const SCAN_COLUMNS =
  'id, token_id, ts, block_number, transaction_hash, log_index, outcome_index, outcome_label, side, price, size, usd_value, maker, taker, fee, collateral';

export type TradeFilter = Window & {
  /** Tokens to read; undefined = every market (then `outcome` filters on the rows' outcome index). */
  tokens?: readonly string[] | undefined;
  outcome?: number | undefined;
  side?: 'buy' | 'sell' | undefined;
  /**
   * Read only these (partition, token) scans, each from its floor on (src/query/trade-plan.ts), instead of
   * every partition of `tokens`; the plan's offset replaces the page's.
   */
  plan?: PagePlan | undefined;
};

/**
 * Plain SELECT of trades in the window, no LIMIT: the download module wraps it in COPY. Newest first for the
 * API ('desc'), oldest first for files ('asc'); ties broken by block then log index, the chain's own order.
 */
export function tradesSelect(lake: Lake, f: TradeFilter, order: 'asc' | 'desc' = 'desc'): Query {
  const params: Params = {};
  const source = tradeSource(lake, f, params, []);
  const dir = order === 'desc' ? 'DESC' : 'ASC';
  return query(
    `SELECT ${TRADE_COLUMNS}
FROM ${source} t
ORDER BY ts ${dir}, block_number ${dir}, log_index ${dir}, id ${dir}`,
    params,
  );
}

/** How many trades match (the plan, if any, is not used: every matching row is counted). */
export function tradesCountQuery(lake: Lake, f: TradeFilter): Query {
  const params: Params = {};
  const source = tradeSource(lake, { ...f, plan: undefined }, params, [], 'id');
  return query(`SELECT count(*) AS n FROM ${source} t`, params);
}

/** The filtered trade rows (one scan per token when tokens are given), extra conditions pushed into each scan. */
function tradeSource(lake: Lake, f: TradeFilter, params: Params, extra: readonly string[], columns: string = SCAN_COLUMNS): string {
  const where = filterWhere(f, params);
  where.push(...extra);
  if (f.plan) return plannedSource(lake, f.plan, params, where, columns);
  return f.tokens === undefined
    ? `(SELECT ${columns} FROM ${lake.from('trades')}${where.length ? ` WHERE ${where.join(' AND ')}` : ''})`
    : perToken(lake.from('trades'), 'token_id', f.tokens, columns, where, params);
}

function filterWhere(f: TradeFilter, params: Params): string[] {
  const where = windowWhere('ts', f, params, { column: 'month' });
  if (f.side !== undefined) {
    // Stored lower-case; the anchor accepts BUY/SELL too, so the handler lower-cases before binding.
    where.push('side = $side');
    params.side = f.side;
  }
  if (f.tokens === undefined && f.outcome !== undefined) {
    where.push('outcome_index = $outcome');
    params.outcome = f.outcome;
  }
  return where;
}

/** One scan per (partition, token) of the plan, each over that partition's file alone and from its floor on. */
function plannedSource(lake: Lake, plan: PagePlan, params: Params, where: readonly string[], columns: string): string {
  // Nothing to read (the page lies past the last row); the filters stay so every bound value is used.
  if (plan.scans.length === 0) return `(SELECT ${columns} FROM ${lake.from('trades')} WHERE ${['false', ...where].join(' AND ')})`;
  const parts = plan.scans.map((s, i) => {
    params[`ptoken${i}`] = s.token;
    params[`pmonth${i}`] = s.month;
    const w = [`token_id = $ptoken${i}`, `month = $pmonth${i}`, ...where];
    if (s.floor !== null) {
      w.push(`ts >= $pfloor${i}`);
      params[`pfloor${i}`] = tsParam(s.floor);
    }
    const source = lake.partitions ? lake.partitions('trades', [s.month]) : lake.from('trades');
    return `SELECT ${columns} FROM ${source} WHERE ${w.join(' AND ')}`;
  });
  return `(${parts.join(' UNION ALL ')})`;
}

/** Rows of one token per hour in one partition's file (`source`), for the page plan; `side` narrows them. */
export function tradeHoursQuery(source: string, token: string, side: string | undefined): Query {
  const params: Params = { token };
  let where = 'token_id = $token';
  if (side !== undefined) {
    where += ' AND side = $side';
    params.side = side;
  }
  return query(`SELECT epoch_us(date_trunc('hour', ts)) AS hour, count(*) AS rows FROM ${source} WHERE ${where} GROUP BY 1`, params);
}

/** From this many rows skipped, a page is found on the narrow key columns first (see tradesPageQuery). */
export const DEEP_PAGE_OFFSET = 10_000;

/**
 * One API page of trades: the plain SELECT plus LIMIT/OFFSET. A deep page (offset ≥ DEEP_PAGE_OFFSET) is found
 * in two steps: the page's keys from the five narrow sort columns (the top-N sort then holds offset + limit
 * narrow rows instead of wide ones with hashes, addresses and token ids), then the page's full rows from a
 * second scan limited to the keys' time range (row groups outside it are skipped by their statistics) and
 * joined on (id, token_id). Same rows, same order, in less time and memory than one wide top-N. With `f.plan`
 * (src/query/trade-plan.ts) both forms read only the plan's (partition, token) scans from their floors, and the
 * plan's offset replaces the page's.
 */
export function tradesPageQuery(lake: Lake, f: TradeFilter, page: { limit: number; offset: number }, deepFrom = DEEP_PAGE_OFFSET): Query {
  if (f.plan) page = { limit: page.limit, offset: f.plan.offset };
  const base = tradesSelect(lake, f, 'desc');
  const pageParams = { limit: page.limit, offset: page.offset };
  if (page.offset < deepFrom) return query(`${base.sql}\nLIMIT $limit OFFSET $offset`, { ...base.params, ...pageParams });
  const params: Params = { ...pageParams };
  const keys = tradeSource(lake, f, params, [], 'id, token_id, ts, block_number, log_index');
  const rows = tradeSource(lake, f, params, ['ts >= (SELECT min(ts) FROM page_keys)', 'ts <= (SELECT max(ts) FROM page_keys)']);
  return query(
    `WITH page_keys AS MATERIALIZED (
  SELECT id, token_id, ts FROM ${keys} k
  ORDER BY ts DESC, block_number DESC, log_index DESC, id DESC
  LIMIT $limit OFFSET $offset
)
SELECT ${TRADE_COLUMNS}
FROM ${rows} t
WHERE (t.id, t.token_id) IN (SELECT (id, token_id) FROM page_keys)
ORDER BY ts DESC, block_number DESC, log_index DESC, id DESC`,
    params,
  );
}

/**
 * Newest trades across all markets. `sinceMonth` restricts the scan to the newest partitions (the handler
 * retries without it when they hold fewer rows than asked for).
 */
export function recentTradesQuery(lake: Lake, limit: number, sinceMonth: string | undefined): Query {
  const params: Params = { limit };
  let where = '';
  if (sinceMonth !== undefined) {
    where = '\nWHERE month >= $since_month';
    params.since_month = sinceMonth;
  }
  return query(
    `SELECT ${TRADE_COLUMNS}
FROM ${lake.from('trades')}${where}
ORDER BY ts DESC, block_number DESC, log_index DESC, id DESC
LIMIT $limit`,
    params,
  );
}
