import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DuckDBInstance } from '@duckdb/node-api';
import { generate } from '../../sim/generate/index.js';
import { currentVersion } from '../../src/lake/versions.js';
import { tempDir } from '../helpers/server.js';
import { lakeContent } from '../helpers/lake-content.js';

/**
 * A bounded ingest: the real `pmlake ingest` as a child process under PMLAKE_INGEST_MEMORY, its peak resident set
 * read from /proc (VmHWM) when it exits. The input is larger than the budget in memory (the same input ingested
 * with the default budget peaks above it); under the budget it must land in pieces, stay below it, and build the
 * same lake: rows and an order-independent content hash per data set, computed here from the Parquet files.
 */

const REPO = path.resolve(import.meta.dirname, '../..');
const tmp = tempDir('pmlake-memory-');
const LIMIT = 768 * 2 ** 20;
let inputs: string[] = [];
let db: DuckDBInstance;
let generated: { level_updates: number; trades: number };

type Run = { code: number | null; peak: number; report: { batches: number; failed: number; counts: Record<string, number> } };

/** Runs `pmlake ingest` into `lake` and reads the child's VmHWM just before it is reaped (polled until exit). */
function ingestChild(lake: string, env: Record<string, string>): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', path.join(REPO, 'src/cli.ts'), 'ingest', ...inputs], {
      cwd: REPO,
      env: { ...process.env, PMLAKE_LAKE: lake, LOG_LEVEL: 'warn', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    let peak = 0;
    // VmHWM only grows; reading it often keeps the last value seen before the process is gone.
    const timer = setInterval(() => {
      try {
        const m = /^VmHWM:\s+(\d+) kB/m.exec(fs.readFileSync(`/proc/${child.pid}/status`, 'utf8'));
        if (m) peak = Math.max(peak, Number(m[1]) * 1024);
      } catch {
        // exited between two reads
      }
    }, 20);
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (err += d.toString()));
    child.on('error', reject);
    child.on('exit', (code) => {
      clearInterval(timer);
      try {
        resolve({ code, peak, report: JSON.parse(out) as Run['report'] });
      } catch {
        reject(new Error(`ingest exited ${code}: ${err.slice(-2000)}`));
      }
    });
  });
}

beforeAll(async () => {
  db = await DuckDBInstance.create(':memory:', { threads: '1' });
  const out = path.join(tmp.dir, 'gen');
  const g = await generate({ markets: 200, days: 2, seed: 27, out, workers: 0 });
  generated = { level_updates: g.counts.level_updates, trades: g.counts.trades };
  inputs = ['markets', 'fills', 'ws'].map((d) => path.join(out, d));
});

afterAll(() => {
  db?.closeSync();
  tmp.cleanup();
});

describe('ingest memory budget', () => {
  it('lands a batch larger than the budget in pieces under it, with the lake one unbounded run builds', async () => {
    // Both at once (two processes, each peak its own): the test takes the time of the slower one.
    const [whole, bounded] = await Promise.all([
      ingestChild(path.join(tmp.dir, 'whole'), {}),
      ingestChild(path.join(tmp.dir, 'bounded'), { PMLAKE_INGEST_MEMORY: `${LIMIT / 2 ** 20}MiB` }),
    ]);
    expect(whole.code).toBe(0);
    expect(whole.report.batches).toBe(1);
    // The input does not fit: held whole, it takes more than the budget.
    expect(whole.peak).toBeGreaterThan(LIMIT * 1.2);

    expect(bounded.code).toBe(0);
    expect(bounded.report.failed).toBe(0);
    expect(bounded.report.batches).toBeGreaterThan(2);
    expect(bounded.peak).toBeLessThan(LIMIT);

    const a = await lakeContent(db, currentVersion(path.join(tmp.dir, 'whole')));
    const b = await lakeContent(db, currentVersion(path.join(tmp.dir, 'bounded')));
    // What the generator wrote, all of it landed: every level update one l2 row, every match's maker fills trades.
    expect(Number(a.l2!.split(':')[0])).toBe(generated.level_updates);
    expect(Number(a.trades!.split(':')[0])).toBe(generated.trades);
    expect(Number(a.book_snapshots!.split(':')[0])).toBeGreaterThan(0);
    // Every data set, incidents included: where the batches are cut changes no row.
    expect(b).toEqual(a);
  }, 120_000);
});
