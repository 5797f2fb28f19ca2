import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { currentVersion } from '../../src/lake/versions.js';
import type { RunningServer } from '../../src/server.js';
import { buildQueryLake, catalog, glob, type QueryLake } from '../helpers/query-lake.js';
import { startTestServer, tempDir, testConfig } from '../helpers/server.js';

/**
 * GET /v1/stats, every field: on a real ingested lake against figures computed in JavaScript from the rows
 * themselves, and on a lake with no file at all (zeros and nulls, version 0). The cache's behaviour across
 * ingests is in lake-stamp-cache.test.ts, the unversioned lake's figures in accounts-usage.test.ts.
 */
describe('GET /v1/stats', () => {
  let L: QueryLake;
  beforeAll(async () => {
    L = await buildQueryLake();
  });
  afterAll(async () => {
    await L?.close();
  });

  it('names the lake version and counts markets, series, tokens, trades, books and the data span', async () => {
    const r = await L.get('/v1/stats', { key: null });
    expect(r.status).toBe(200);
    const markets = await L.rows(`SELECT active, closed, resolved, series_id, outcome_token_ids FROM read_parquet(${catalog(L.lakeDir, 'markets')})`);
    const trades = (await L.rows(`SELECT epoch_ms(ts) AS ms FROM read_parquet(${glob(L.lakeDir, 'trades')})`)).map((t) => Number(t.ms));
    const count = async (dir: string) => Number((await L.rows(`SELECT count(*) AS n FROM read_parquet(${glob(L.lakeDir, dir)})`))[0]!.n);
    const series = new Set(markets.map((m) => m.series_id).filter((s) => s !== null));
    const expected = {
      markets: markets.length,
      active_markets: markets.filter((m) => m.active === true && m.closed !== true).length,
      resolved_markets: markets.filter((m) => m.resolved === true).length,
      series: series.size,
      tokens: markets.reduce((s, m) => s + ((m.outcome_token_ids as unknown[] | null)?.length ?? 0), 0),
      trades: trades.length,
      orderbook_snapshots: await count('book_snapshots'),
      top_of_book_rows: await count('top_of_book'),
      data_from: new Date(Math.min(...trades)).toISOString(),
      data_to: new Date(Math.max(...trades)).toISOString(),
      lake_version: currentVersion(L.lakeDir).version,
    };
    const { generated_at, cached_until, ...figures } = r.body;
    expect(figures).toEqual(expected);
    // The checks have teeth: every count is there to be wrong.
    for (const k of ['markets', 'active_markets', 'series', 'tokens', 'trades', 'orderbook_snapshots', 'top_of_book_rows', 'lake_version'] as const) {
      expect(expected[k], k).toBeGreaterThan(0);
    }
    expect(Date.parse(cached_until) - Date.parse(generated_at)).toBe(60_000);
    const maxAge = Number(/^public, max-age=(\d+)$/.exec(r.headers.get('cache-control') ?? '')?.[1]);
    expect(maxAge).toBeGreaterThanOrEqual(0);
    // 61 on a fresh computation: the handler reads the clock before the cache stamps the entry (kept as it was).
    expect(maxAge).toBeLessThanOrEqual(61);
    expect(Object.keys(r.body)).toEqual([
      'markets',
      'active_markets',
      'resolved_markets',
      'series',
      'tokens',
      'trades',
      'orderbook_snapshots',
      'top_of_book_rows',
      'data_from',
      'data_to',
      'lake_version',
      'generated_at',
      'cached_until',
    ]);
  });

  it('a lake with no file answers zeros and nulls', async () => {
    const tmp = tempDir('pmlake-stats-empty-');
    fs.mkdirSync(path.join(tmp.dir, 'lake'));
    let srv: RunningServer | undefined;
    try {
      srv = await startTestServer(testConfig({ PMLAKE_LAKE: path.join(tmp.dir, 'lake'), PMLAKE_STATE: path.join(tmp.dir, 'state') }));
      const res = await fetch(`${srv.url}/v1/stats`);
      expect(res.status).toBe(200);
      const { generated_at, cached_until, ...figures } = (await res.json()) as Record<string, unknown>;
      expect(typeof generated_at).toBe('string');
      expect(typeof cached_until).toBe('string');
      expect(figures).toEqual({
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
        lake_version: 0,
      });
    } finally {
      await srv?.close();
      tmp.cleanup();
    }
  });
});
