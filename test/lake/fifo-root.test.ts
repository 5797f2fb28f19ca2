import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { holdFifoRoot, startCopy, sweepDeadFifoRoots } from '../../src/lake/stream.js';
import { openLakeDb } from '../../src/lake/duckdb.js';

/**
 * The FIFO folder, the one place besides the lake where the service's DuckDB may write: private to the
 * process (mkdtemp name, mode 0700), removed when its last holder lets go, and swept when a killed process
 * left it behind.
 */
describe('the FIFO root', () => {
  it('is private (0700, unpredictable name), shared by holders, removed by the last release', async () => {
    const a = holdFifoRoot();
    const b = holdFifoRoot();
    expect(b.dir).toBe(a.dir);
    expect(path.dirname(a.dir)).toBe(os.tmpdir());
    expect(path.basename(a.dir)).toMatch(new RegExp(`^pmlake-fifo-${process.pid}-[A-Za-z0-9]{6}$`));
    expect(fs.statSync(a.dir).mode & 0o777).toBe(0o700);
    // A COPY leaves a spare FIFO next to the root: both go with the last release.
    const db = await openLakeDb({ allowedDirectories: [a.dir] });
    const copy = await startCopy(db, { sql: 'SELECT 1 AS x', params: {} }, 'csv');
    copy.stream.resume();
    await copy.done;
    db.closeSync();
    expect(fs.existsSync(`${a.dir}.spare`)).toBe(true);
    a.release();
    a.release(); // twice is once
    expect(fs.existsSync(a.dir)).toBe(true);
    b.release();
    expect(fs.existsSync(a.dir)).toBe(false);
    expect(fs.existsSync(`${a.dir}.spare`)).toBe(false);
    const c = holdFifoRoot();
    expect(c.dir).not.toBe(a.dir);
    c.release();
  });

  it('sweeps the folders of processes that no longer run, and only those', () => {
    const root = fs.mkdtempSync(path.join(os.tmpdir(), 'pmlake-sweep-test-'));
    try {
      const dead = spawnSync(process.execPath, ['-e', 'process.stdout.write(String(process.pid))'], { encoding: 'utf8' });
      const deadPid = Number(dead.stdout);
      expect(deadPid).toBeGreaterThan(0);
      const names = [
        `pmlake-fifo-${deadPid}-aB3dE9`,
        `pmlake-fifo-${deadPid}-aB3dE9.spare`,
        `pmlake-fifo-${process.ppid}-zz9zz9`,
        `pmlake-fifo-${process.pid}-mine01`,
        'pmlake-fifo-notapid',
        'other',
      ];
      for (const n of names) fs.mkdirSync(path.join(root, n));
      fs.writeFileSync(path.join(root, names[0]!, 'f'), '');
      expect(sweepDeadFifoRoots(root)).toBe(2);
      expect(fs.readdirSync(root).sort()).toEqual(names.slice(2).sort());
    } finally {
      fs.rmSync(root, { recursive: true, force: true });
    }
  });
});
