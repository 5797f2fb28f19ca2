import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runIngest } from '../../ingest/run.js';
import { createLogger } from '../../src/log.js';
import { Recorder } from '../../src/record/recorder.js';
import type { RunningServer } from '../../src/server.js';
import { activateSubscriptionTx } from '../../src/state/accounts.js';
import { lakeRows } from '../ingest/oracle.js';
import { files } from '../helpers/lake-files.js';
import { startTestServer, tempDir, testConfig } from '../helpers/server.js';
import { assetsOf, fixtureFrames, FIXTURES, until } from './replay-util.js';

/**
 * Round trip: pmlake's own recorder (it speaks the venue's protocol) pointed at the replay of a window, its
 * capture files ingested into a new lake: that lake's raw frames and l2 rows equal the original's for the window.
 * Receive times and seq are the recorder's clock, so they are left out of the comparison.
 */
const tmp = tempDir('pmlake-replay-rt-');
let srv: RunningServer;
let key: string;
let lake: string;
const DAY_FROM = Date.parse('2025-03-02T00:00:00Z');
const DAY_TO = Date.parse('2025-03-03T00:00:00Z');
const dayFrames = fixtureFrames().filter((f) => f.recvMs >= DAY_FROM && f.recvMs < DAY_TO);
const dayAssets = [...new Set(dayFrames.flatMap((f) => f.msgs.flatMap(assetsOf)))];

beforeAll(async () => {
  lake = path.join(tmp.dir, 'lake');
  expect((await runIngest(FIXTURES, { lakeDir: lake, threads: 2 })).failed).toBe(0);
  srv = await startTestServer(testConfig({ PMLAKE_LAKE: lake, PMLAKE_STATE: path.join(tmp.dir, 'state') }));
  const store = srv.ctx.state;
  const user = await store.upsertUser('rt@example.com', 'professional');
  await store.tx((t) => activateSubscriptionTx(t, { userId: user.id, tier: 'professional', billingPeriod: 'monthly', fundedBy: 'grant', at: new Date() }));
  key = (await store.createApiKey({ userId: user.id, name: 't', prefix: srv.ctx.config.keyPrefix })).plaintext;
}, 60_000);

afterAll(async () => {
  await srv?.close();
  tmp.cleanup();
});

const RAW = 'SELECT frame, event_types, condition_ids FROM read_parquet(%F) WHERE recv_ts >= %A AND recv_ts < %B';
const L2 = 'SELECT ts, condition_id, asset_id, side, price, size, is_snapshot, hash, level_idx FROM read_parquet(%F) WHERE %W';

function sortedRows(rows: Record<string, unknown>[]): string[] {
  return rows.map((r) => JSON.stringify(r)).sort();
}

describe('record the replay, ingest the captures', () => {
  it('the new lake’s raw and l2 equal the original’s for the window', async () => {
    const out = path.join(tmp.dir, 'captures');
    const url = `${srv.url.replace('http', 'ws')}/v1/replay/ws/market?from=${new Date(DAY_FROM).toISOString()}&to=${new Date(DAY_TO).toISOString()}&speed=0&api_key=${key}`;
    const rec = await Recorder.start({ url, outDir: out, recorderId: 'rt', rotateSeconds: 3600, assets: dayAssets, log: createLogger('silent') });
    await until(() => rec.stats().frames >= dayFrames.length, 30_000);
    await rec.stop();
    // The capture files name the URL they recorded, never the key in it.
    const captured = fs.readdirSync(out).map((f) => fs.readFileSync(path.join(out, f), 'utf8'));
    expect(captured.length).toBeGreaterThan(0);
    for (const text of captured) {
      expect(text).not.toContain(key);
      expect(JSON.parse(text.slice(0, text.indexOf('\n'))).url).toMatch(/api_key=\*\*\*/);
    }
    const copy = path.join(tmp.dir, 'copy');
    const report = await runIngest([out], { lakeDir: copy, threads: 2 });
    expect(report.failed).toBe(0);

    const window = (sql: string, dir: string, ds: string): string =>
      sql
        .replace('%F', files(dir, ds))
        .replace('%A', `TIMESTAMP '${new Date(DAY_FROM).toISOString().slice(0, 19)}'`)
        .replace('%B', `TIMESTAMP '${new Date(DAY_TO).toISOString().slice(0, 19)}'`);
    const origRaw = await lakeRows(window(RAW, lake, 'raw'));
    // The copy was received today: all of it is the window's.
    const copyRaw = await lakeRows(RAW.replace('%F', files(copy, 'raw')).replace(/ WHERE .*/, ''));
    expect(origRaw.length).toBe(dayFrames.length);
    expect(sortedRows(copyRaw)).toEqual(sortedRows(origRaw));

    const l2Of = async (dir: string, where: string): Promise<string[]> => sortedRows(await lakeRows(L2.replace('%F', files(dir, 'l2')).replace('%W', where)));
    const origL2 = await l2Of(lake, `recv_ts >= TIMESTAMP '2025-03-02' AND recv_ts < TIMESTAMP '2025-03-03'`);
    expect(origL2.length).toBeGreaterThan(100);
    expect(await l2Of(copy, 'true')).toEqual(origL2);
  }, 60_000);
});
