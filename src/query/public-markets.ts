import type { Query } from '../lake/duckdb.js';
import type { Lake } from '../lake/sources.js';
import { MARKET_COLUMNS } from './markets.js';
import { query, type Params } from './common.js';

/**
 * The anchor's curated public index (GET /v1/public/markets): only markets with volume and data are eligible
 * (`volume > 0 AND (trade_count > 0 OR orderbook_count > 0)`, as the anchor's client documents), ordered by
 * volume, most first; ties by id so pages are stable.
 */
export const PUBLIC_ELIGIBLE = 'volume > 0 AND (trade_count > 0 OR orderbook_count > 0)';

export function publicMarketsQuery(lake: Lake, f: { resolved?: boolean | undefined; limit: number; offset: number }): Query {
  const params: Params = { limit: f.limit, offset: f.offset };
  const where = [PUBLIC_ELIGIBLE];
  if (f.resolved !== undefined) {
    where.push('coalesce(resolved, false) = $resolved');
    params.resolved = f.resolved;
  }
  return query(
    `SELECT ${MARKET_COLUMNS}
FROM ${lake.from('markets')}
WHERE ${where.join(' AND ')}
ORDER BY volume DESC, id
LIMIT $limit OFFSET $offset`,
    params,
  );
}
