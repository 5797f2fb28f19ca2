import type { AddressInfo } from 'node:net';
import { loadConfig } from '../src/config.js';
import { createLogger } from '../src/log.js';
import { createContext } from '../src/server.js';
import { createApp } from '../src/http/app.js';
import { routes } from '../src/http/routes.js';
import type { Route } from '../src/http/route.js';
import { marketOut } from '../src/http/markets/view.js';
import { listMarketsQuery } from '../src/query/markets.js';

/**
 * The markets-list-mixed baseline: pmlake as it answered `GET /v1/markets` before the list came from memory —
 * one DuckDB list query per request (listMarketsQuery, still the builder of the chart search), in the unbounded
 * 'cheap' class — with every other route as pmlake has it. Started as a child by bench/scenarios/markets-list.ts
 * with the environment of `pmlake serve`. It answers the list's filters but not series_id (the scenario sends none).
 */
const sqlList: Route['handler'] = async ({ query, res }, ctx) => {
  const q = query as Record<string, never>;
  if (q.series_id !== undefined) throw new Error('series_id is not served by the bench baseline');
  const rows = await ctx.lake.rows(
    listMarketsQuery(ctx.lake.sources, {
      active: q.active,
      closed: q.closed,
      resolved: q.resolved,
      search: q.search,
      category: q.category,
      hasData: q.has_data,
      dataType: q.data_type,
      endingAfter: q.ending_after,
      endingBefore: q.ending_before,
      sortBy: q.sort_by,
      limit: q.limit,
      offset: q.offset,
    }),
  );
  res.locals.rows = rows.length;
  return rows.map(marketOut);
};

const table = routes.map((r): Route => (r.method === 'get' && r.path === '/v1/markets' ? { ...r, cost: 'cheap', admission: 'gate', handler: sqlList } : r));
const config = loadConfig();
const ctx = await createContext(config, createLogger(config.logLevel));
const server = createApp(ctx, table).listen(config.port, config.host, () => {
  process.stdout.write(`markets-sql baseline listening on http://${config.host}:${(server.address() as AddressInfo).port}\n`);
});
process.once('SIGTERM', () => {
  server.closeAllConnections();
  server.close(() => process.exit(0));
});
