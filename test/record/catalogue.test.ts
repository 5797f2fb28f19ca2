import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DuckDBInstance } from '@duckdb/node-api';
import { generate } from '../../sim/generate/index.js';
import { runIngest } from '../../ingest/run.js';
import { openLakeDb } from '../../src/lake/duckdb.js';
import { catalogueAssets } from '../../src/record/catalogue-assets.js';
import { Recorder } from '../../src/record/recorder.js';
import { quietLog, tempDir, waitFor } from '../helpers/capture-files.js';
import { MiniVenue } from '../helpers/mini-venue.js';

let dir: string;
let lakeDir: string;
let db: DuckDBInstance;
let expected: string[];
let closedMarkets: number;

beforeAll(async () => {
  dir = tempDir('record-catalogue');
  lakeDir = path.join(dir, 'lake');
  const gen = path.join(dir, 'gen');
  await generate({ markets: 10, days: 2, seed: 5, out: gen, workers: 0, rate: 0.05 });
  await runIngest([path.join(gen, 'markets')], { lakeDir, threads: 1 });
  // The live tokens computed from the catalogue file itself: markets not closed, their clobTokenIds.
  const markets = JSON.parse(fs.readFileSync(path.join(gen, 'markets', 'gamma_markets.json'), 'utf8')) as { closed: boolean; clobTokenIds: string }[];
  closedMarkets = markets.filter((m) => m.closed).length;
  expected = markets
    .filter((m) => !m.closed)
    .flatMap((m) => JSON.parse(m.clobTokenIds) as string[])
    .sort();
  db = await openLakeDb({ allowedDirectories: [lakeDir], threads: 1, memoryLimit: '256MB' });
});

afterAll(() => {
  db?.closeSync();
  fs.rmSync(dir, { recursive: true, force: true });
});

describe('the recorder over the lake catalogue', () => {
  it('lists exactly the tokens of markets neither closed nor resolved', async () => {
    // Both kinds are present, so the filter is tested both ways.
    expect(expected.length).toBeGreaterThan(0);
    expect(closedMarkets).toBeGreaterThan(0);
    const live = await catalogueAssets(db, lakeDir)();
    expect([...live].sort()).toEqual(expected);
  });

  it('subscribes to them when started without --assets', async () => {
    const venue = await MiniVenue.start();
    const recorder = await Recorder.start({
      url: venue.url,
      outDir: path.join(dir, 'cap'),
      recorderId: 'c',
      rotateSeconds: 60,
      discoverAssets: catalogueAssets(db, lakeDir),
      log: quietLog,
    });
    try {
      await waitFor('subscription', () => venue.open().length === 1 && venue.open()[0]!.assets.size > 0);
      expect([...venue.open()[0]!.assets].sort()).toEqual(expected);
    } finally {
      await recorder.stop();
      await venue.close();
    }
  });
});
