import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseRecordArgs } from '../../src/commands/record.js';

const REPO = path.resolve(import.meta.dirname, '../..');

describe('pmlake record arguments', () => {
  it('parses --out and a pinned --assets list', () => {
    expect(parseRecordArgs(['--out', 'cap'])).toEqual({ out: 'cap', assets: undefined });
    expect(parseRecordArgs(['--out', 'cap', '--assets', '123,456,123'])).toEqual({ out: 'cap', assets: ['123', '456'] });
  });

  it('refuses what it cannot use, saying why', () => {
    expect(parseRecordArgs([])).toBe('--out DIR is required');
    expect(parseRecordArgs(['--out', 'cap', '--assets', '1,,2'])).toMatch(/not a token id: ''/);
    expect(parseRecordArgs(['--out', 'cap', '--assets', 'a b'])).toMatch(/not a token id: 'a b'/);
    // A token id is a uint256 in decimal: letters, 79 digits and 2^256 are not; 2^256 - 1 is.
    expect(parseRecordArgs(['--out', 'cap', '--assets', 'abc'])).toMatch(/not a token id: 'abc'/);
    expect(parseRecordArgs(['--out', 'cap', '--assets', '1'.repeat(79)])).toMatch(/not a token id/);
    expect(parseRecordArgs(['--out', 'cap', '--assets', (2n ** 256n).toString()])).toMatch(/not a token id/);
    expect(parseRecordArgs(['--out', 'cap', '--assets', (2n ** 256n - 1n).toString()])).toEqual({ out: 'cap', assets: [(2n ** 256n - 1n).toString()] });
    expect(parseRecordArgs(['--out', 'cap', '--bogus'])).toMatch(/bogus/);
    expect(parseRecordArgs(['--out', 'cap', 'extra'])).toMatch(/extra/);
  });

  it('exits 2 with the message and the usage', () => {
    const r = spawnSync(process.execPath, ['--import', 'tsx', 'src/cli.ts', 'record', '--assets', '1'], { cwd: REPO, encoding: 'utf8' });
    expect(r.status).toBe(2);
    expect(r.stderr).toContain('pmlake record: --out DIR is required');
    expect(r.stderr).toContain('usage: pmlake record --out DIR');
  });

  it('exits 1 with one line when the capture directory cannot be made', () => {
    const file = path.join(REPO, 'package.json');
    const r = spawnSync(process.execPath, ['--import', 'tsx', 'src/cli.ts', 'record', '--out', `${file}/cap`, '--assets', '1'], {
      cwd: REPO,
      encoding: 'utf8',
      env: { ...process.env, PMLAKE_VENUE_WS_URL: 'ws://127.0.0.1:9' },
      timeout: 30_000,
    });
    expect(r.status).toBe(1);
    expect(r.stderr).toMatch(/^pmlake record: cannot use .*package\.json\/cap: ENOTDIR/m);
  });
});
