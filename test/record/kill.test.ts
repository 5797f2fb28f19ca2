import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { allLines, CLOSED_NAME, periodOfName, readCaptures, tempDir, waitFor } from '../helpers/capture-files.js';
import { SimulatedVenue, syntheticMarkets } from '../../sim/simulate/venue.js';

const REPO = path.resolve(import.meta.dirname, '../..');
const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

function startRecorder(url: string, dir: string, assets: string[]): { child: ChildProcess; exited: Promise<number | null>; stderr: () => string } {
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/cli.ts', 'record', '--out', dir, '--assets', assets.join(',')], {
    cwd: REPO,
    env: { ...process.env, PMLAKE_VENUE_WS_URL: url, PMLAKE_RECORD_ROTATE_SECONDS: '1', PMLAKE_RECORDER_ID: 'killme', LOG_LEVEL: 'info' },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let err = '';
  child.stderr!.on('data', (d: Buffer) => (err += d.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  cleanups.push(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  });
  return { child, exited, stderr: () => err };
}

const openFiles = (dir: string): string[] => fs.readdirSync(dir).filter((n) => n.startsWith('.open-'));

describe('pmlake record killed with SIGKILL', () => {
  it('leaves every closed file intact; the next recorder recovers the open file, records a restart outage and carries on', async () => {
    const markets = syntheticMarkets(4, 21);
    const venue = await SimulatedVenue.start({ markets, rate: 1500, keepSent: true, seed: 9 });
    cleanups.push(() => venue.close());
    const assets = markets.flatMap((m) => m.tokens);
    // The venue numbers its connections from 1: the killed recorder's socket, then the next recorder's.
    const sentOn = (conn: number) =>
      venue
        .sent()
        .filter((f) => f.conn === conn)
        .map((f) => f.text);
    const dir = tempDir('record-kill');

    const first = startRecorder(venue.url, dir, assets);
    await waitFor(
      'a closed file and frames in the open one',
      () => {
        const open = openFiles(dir);
        return (
          fs.readdirSync(dir).some((n) => n.startsWith('market-')) && open.length === 1 && fs.readFileSync(path.join(dir, open[0]!), 'utf8').includes('"frame"')
        );
      },
      30_000,
    );
    first.child.kill('SIGKILL');
    await first.exited;
    const closedBefore = readCaptures(dir);
    expect(closedBefore.length).toBeGreaterThanOrEqual(1);
    const [openName] = openFiles(dir);
    // A write cut short by the kill: half a line at the end of the open file.
    fs.appendFileSync(path.join(dir, openName!), '{"recv_ms":1,"conn":0,"frame":"{\\"event_ty');
    const openText = fs.readFileSync(path.join(dir, openName!), 'utf8');
    const kept = openText.slice(0, openText.lastIndexOf('\n') + 1);
    const keptLines = kept.slice(0, -1).split('\n');
    const session1 = (JSON.parse(keptLines[0]!) as { session: string }).session;
    const lastMs = (JSON.parse(keptLines.at(-1)!) as { recv_ms: number }).recv_ms;

    const second = startRecorder(venue.url, dir, assets);
    await waitFor('the second recorder recording', () => sentOn(2).length >= 30, 30_000);
    const sentBeforeStop = sentOn(2).length;
    second.child.kill('SIGTERM');
    expect(await second.exited).toBe(0);

    expect(openFiles(dir)).toEqual([]);
    const files = readCaptures(dir); // every line of every file parses
    // Files closed before the kill are untouched.
    for (const f of closedBefore) expect(files.find((x) => x.name === f.name)?.text).toBe(f.text);
    // The open file is in place under its own session's name and period, cut at its last complete line.
    const recovered = files.find((f) => f.text === kept);
    expect(recovered).toBeDefined();
    expect(CLOSED_NAME.exec(recovered!.name)?.[3]).toBe(session1.slice(0, 8));
    expect(periodOfName(recovered!.name)).toBe(Math.floor(recovered!.lines[0]!.recv_ms / 1000) * 1000);

    const lines = allLines(files);
    const bySession = (s: string) => lines.filter((_, i) => sessionAt(lines, i) === s);
    // What the first recorder wrote is what the venue sent it, in order, up to the kill.
    const frames1 = bySession(session1)
      .filter((l) => l.frame !== undefined)
      .map((l) => l.frame);
    expect(frames1.length).toBeGreaterThan(0);
    expect(frames1).toEqual(sentOn(1).slice(0, frames1.length));
    const session2 = lines.find((l) => l.event === 'start' && l.session !== session1)!.session!;
    const later = bySession(session2);
    const sub = later.find((l) => l.event === 'subscribe')!;
    expect(later.filter((l) => l.event === 'outage')).toEqual([
      { recv_ms: sub.recv_ms, event: 'outage', from_ms: lastMs, to_ms: sub.recv_ms, assets, reason: 'recorder restarted' },
    ]);
    // The second recorder carries on: what the venue sent it, byte for byte, at least all it sent before the stop.
    const frames2 = later.filter((l) => l.frame !== undefined).map((l) => l.frame);
    expect(frames2).toEqual(sentOn(2).slice(0, frames2.length));
    expect(frames2.length).toBeGreaterThanOrEqual(sentBeforeStop);
    expect(later.at(-1)).toMatchObject({ event: 'stop' });
  });
});

/** The session of the file a line sits in: the latest `start` line before it. */
function sessionAt(lines: { event?: string; session?: string }[], i: number): string | undefined {
  for (let j = i; j >= 0; j--) if (lines[j]!.event === 'start') return lines[j]!.session;
  return undefined;
}
