import path from 'node:path';
import type { IngestIssue } from './types.js';

/**
 * An ingest's issues as a person reads them: one entry per file and kind of problem (a file with 500 bad
 * fills is one entry counting 500, with its first lines), in the order they were met. The JSON report carries
 * the entries (`issue_summary`); `pmlake ingest` and `make demo` print them under their summary line.
 */
export type IssueSummary = { file: string; what: string; count: number; lines: number[] };

const LINES_SHOWN = 5;

export function summarizeIssues(issues: readonly IngestIssue[]): IssueSummary[] {
  const groups = new Map<string, IssueSummary>();
  for (const i of issues) {
    const key = `${i.file}\u0000${i.message}`;
    let g = groups.get(key);
    if (!g) groups.set(key, (g = { file: i.file, what: i.message, count: 0, lines: [] }));
    g.count += i.count ?? 1;
    if (i.line !== undefined && g.lines.length < LINES_SHOWN) g.lines.push(i.line);
  }
  return [...groups.values()];
}

/**
 * The summary line and one line per entry: `  <file>: <what> (count N; lines 2, 9, …)`, the file relative to
 * the working directory when it lies inside it.
 */
export function ingestSummaryText(
  prefix: string,
  report: { ingested: number; skipped: number; seconds: number; issues: readonly IngestIssue[] },
  cwd: string = process.cwd(),
): string {
  const entries = summarizeIssues(report.issues);
  const head = `${prefix}: ${report.ingested} files landed, ${report.skipped} already in the lake, ${entries.length} ${entries.length === 1 ? 'issue' : 'issues'}, ${report.seconds.toFixed(1)} s`;
  const lines = entries.map((e) => {
    const rel = path.relative(cwd, e.file);
    const file = rel && !rel.startsWith('..') && !path.isAbsolute(rel) ? rel : e.file;
    const where = e.lines.length === 0 ? '' : `; ${e.lines.length === 1 ? 'line' : 'lines'} ${e.lines.join(', ')}${e.count > e.lines.length ? ', …' : ''}`;
    return `  ${file}: ${e.what} (count ${e.count}${where})`;
  });
  return [head + (entries.length ? ':' : ''), ...lines].join('\n') + '\n';
}
