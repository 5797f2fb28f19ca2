import { runIngest } from '../ingest/run.js';
const r = await runIngest([process.argv[2]!], { lakeDir: process.argv[3]!, derived: false });
console.log(JSON.stringify({ s: r.seconds, p: r.phase_seconds, lu: r.level_updates_per_second }));
