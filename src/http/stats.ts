import type { DuckDBInstance, DuckDBValue } from '@duckdb/node-api';
import { datasetSource, hasFiles } from '../lake/runner.js';
import type { DatasetName } from '../lake/layout.js';
import { withConnection } from '../lake/duckdb.js';
import { StampedCache } from '../lake/stamp.js';
import { lakeVersion } from '../lake/versions.js';
import type { Route } from './route.js';

/**
 * GET /v1/stats: public aggregate statistics of the lake, cached per lake stamp (src/lake/stamp.ts: a new
 * ingest shows at once) and for at most a minute; concurrent misses share one computation. Counts come from
 * Parquet metadata and row-group statistics, so a miss stays cheap even on a large lake. Exempt from rate
 * limiting, like /health.
 */
const TTL_MS = 60_000;

type Stats = Record<string, unknown>;
const cache = new StampedCache<Stats>({ maxEntries: 16, maxAgeMs: TTL_MS });

async function scalarRow(db: DuckDBInstance, sql: string): Promise<Record<string, DuckDBValue>> {
  return withConnection(db, async (conn) => (await conn.runAndReadAll(sql)).getRowObjects()[0] ?? {});
}

const num = (v: DuckDBValue | undefined) => (v === null || v === undefined ? 0 : Number(v as number | bigint));
const iso = (ms: DuckDBValue | undefined) => (ms === null || ms === undefined ? null : new Date(Number(ms as number | bigint)).toISOString());

function from(lakeDir: string, name: DatasetName): string {
  return datasetSource(lakeDir, name);
}

export async function computeStats(db: DuckDBInstance, lakeDir: string): Promise<Stats> {
  const out: Stats = {
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
    // The version these figures describe (src/lake/versions.ts): the request's pinned one.
    lake_version: lakeVersion(lakeDir).version,
  };
  if (hasFiles(lakeDir, 'markets')) {
    const m = await scalarRow(
      db,
      `SELECT count(*) AS markets, count(*) FILTER (WHERE active AND NOT coalesce(closed, false)) AS active,
         count(*) FILTER (WHERE resolved) AS resolved, count(DISTINCT series_id) AS series,
         coalesce(sum(len(outcome_token_ids)), 0) AS tokens
       FROM ${from(lakeDir, 'markets')}`,
    );
    Object.assign(out, { markets: num(m.markets), active_markets: num(m.active), resolved_markets: num(m.resolved), series: num(m.series), tokens: num(m.tokens) });
  }
  if (hasFiles(lakeDir, 'trades')) {
    const t = await scalarRow(db, `SELECT count(*) AS n, epoch_ms(min(ts)) AS first, epoch_ms(max(ts)) AS last FROM ${from(lakeDir, 'trades')}`);
    Object.assign(out, { trades: num(t.n), data_from: iso(t.first), data_to: iso(t.last) });
  }
  if (hasFiles(lakeDir, 'book_snapshots')) {
    out.orderbook_snapshots = num((await scalarRow(db, `SELECT count(*) AS n FROM ${from(lakeDir, 'book_snapshots')}`)).n);
  }
  if (hasFiles(lakeDir, 'top_of_book')) {
    out.top_of_book_rows = num((await scalarRow(db, `SELECT count(*) AS n FROM ${from(lakeDir, 'top_of_book')}`)).n);
  }
  return out;
}

export const statsRoutes: Route[] = [
  {
    method: 'get',
    path: '/v1/stats',
    cost: 'cheap',
    auth: 'public',
    limit: 'none',
    tag: 'System',
    summary: 'Public aggregate statistics: markets, trades, tokens, data span (cached for a minute)',
    handler: async (_req, res, ctx) => {
      const now = Date.now();
      const { value: stats, at } = await cache.get(ctx.config.lakeDir, 'stats', () => computeStats(ctx.db, ctx.config.lakeDir));
      res.setHeader('Cache-Control', `public, max-age=${Math.max(0, Math.ceil((at + TTL_MS - now) / 1000))}`);
      return { ...stats, generated_at: new Date(at).toISOString(), cached_until: new Date(at + TTL_MS).toISOString() };
    },
  },
];
