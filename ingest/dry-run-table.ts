import path from 'node:path';
import type { DryRunReport } from './dry-run.js';

/** A handler's name without its parenthesised list of layouts (the JSON document has it whole). */
const shortName = (format: string): string => format.replace(/ \(.*$/, '');

/** The dry run for the person at the terminal (stderr; stdout stays the JSON document): one row per input, then totals. */
export function dryRunTable(report: DryRunReport): string {
  const hour = (iso: string | null): string => (iso === null ? '–' : `${iso.slice(0, 13).replace('T', ' ')}h`);
  const rows = (n: number | null, estimated: boolean): string => (n === null ? '–' : `${estimated ? '~' : ''}${n.toLocaleString('en-US')}`);
  const cols = ['would', 'format', 'bytes', 'from (UTC)', 'to (UTC)', 'hours', 'rows', 'input'];
  const cwd = process.cwd();
  const lines = report.inputs.map((i) => [
    i.would.replace('_', ' '),
    i.format === null ? 'not recognised' : shortName(i.format),
    i.bytes.toLocaleString('en-US'),
    hour(i.from),
    hour(i.to),
    i.hours === null ? '–' : String(i.hours),
    i.survey_error !== undefined ? `survey failed: ${i.survey_error}` : rows(i.rows, i.estimated),
    i.path.startsWith(`${cwd}${path.sep}`) ? path.relative(cwd, i.path) : i.path,
  ]);
  const width = cols.map((c, k) => Math.max(c.length, ...lines.map((l) => (k === cols.length - 1 ? 0 : l[k]!.length))));
  const fmt = (l: string[]): string => l.map((v, k) => (k === l.length - 1 ? v : v.padEnd(width[k]!))).join('  ');
  const t = report.totals;
  const w = report.would;
  const out = [
    `pmlake ingest --dry-run: nothing was written to ${report.lake}`,
    fmt(cols),
    ...lines.map(fmt),
    '',
    `would land ${t.inputs} input(s), ${t.bytes.toLocaleString('en-US')} bytes, ${t.hours} hour(s) from ${hour(t.from)} to ${hour(t.to)}, ${rows(t.rows, t.estimated)} rows` +
      ` (~ estimated); already ingested ${w.in_ledger}, duplicates ${w.duplicate}, not recognised ${w.not_recognised}` +
      (report.missing.length > 0 ? `, missing ${report.missing.length}` : ''),
    ...Object.entries(t.by_format).map(
      ([f, b]) => `  ${shortName(f)}: ${b.inputs} input(s), ${b.bytes.toLocaleString('en-US')} bytes, ${b.hours} hour(s), ${rows(b.rows, b.estimated)} rows`,
    ),
  ];
  return `${out.join('\n')}\n`;
}
