import { DuckDBInstance } from '@duckdb/node-api';
const db = await DuckDBInstance.create(':memory:'); const c = await db.connect();
await c.run("SET TimeZone='UTC'");
for (const sql of process.argv.slice(2)) {
  try { const r = await c.runAndReadAll(sql); console.log(JSON.stringify(r.getRowObjectsJson()).slice(0, 3000)); } catch (e) { console.log('ERR', (e as Error).message); }
}
