import type { Query } from '../lake/duckdb.js';
import type { Lake } from '../lake/runner.js';
import { perToken, query, windowWhere, type Params, type Window } from './common.js';

/** Trade rows as the API shows them: the token id in market_id (the spec's second meaning of market_id). */
export const TRADE_COLUMNS = `id, token_id AS market_id, ts AS "timestamp", block_number, transaction_hash,
  outcome_index AS outcome, outcome_label, side, price, size, usd_value, maker, taker, fee, collateral`;

const SCAN_COLUMNS = 'id, token_id, ts, block_number, transaction_hash, log_index, outcome_index, outcome_label, side, price, size, usd_value, maker, taker, fee, collateral';

export type TradeFilter = Window & {
  /** Tokens to read; undefined = every market (then `outcome` filters on the rows' outcome index). */
  tokens?: readonly string[] | undefined;
  outcome?: number | undefined;
  side?: 'buy' | 'sell' | undefined;
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

/** The filtered trade rows (one scan per token when tokens are given), extra conditions pushed into each scan. */
function tradeSource(lake: Lake, f: TradeFilter, params: Params, extra: readonly string[]): string {
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
  where.push(...extra);
  return f.tokens === undefined
    ? `(SELECT ${SCAN_COLUMNS} FROM ${lake.from('trades')}${where.length ? ` WHERE ${where.join(' AND ')}` : ''})`
    : perToken(lake.from('trades'), 'token_id', f.tokens, SCAN_COLUMNS, where, params);
}

/** One API page of trades: the plain SELECT plus LIMIT/OFFSET. */
export function tradesPageQuery(lake: Lake, f: TradeFilter, page: { limit: number; offset: number }): Query {
  const base = tradesSelect(lake, f, 'desc');
  return query(`${base.sql}\nLIMIT $limit OFFSET $offset`, { ...base.params, limit: page.limit, offset: page.offset });
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
