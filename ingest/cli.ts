import fs from 'node:fs';
import path from 'node:path';
import { loadConfig } from '../src/config.js';
import { createLogger } from '../src/log.js';
import { LakeLockedError, LakeLockUnavailableError } from './ledger.js';
import { runIngest } from './run.js';
import { ingestSummaryText, summarizeIssues } from './issues.js';
import { Follower } from './follow.js';
import { runUntilStopped } from '../src/commands/until-stopped.js';
import { dryRunIngest } from './dry-run.js';
import { dryRunTable } from './dry-run-table.js';
import { logProgress, type ProgressDisplay } from './progress.js';
import { terminalProgress } from './progress-tty.js';
import { QUEUE_USAGE, queueCommand, workerCommand } from './queue/cli.js';

export const USAGE = `usage: pmlake ingest [--progress-seconds=S] <file-or-dir>...
       pmlake ingest --dry-run <file-or-dir>...
       pmlake ingest --follow DIR...
${QUEUE_USAGE.replace('usage:', '      ')}  Progress goes to stderr: on a terminal one line redrawn in place (inputs done of total, bytes, level updates/s,
  elapsed, ETA, phase); elsewhere a pino line "ingest progress" every S seconds (default 10) with the same figures.
  The closing report is one JSON document on stdout.
  --dry-run lists what would land (per input: format, already ingested or not, bytes, hours covered, estimated
  rows) as JSON on stdout and a table on stderr, without taking the lake lock or writing anything.
`;

/**
 * `pmlake ingest <file-or-dir>...`: lands every input in $PMLAKE_LAKE and prints a JSON report on stdout
 * (progress, logs and the closing summary naming each issue go to stderr). Exit codes: 0 when at least one input was read or everything was already
 * ingested (malformed parts are reported as issues), 1 when nothing at all could be read, 2 for usage
 * errors, a lake locked by another running ingest, or a lock that could not be taken (PMLAKE_DATABASE_URL set
 * and PostgreSQL unreachable: nothing ingested).
 */
export async function ingestCommand(args: string[]): Promise<number> {
  if (args.includes('--follow')) return followCommand(args.filter((a) => a !== '--follow'));
  if (args.includes('--queue')) return queueCommand(args.filter((a) => a !== '--queue'));
  if (args.includes('--worker')) return workerCommand(args);
  const paths = args.filter((a) => !a.startsWith('--'));
  const everySeconds = Number(/^--progress-seconds=(.+)$/.exec(args.find((a) => a.startsWith('--progress-seconds=')) ?? '')?.[1] ?? 10);
  if (paths.length === 0 || args.includes('--help') || !(everySeconds > 0)) {
    process.stderr.write(USAGE);
    return 2;
  }
  const config = loadConfig();
  if (args.includes('--dry-run')) return dryRunCommand(paths, config);
  // On a terminal the log lines go through process.stderr, which the redrawn line wraps (ingest/progress-tty.ts).
  const tty = process.stderr.isTTY === true;
  const term = tty ? terminalProgress(process.stderr) : null;
  const log = createLogger(config.logLevel, tty ? process.stderr : undefined);
  const display: ProgressDisplay = term ?? logProgress(log, { everySeconds });
  try {
    const report = await runIngest(paths, {
      lakeDir: config.lakeDir,
      snapshotSeconds: config.snapshotSeconds,
      log,
      threads: config.duckdbThreads ?? 2,
      memoryLimit: config.duckdbMemory,
      onProgress: (p) => display.onProgress(p),
      memoryBudget: config.ingestMemory,
      graceSeconds: config.lakeGraceSeconds,
      compactSmallFiles: config.compactSmallFiles,
      databaseUrl: config.databaseUrl,
    });
    display.stop();
    // The last progress line is buffered by pino; it belongs before the summary written below.
    await new Promise<void>((resolve) => log.flush(() => resolve()));
    const MAX_ISSUES = 200;
    const out = {
      ...report,
      issues: report.issues.slice(0, MAX_ISSUES),
      issues_total: report.issues.length,
      issue_summary: summarizeIssues(report.issues).slice(0, MAX_ISSUES),
    };
    process.stdout.write(`${JSON.stringify(out, null, 2)}\n`);
    // For the person at the terminal (stdout stays one JSON document): each issue by file, what and count.
    process.stderr.write(ingestSummaryText('pmlake ingest', report));
    const nothingRead = report.ingested === 0 && report.skipped === 0;
    return nothingRead ? 1 : 0;
  } catch (err) {
    display.stop();
    if (err instanceof LakeLockedError || err instanceof LakeLockUnavailableError) {
      process.stderr.write(`${err.message}\n`);
      return 2;
    }
    throw err;
  }
}

/** `pmlake ingest --dry-run <file-or-dir>...`: ingest/dry-run.ts. Exit 1 when no input is one the ingest recognises. */
async function dryRunCommand(paths: string[], config: ReturnType<typeof loadConfig>): Promise<number> {
  const report = await dryRunIngest(paths, { lakeDir: config.lakeDir, threads: config.duckdbThreads ?? 2, memoryLimit: config.duckdbMemory });
  process.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
  process.stderr.write(dryRunTable(report));
  return report.inputs.some((i) => i.format !== null) ? 0 : 1;
}

/**
 * `pmlake ingest --follow DIR...`: lands every closed file of the directories, one lake version per cycle of
 * PMLAKE_FOLLOW_SECONDS (ingest/follow.ts), until SIGTERM or SIGINT: the cycle in progress finishes, then exit 0.
 * A failing cycle is logged and the next one retries; only a usage error (no directory, or one that does not
 * exist) ends it, with 2.
 */
async function followCommand(args: string[]): Promise<number> {
  const dirs = args.filter((a) => !a.startsWith('--'));
  const notDirs = dirs.filter((d) => !fs.statSync(d, { throwIfNoEntry: false })?.isDirectory());
  if (dirs.length === 0 || args.includes('--help') || notDirs.length > 0) {
    if (notDirs.length > 0) process.stderr.write(`not a directory: ${notDirs.join(', ')}\n`);
    process.stderr.write(USAGE);
    return 2;
  }
  const config = loadConfig();
  const log = createLogger(config.logLevel);
  const follower = await Follower.start({
    dirs: dirs.map((d) => path.resolve(d)),
    lakeDir: config.lakeDir,
    cycleSeconds: config.live.followSeconds,
    log,
    databaseUrl: config.databaseUrl,
    memoryLimit: config.duckdbMemory,
    memoryBudget: config.ingestMemory,
    threads: config.duckdbThreads ?? 2,
    snapshotSeconds: config.snapshotSeconds,
    graceSeconds: config.lakeGraceSeconds,
  });
  // One line for the operator (and for scripts waiting on the role to be up); the cycles log on stderr.
  process.stdout.write(`pmlake ingest --follow ${dirs.join(' ')} into ${config.lakeDir} every ${config.live.followSeconds} s\n`);
  return runUntilStopped(() => follower.stop());
}
