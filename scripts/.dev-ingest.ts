import { runIngest } from '../ingest/run.js';
const [lake, ...paths] = process.argv.slice(2);
const r = await runIngest(paths, { lakeDir: lake!, derived: process.env.DERIVED === '1' });
console.log(JSON.stringify(r, null, 1));
