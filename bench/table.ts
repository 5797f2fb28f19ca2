import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { ScenarioRow } from './runner.js';
import { fmtBytes, fmtCount, fmtNumber, fmtSeconds } from './stats.js';

/** The results table (stdout and README) and the JSON record written to bench/results/latest.json. */

export type MachineInfo = { cpu: string; cores: number; memoryGiB: number; node: string; duckdb: string; os: string };

export function machineInfo(duckdbVersion: string): MachineInfo {
  const cpus = os.cpus();
  return {
    cpu: cpus[0]?.model.trim() ?? 'unknown',
    cores: cpus.length,
    memoryGiB: Math.round(os.totalmem() / 2 ** 30),
    node: process.version,
    duckdb: duckdbVersion,
    os: `${os.type()} ${os.release()}`,
  };
}

function targetCell(r: ScenarioRow): string {
  if (r.status !== 'ok') return `${r.status}: ${r.reason ?? ''}`;
  if (r.targets.length === 0) return '';
  return r.targets.map((t) => `${t.met === null ? '?' : t.met ? 'MET' : 'MISSED'} ${t.text}`).join('; ');
}

export function tableRows(rows: ScenarioRow[]): string[][] {
  const head = ['scenario', 'rows', 'pmlake s', 'baseline s', 'ratio', 'MB/s', 'peak RSS', 'targets'];
  const body = rows.map((r) => {
    const http = r.scenario.startsWith('http-small');
    return [
      r.scenario,
      fmtCount(r.rows),
      http ? `${fmtNumber(r.pmlake?.extra?.rps, 0)} req/s` : fmtSeconds(r.pmlake?.seconds),
      http ? `${fmtNumber(r.baseline?.extra?.rps, 0)} req/s` : fmtSeconds(r.baseline?.seconds),
      r.ratio !== undefined && Number.isFinite(r.ratio) ? `${r.ratio.toFixed(r.ratio >= 10 ? 1 : 2)}×` : '-',
      r.pmlake?.mbPerSec !== undefined && Number.isFinite(r.pmlake.mbPerSec) ? fmtNumber(r.pmlake.mbPerSec, 0) : '-',
      fmtBytes(r.pmlake?.peakRss),
      targetCell(r),
    ];
  });
  return [head, ...body];
}

export function renderText(rows: ScenarioRow[]): string {
  const t = tableRows(rows);
  const widths = t[0]!.map((_, c) => Math.max(...t.map((r) => r[c]!.length)));
  const line = (r: string[]): string =>
    r
      .map((v, c) => (c === 0 || c === r.length - 1 ? v.padEnd(widths[c]!) : v.padStart(widths[c]!)))
      .join('  ')
      .trimEnd();
  return [line(t[0]!), widths.map((w) => '-'.repeat(w)).join('  '), ...t.slice(1).map(line)].join('\n');
}

export function renderMarkdown(rows: ScenarioRow[]): string {
  const t = tableRows(rows);
  const esc = (s: string): string => s.replaceAll('|', '\\|');
  return [
    `| ${t[0]!.join(' | ')} |`,
    `|${t[0]!.map((_, i) => (i === 0 || i === t[0]!.length - 1 ? '---' : '---:')).join('|')}|`,
    ...t.slice(1).map((r) => `| ${r.map(esc).join(' | ')} |`),
  ].join('\n');
}

export function writeResults(file: string, record: unknown): void {
  fs.mkdirSync(path.dirname(file), { recursive: true });
  const tmp = `${file}.tmp`;
  fs.writeFileSync(tmp, `${JSON.stringify(record, (_k, v: unknown) => (typeof v === 'number' && !Number.isFinite(v) ? null : v), 2)}\n`);
  fs.renameSync(tmp, file);
}
