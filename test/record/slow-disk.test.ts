import { spawn } from 'node:child_process';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { allLines, readCaptures, tempDir, waitFor } from '../helpers/capture-files.js';
import { MiniVenue } from '../helpers/mini-venue.js';

const REPO = path.resolve(import.meta.dirname, '../..');
const MB = 1024 * 1024;
const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

type Sample = { t: number; rss: number; heap: number; queueBytes: number; frames: number; pressured: number };

/** A venue flooding a recorder whose disk stalls for `gateMs`, then catches up; the recorder's figures over time. */
async function floodSlowDisk(maxQueue: number, gateMs: number, floodMs: number) {
  const venue = await MiniVenue.start();
  cleanups.push(() => venue.close());
  const dir = tempDir('record-slow');
  const assets = Array.from({ length: 50 }, (_, i) => `s${i}`);
  const child = spawn(
    process.execPath,
    ['--import', 'tsx', 'test/record/slow-disk-child.ts', venue.url, dir, String(maxQueue), String(gateMs), assets.join(',')],
    {
      cwd: REPO,
      stdio: ['ignore', 'pipe', 'inherit'],
    },
  );
  cleanups.push(() => void child.kill('SIGKILL'));
  const samples: Sample[] = [];
  let buf = '';
  child.stdout.on('data', (d: Buffer) => {
    buf += d.toString();
    const lines = buf.split('\n');
    buf = lines.pop()!;
    for (const l of lines) samples.push(JSON.parse(l) as Sample);
  });
  const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
  await waitFor('subscription', () => venue.open().length === 1 && venue.open()[0]!.assets.size === assets.length, 30_000);
  const socket = venue.open()[0]!;
  let venueBacklog = 0;
  const until = Date.now() + floodMs;
  // The venue sends as fast as its own socket drains: a recorder that stops reading stops it.
  while (Date.now() < until) {
    venueBacklog = Math.max(venueBacklog, socket.ws.bufferedAmount);
    if (socket.ws.bufferedAmount < 4 * MB) venue.tick(1000);
    await new Promise((r) => setTimeout(r, 1));
  }
  await waitFor('every frame received', () => samples.at(-1)?.frames === socket.sent.length, 60_000);
  child.kill('SIGTERM');
  expect(await exited).toBe(0);
  return { samples, sent: socket.sent, dir, venueBacklog };
}

const peak = (s: Sample[], k: 'rss' | 'queueBytes'): number => Math.max(...s.map((x) => x[k]));

describe('pmlake record on a slow disk', () => {
  it('pauses the sockets at its queue bound instead of growing, then writes everything (RSS figures printed)', async () => {
    const bound = 2 * MB;
    const bounded = await floodSlowDisk(bound, 3000, 4000);
    const lines = allLines(readCaptures(bounded.dir));
    expect(lines.filter((l) => l.frame !== undefined).map((l) => l.frame)).toEqual(bounded.sent);
    expect(lines.filter((l) => l.event === 'outage')).toEqual([]);
    expect(bounded.samples.some((s) => s.pressured > 0)).toBe(true);
    // Below the point where frames would be dropped: the pause held the queue, the venue's send buffer took the rest.
    expect(peak(bounded.samples, 'queueBytes')).toBeLessThan(2 * bound);
    expect(bounded.venueBacklog).toBeGreaterThan(bound);

    // The control: the same stall with a bound too high to bite lets the queue grow with what the venue sends.
    const unbounded = await floodSlowDisk(1024 * MB, 3000, 4000);
    expect(peak(unbounded.samples, 'queueBytes')).toBeGreaterThan(8 * bound);
    const figure = (r: typeof bounded) => ({
      frames: r.sent.length,
      peakQueueMB: +(peak(r.samples, 'queueBytes') / MB).toFixed(1),
      peakRssMB: +(peak(r.samples, 'rss') / MB).toFixed(0),
      firstRssMB: +(r.samples[0]!.rss / MB).toFixed(0),
    });
    process.stdout.write(`slow disk, 3 s stall: bounded (2 MB) ${JSON.stringify(figure(bounded))}; unbounded ${JSON.stringify(figure(unbounded))}\n`);
  });

  it('past twice its bound drops frames only with an outage line that counts them', async () => {
    const r = await floodSlowDisk(4096, 1000, 1500);
    const lines = allLines(readCaptures(r.dir));
    const written = lines.filter((l) => l.frame !== undefined).map((l) => l.frame!);
    const outages = lines.filter((l) => l.event === 'outage');
    const dropped = outages.reduce((n, l) => n + Number(/write queue full: (\d+) frames dropped/.exec(l.reason!)![1]), 0);
    expect(written.length + dropped).toBe(r.sent.length);
    // What was written is what was sent, in order, with the dropped frames missing.
    let j = 0;
    for (const text of written) {
      while (j < r.sent.length && r.sent[j] !== text) j++;
      expect(j).toBeLessThan(r.sent.length);
      j++;
    }
    for (const o of outages) expect(o.assets).toHaveLength(50);
    expect(dropped).toBeGreaterThan(0);
    process.stdout.write(`tiny queue (4 KB): ${r.sent.length} frames sent, ${dropped} dropped in ${outages.length} outages\n`);
  });
});
