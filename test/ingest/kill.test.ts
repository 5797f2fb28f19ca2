import fs from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { datasetRows, datasetsOf, listing, runCli } from './lakeutil.js';
import { lakeRows, tempDir } from './oracle.js';

const FIX = path.resolve('test/fixtures/venue');
const tmp = tempDir('pmlake-kill-');
afterAll(() => tmp.cleanup());

describe('an ingest killed midway', () => {
  it('leaves no partial file, and a re-run produces the same lake as an uninterrupted run', async () => {
    const inputs = [path.join(FIX, 'ws'), path.join(FIX, 'rest')];
    const killed = path.join(tmp.dir, 'killed');
    const clean = path.join(tmp.dir, 'clean');

    // The test hook pauses after each data set's partitions are renamed into place and says so on stderr;
    // SIGKILL arrives after l2 is written and before raw, the derived sets, the catalogue and the ledger.
    let sent = false;
    const run = await runCli(['ingest', ...inputs], { PMLAKE_LAKE: killed, PMLAKE_TEST_PAUSE_BETWEEN_MERGES_MS: '2000' }, (err, kill) => {
      if (!sent && err.includes('pmlake-test: merged l2')) {
        sent = true;
        kill();
      }
    });
    expect(run.signal).toBe('SIGKILL');
    const files = Object.keys(listing(killed));
    expect(files.filter((f) => f.includes('.tmp-'))).toEqual([]);
    expect(files.some((f) => f.startsWith('l2/'))).toBe(true);
    expect(files.some((f) => f.startsWith('top_of_book/'))).toBe(false);
    expect(fs.existsSync(path.join(killed, '_ingest', 'ledger.jsonl'))).toBe(false);
    // Every file that is visible is complete and readable.
    for (const f of files.filter((x) => x.endsWith('.parquet'))) {
      const n = await lakeRows(`SELECT count(*) AS n FROM read_parquet('${path.join(killed, f)}')`);
      expect(Number(n[0]!.n)).toBeGreaterThan(0);
    }

    // The stale lock (a dead pid) is taken over; the re-run completes the lake.
    const rerun = await runCli(['ingest', ...inputs], { PMLAKE_LAKE: killed });
    expect(rerun.code, rerun.stderr).toBe(0);
    const full = await runCli(['ingest', ...inputs], { PMLAKE_LAKE: clean });
    expect(full.code, full.stderr).toBe(0);

    const a = datasetsOf(killed);
    const b = datasetsOf(clean);
    expect([...a.keys()].sort()).toEqual([...b.keys()].sort());
    expect(a.size).toBeGreaterThanOrEqual(5);
    for (const [ds, list] of b) {
      const [ra, rb] = [await datasetRows(a.get(ds)!), await datasetRows(list)];
      expect(ra.length, ds).toBe(rb.length);
      expect(ra, ds).toEqual(rb);
    }
  });
});
