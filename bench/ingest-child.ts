import { runIngest } from '../ingest/run.js';
import { createLogger } from '../src/log.js';

/**
 * The pmlake side of ingest-ws, in its own process so its peak memory is its own: `runIngest` of the given
 * files into a fresh lake, timed around the call only (not Node or module start-up). Prints one JSON line.
 * usage: node --import tsx bench/ingest-child.ts <lakeDir> <file>...
 */
const [lakeDir, ...files] = process.argv.slice(2);
if (!lakeDir || files.length === 0) {
  process.stderr.write('usage: ingest-child.ts <lakeDir> <file>...\n');
  process.exit(2);
}
const t0 = process.hrtime.bigint();
const report = await runIngest(files, { lakeDir, threads: 2, log: createLogger(process.env.LOG_LEVEL ?? 'warn') });
const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
process.stdout.write(
  `${JSON.stringify({ seconds, level_updates: report.counts.level_updates ?? 0, failed: report.failed, issues: report.issues.length, rows_added: report.rows_added, phase_seconds: report.phase_seconds })}\n`,
);
