import fs from 'node:fs';
import { pino } from 'pino';
import { Recorder } from '../../src/record/recorder.js';

/**
 * A recorder over a slow disk, in its own process so its RSS is its own: every write waits until `gateMs` after
 * start (a disk that stalls, then catches up). Prints one JSON line of figures every 100 ms; SIGTERM stops it.
 * argv: url dir maxQueueBytes gateMs assets(comma-separated)
 */
const [url, dir, maxQueue, gateMs, assets] = process.argv.slice(2);
const t0 = Date.now();
const gate = new Promise<void>((resolve) => setTimeout(resolve, Number(gateMs)));
let pressured = 0;
const log = pino({ level: 'silent' });
const recorder = await Recorder.start({
  url: url!,
  outDir: dir!,
  recorderId: 'slow',
  rotateSeconds: 60,
  assets: assets!.split(','),
  maxQueueBytes: Number(maxQueue),
  openSink: async (file) => {
    const fh = await fs.promises.open(file, 'wx');
    return {
      write: async (...args: Parameters<typeof fh.write>) => {
        await gate;
        return fh.write(...args);
      },
      sync: () => fh.sync(),
      close: () => fh.close(),
    } as Pick<typeof fh, 'write' | 'sync' | 'close'>;
  },
  log,
});
const report = (): void => {
  const s = recorder.stats();
  if (s.queueBytes > Number(maxQueue)) pressured++;
  process.stdout.write(
    `${JSON.stringify({ t: Date.now() - t0, rss: process.memoryUsage().rss, heap: process.memoryUsage().heapUsed, queueBytes: s.queueBytes, frames: s.frames, pressured })}\n`,
  );
};
const timer = setInterval(report, 100);
process.once('SIGTERM', () => {
  clearInterval(timer);
  void recorder.stop().then(() => {
    report();
    process.exit(0);
  });
});
