import { openLakeDb } from './src/lake/duckdb.js';
import { lakeSources, runOne, runJsonArray } from './src/lake/runner.js';
import { tradesPageKeysQuery, tradesBetweenQuery, tradesPageQuery } from './src/query/trades.js';
const db = await openLakeDb({ allowedDirectories: ['/tmp/dtest/plake'], threads: 2 });
const L = lakeSources('/tmp/dtest/plake');
const f = { tokens: ['52557168465292562026074048203825511289461560206808395644752424009110828395205', '995932833167293693014270629969640196812435374244223161455545194768889611283078'] };
const time = async (label: string, fn: () => Promise<unknown>, n = 9) => {
  await fn(); const ts: number[] = [];
  for (let i = 0; i < n; i++) { const t0 = performance.now(); await fn(); ts.push(performance.now() - t0); }
  ts.sort((a, b) => a - b); console.log(label.padEnd(32), ts[n >> 1]!.toFixed(1), 'ms');
};
const kq = tradesPageKeysQuery(L, f, { limit: 10000, offset: 83750 });
const k = await runOne(db, kq);
await time('keys', () => runOne(db, kq));
await time('between json', () => runJsonArray(db, tradesBetweenQuery(L, f, k!.lo as any, k!.hi as any), { timestamps: ['timestamp'] }));
await time('direct json', () => runJsonArray(db, tradesPageQuery(L, f, { limit: 10000, offset: 83750 }), { timestamps: ['timestamp'] }));
const c = await db.connect();
const slim = kq.sql.replace(/SELECT max\(k\)[\s\S]*$/, 'SELECT count(*) FROM p');
await time('keys count only', async () => (await c.runAndReadAll(slim, kq.params as any)).getRows());
const slim2 = kq.sql.replace(`{'us': epoch_us(ts), 'b': coalesce(block_number, -1), 'l': coalesce(log_index, -1), 'id': id} AS k`, 'ts AS k');
await time('keys ts only', async () => (await c.runAndReadAll(slim2, kq.params as any)).getRows());
