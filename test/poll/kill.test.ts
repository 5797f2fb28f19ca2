import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { syntheticMarkets } from '../../sim/simulate/venue.js';
import { tempDir, waitFor } from '../helpers/capture-files.js';
import { catalogueVenue, closedPolls, conditionIds, openPolls, readPoll, recordsOf, sortedCopy } from './poll-helpers.js';

const REPO = path.resolve(import.meta.dirname, '../..');
const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

type Run = { exited: Promise<number | null>; kill: (s: NodeJS.Signals) => void; stdout: () => string; stderr: () => string };

function catalogueRole(args: string[], gammaUrl: string, clobUrl: string): Run {
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/cli.ts', 'catalogue', ...args], {
    cwd: REPO,
    env: {
      ...process.env,
      PMLAKE_GAMMA_URL: gammaUrl,
      PMLAKE_CLOB_URL: clobUrl,
      PMLAKE_CATALOGUE_SECONDS: '3600',
      PMLAKE_RECORDER_ID: 'killme',
      LOG_LEVEL: 'info',
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr.on('data', (d: Buffer) => (err += d.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  cleanups.push(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  });
  return { exited, kill: (s) => child.kill(s), stdout: () => out, stderr: () => err };
}

/** A venue whose CLOB page 0 is held until `release()`: a poll in progress, its Gamma pages already written. */
async function heldVenue() {
  const markets = syntheticMarkets(30, 21);
  const v = await catalogueVenue({ markets, seed: 5 });
  cleanups.push(() => v.venue.close());
  let release!: () => void;
  const gate = new Promise<void>((r) => (release = r));
  let held = 0;
  v.catalogue.onPageServed = async (endpoint) => {
    if (endpoint !== 'clob_markets') return;
    held++;
    await gate;
  };
  cleanups.push(() => release());
  return { ...v, markets, release: () => release(), held: () => held };
}

const openHasPages = (dir: string): boolean => {
  const [open] = openPolls(dir);
  return open !== undefined && fs.readFileSync(path.join(dir, open), 'utf8').includes('"endpoint":"gamma_events"');
};

describe('pmlake catalogue as a process', () => {
  it('kill -9 mid-poll leaves its open file; the next start removes it and writes a complete poll', async () => {
    const v = await heldVenue();
    const dir = tempDir('poll-kill');
    const first = catalogueRole(['--out', dir], v.gammaUrl, v.clobUrl);
    await waitFor('the poll held at its CLOB page', () => v.held() > 0 && openHasPages(dir), 30_000);
    expect(first.stdout()).toBe(`pmlake catalogue: polling ${v.gammaUrl} and ${v.clobUrl} every 3600 s into ${dir}\n`);
    first.kill('SIGKILL');
    await first.exited;
    expect(openPolls(dir)).toEqual(['.open-catalogue-killme.jsonl']);
    expect(closedPolls(dir)).toEqual([]);

    v.release();
    const second = catalogueRole(['--out', dir, '--once'], v.gammaUrl, v.clobUrl);
    expect(await second.exited).toBe(0);
    expect(second.stderr()).toContain('removed the unfinished poll');
    expect(openPolls(dir)).toEqual([]);
    const polls = closedPolls(dir);
    expect(polls.length).toBe(1);
    const lines = readPoll(polls[0]!);
    expect(lines[0]).toMatchObject({ kind: 'catalogue_poll', poller: 'killme' });
    expect(lines.at(-1)).toMatchObject({ kind: 'end', complete: { gamma_markets: true, gamma_events: true, clob_markets: true } });
    const all = sortedCopy(v.markets.map((m) => m.conditionId));
    for (const e of ['gamma_markets', 'gamma_events', 'clob_markets']) expect(sortedCopy(conditionIds(recordsOf(lines, e)))).toEqual(all);
  });

  it('SIGTERM mid-poll ends the role with 0 and removes the unfinished poll', async () => {
    const v = await heldVenue();
    const dir = tempDir('poll-term');
    const run = catalogueRole(['--out', dir], v.gammaUrl, v.clobUrl);
    await waitFor('the poll held at its CLOB page', () => v.held() > 0 && openHasPages(dir), 30_000);
    run.kill('SIGTERM');
    expect(await run.exited).toBe(0);
    expect(openPolls(dir)).toEqual([]);
    expect(closedPolls(dir)).toEqual([]);
  });

  it('refuses bad arguments with exit 2 and the usage', async () => {
    const run = catalogueRole(['--out'], 'http://127.0.0.1:9/gamma', 'http://127.0.0.1:9/clob');
    expect(await run.exited).toBe(2);
    expect(run.stderr()).toMatch(/pmlake catalogue: .*\nusage: pmlake catalogue --out DIR \[--once\]\n/);
  });
});
