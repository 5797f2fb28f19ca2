import fs from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { runIngest } from '../../ingest/run.js';
import { SimulatedVenue, syntheticMarkets } from '../../sim/simulate/venue.js';
import { Recorder } from '../../src/record/recorder.js';
import { rawRows } from '../ingest/capture-util.js';
import { lakeRows } from '../ingest/oracle.js';
import { files } from '../helpers/lake-files.js';
import { allLines, quietLog, readCaptures, tempDir, waitFor } from '../helpers/capture-files.js';

const dir = tempDir('record-lake');
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

describe('recorded capture files in the lake', () => {
  it('land every recorded frame byte for byte with its receive time, and the outage as capture_disconnect incidents', async () => {
    const markets = syntheticMarkets(3, 31);
    const assets = markets.flatMap((m) => m.tokens);
    const venue = await SimulatedVenue.start({ markets, rate: 2000, keepSent: true, seed: 5 });
    const captureDir = path.join(dir, 'capture');
    const recorder = await Recorder.start({ url: venue.url, outDir: captureDir, recorderId: 'lake', rotateSeconds: 1, assets, log: quietLog });
    try {
      await waitFor('frames', () => recorder.stats().frames > 200);
      venue.dropAll();
      await waitFor('frames after the drop', () => venue.sent().filter((f) => f.conn === 2).length > 200);
    } finally {
      await recorder.stop();
      await venue.close();
    }
    const lines = allLines(readCaptures(captureDir));
    const recorded = lines.filter((l) => l.frame !== undefined).map((l): [number, string] => [l.recv_ms, l.frame!]);
    const outage = lines.find((l) => l.event === 'outage')!;

    const lakeDir = path.join(dir, 'lake');
    await runIngest([captureDir], { lakeDir, threads: 1 });
    // raw: the recorder's frames, byte for byte, at their receive times, in the files' order.
    expect(await rawRows(lakeDir)).toEqual(recorded);
    const incidents = await lakeRows(
      `SELECT asset_id, epoch_ms(from_ts) AS f, epoch_ms(to_ts) AS t FROM read_parquet(${files(lakeDir, 'incidents')}) WHERE kind = 'capture_disconnect' ORDER BY asset_id`,
    );
    expect(incidents.map((r) => [r.asset_id, Number(r.f), Number(r.t)])).toEqual([...assets].sort().map((a) => [a, outage.from_ms, outage.to_ms]));
  });
});
