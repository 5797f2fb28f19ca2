import { generate } from './ingest/generate/index.js';
import { runIngest } from './ingest/run.js';
await generate({ markets: 6, days: 3, seed: 7, out: '/tmp/dtest/gen2', workers: 0, rate: 0.3 });
const r = await runIngest(['/tmp/dtest/gen2', 'test/fixtures/venue'], { lakeDir: '/tmp/dtest/lake2', threads: 2 });
console.log(JSON.stringify(r.rows_added), JSON.stringify(r.issues.slice(0,5)), r.failed);
