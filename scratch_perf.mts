import { DuckDBInstance } from '@duckdb/node-api';
import { startTestServer, testConfig, createTestKey } from './test/helpers/server.js';
const lake = '/tmp/dtest/plake';
const srv = await startTestServer(testConfig({ PMLAKE_LAKE: lake, PMLAKE_STATE: '/tmp/dtest/pstate' + Date.now() }));
const keys = Array.from({ length: 20 }, (_, i) => createTestKey(srv, { name: 'k' + i }));
let ki = 0;
const db = await DuckDBInstance.create(':memory:', { threads: '2', memory_limit: '4GB' });
const src = (n: string) => `read_parquet('${lake}/${n}/*/*.parquet', hive_partitioning = true)`;
const toks = ['52557168465292562026074048203825511289461560206808395644752424009110828395205', '995932833167293693014270629969640196812435374244223161455545194768889611283078'];
const time = async (label: string, f: () => Promise<unknown>, n = 9) => {
  await f(); const ts: number[] = [];
  for (let i = 0; i < n; i++) { const t0 = performance.now(); await f(); ts.push(performance.now() - t0); }
  ts.sort((a, b) => a - b); console.log(label.padEnd(32), 'median', ts[n >> 1]!.toFixed(1), 'ms');
};
const http = (p: string) => async () => { const r = await fetch(srv.url + p, { headers: { 'x-api-key': keys[ki++ % keys.length]! } }); const t = await r.text(); if (r.status !== 200) throw new Error(r.status + t.slice(0, 200)); return t.length; };
const base = (sql: string, p: any = {}) => async () => { const c = await db.connect(); try { return (await c.runAndReadAll(sql, p)).getRows().length; } finally { c.closeSync(); } };
const COLS = `id, token_id, condition_id, ts, block_number, transaction_hash, log_index, outcome_index, outcome_label, side, price, size, usd_value, maker, taker, fee, collateral`;
const union = toks.map((_, i) => `SELECT ${COLS} FROM ${src('trades')} WHERE token_id = $t${i}`).join(' UNION ALL ');
for (const off of [83750, 40000]) {
await time(`pmlake trades page off ${off}`, http(`/v1/trades?market_id=508282&limit=10000&offset=${off}`));
await time(`duckdb trades page off ${off}`, base(`SELECT * FROM (${union}) ORDER BY ts DESC, block_number DESC, log_index DESC, id DESC LIMIT 10000 OFFSET ${off}`, { t0: toks[0], t1: toks[1] }));
}
await time('pmlake ohlcv 1h', http(`/v1/trades/ohlcv?market_id=508282&timeframe=1h&limit=10000`), 21);
await time('duckdb c1m 1h', base(`SELECT time_bucket(INTERVAL '3600 seconds', bucket, TIMESTAMP '1970-01-01') AS t, arg_min(open, bucket), max(high), min(low), arg_max(close, bucket), sum(volume), sum(trade_count) FROM ${src('candles_1m')} WHERE token_id = $tok GROUP BY 1 ORDER BY 1 LIMIT 10000`, { tok: toks[0] }), 21);
await time('pmlake ohlcv 7m', http(`/v1/trades/ohlcv?market_id=508282&timeframe=7m&limit=10000`));
await time('duckdb raw 7m', base(`SELECT time_bucket(INTERVAL '420 seconds', ts, TIMESTAMP '1970-01-01') AS t, arg_min(price, (ts, log_index)), max(price), min(price), arg_max(price, (ts, log_index)), sum(size), count(*) FROM ${src('trades')} WHERE token_id = $tok GROUP BY 1 ORDER BY 1 LIMIT 10000`, { tok: toks[0] }));
await time('pmlake ohlcv 30s', http(`/v1/trades/ohlcv?market_id=508282&timeframe=30s&limit=10000`));
await time('pmlake book at', http(`/v1/orderbook/snapshot?market_id=508282&at=2025-09-10T12:34:56Z`));
await time('pmlake estimate', async () => (await fetch(srv.url + '/v1/markets/508282/estimate', { method: 'POST', body: '{}', headers: { 'x-api-key': keys[ki++ % 20]!, 'content-type': 'application/json' } })).text());
await time('pmlake recent', http(`/v1/trades/recent?limit=100`));
await srv.close();
