import { generate } from './ingest/generate/index.js';
import { runIngest } from './ingest/run.js';
const t0 = performance.now();
const g = await generate({ markets: 12, days: 30, seed: 11, out: '/tmp/dtest/pgen', workers: 1, rate: 3, busy: 1 });
console.log('gen', (performance.now() - t0) | 0, JSON.stringify(g.counts));
const t1 = performance.now();
const r = await runIngest(['/tmp/dtest/pgen'], { lakeDir: '/tmp/dtest/plake', threads: 2 });
console.log('ingest', (performance.now() - t1) | 0, JSON.stringify(r.rows_added));
