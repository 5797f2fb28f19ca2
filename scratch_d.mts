import { DuckDBInstance } from '@duckdb/node-api';
import { ohlcvPageQuery } from './src/query/ohlcv.js';
import { lakeSources, runQuery } from './src/lake/runner.js';
import { timeframeOf } from './src/timeframe.js';
const inst = await DuckDBInstance.create(':memory:');
const q = ohlcvPageQuery(lakeSources('/tmp/dtest/lake'), { token: '326391818951271917399968973611993364828664658327815778899784687954596265638973', outcome: 0, timeframe: timeframeOf(3600) }, 3);
console.log(q.sql);
console.log(await runQuery(inst, q));
