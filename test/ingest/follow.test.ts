import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DuckDBInstance } from '@duckdb/node-api';
import { generate } from '../../ingest/generate/index.js';
import { Follower, type FollowCycleReport } from '../../ingest/follow.js';
import { runIngest } from '../../ingest/run.js';
import { readLedger } from '../../ingest/ledger.js';
import { dataFilesOnDisk } from '../../ingest/sweep.js';
import { createLogger } from '../../src/log.js';
import { LakeSession } from '../../src/lake/session.js';
import { currentVersion, manifestName, parseManifestName, SET_NAMES, versionsDir, type LakeVersion, type Manifest, type SetName } from '../../src/lake/versions.js';
import { startTestServer, tempDir, testConfig } from '../helpers/server.js';
import { spawnCli } from './lakeutil.js';

/**
 * `pmlake ingest --follow`: source files appear in a directory over time (the generator's day split into time-ordered
 * chunks, as a recorder rotates its files); the follow loop lands them cycle by cycle. Checked against a one-shot
 * ingest of the same files into another lake, with the rows and an order-independent content hash per data set
 * computed here from the Parquet files.
 */

const tmp = tempDir('pmlake-follow-');
const log = createLogger(process.env.FOLLOW_TEST_LOG ?? 'silent');
let db: DuckDBInstance;
/** The source files, in the order they appear: markets, then the tape and fills chunks by time. */
let chunks: string[] = [];
let genRoot = '';

async function until(what: string, cond: () => boolean | Promise<boolean>, ms = 40_000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

/** Lines of a JSONL day file cut into `parts` files by time (each line's time: the newest timestamp so far). */
function splitByTime(file: string, parts: number, timeOf: (o: Record<string, unknown>) => number, prefix: string): { at: number; lines: string[]; name: string }[] {
  const lines = fs.readFileSync(file, 'utf8').split('\n').filter(Boolean);
  let t = 0;
  const times = lines.map((l) => (t = Math.max(t, timeOf(JSON.parse(l) as Record<string, unknown>))));
  const lo = times[0]!;
  const span = times[times.length - 1]! - lo + 1;
  const out: { at: number; lines: string[]; name: string }[] = [];
  lines.forEach((l, i) => {
    const k = Math.min(parts - 1, Math.floor(((times[i]! - lo) * parts) / span));
    const at = lo + Math.floor((k * span) / parts);
    if (!out[k]) out[k] = { at, lines: [], name: `${new Date(at).toISOString().replace(/[-:]/g, '').slice(0, 15)}Z-${prefix}.jsonl` };
    out[k].lines.push(l);
  });
  return out.filter(Boolean);
}

/** Rows and an order-independent content hash of a set's files (catalogue rows without their wall-clock `updated_at`). */
async function content(files: string[]): Promise<string> {
  if (files.length === 0) return '0';
  const conn = await db.connect();
  try {
    const list = `[${files.map((f) => `'${f}'`).join(', ')}]`;
    const cols = (await conn.runAndReadAll(`DESCRIBE SELECT * FROM read_parquet(${list}, union_by_name = true)`)).getRowObjectsJS().map((r) => String(r.column_name));
    const keep = cols.filter((c) => c !== 'updated_at').map((c) => `"${c}"`);
    const r = (
      await conn.runAndReadAll(
        `SELECT count(*) AS n, md5(string_agg(r, chr(10) ORDER BY r)) AS h FROM (SELECT struct_pack(${keep.join(', ')})::VARCHAR AS r FROM read_parquet(${list}, union_by_name = true))`,
      )
    ).getRowObjectsJS()[0]!;
    return `${r.n}:${r.h}`;
  } finally {
    conn.closeSync();
  }
}

async function lakeContent(v: LakeVersion): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  for (const name of SET_NAMES) out[name] = await content(v.files(name as SetName));
  return out;
}

beforeAll(async () => {
  db = await DuckDBInstance.create(':memory:', { threads: '1' });
  genRoot = path.join(tmp.dir, 'gen');
  const g = await generate({ markets: 4, days: 1, seed: 24, start: '2025-10-13', out: genRoot, workers: 0, rate: 0.4 });
  const src = path.join(tmp.dir, 'chunks');
  fs.mkdirSync(src);
  const all = [
    ...splitByTime(path.join(genRoot, g.files.ws[0]!), 8, (o) => Number(o.timestamp ?? 0), 'ws'),
    ...splitByTime(path.join(genRoot, g.files.fills[0]!), 8, (o) => Number(o.block_timestamp ?? 0) * 1000, 'fills'),
  ].sort((a, b) => a.at - b.at);
  fs.copyFileSync(path.join(genRoot, g.files.markets), path.join(src, '00-markets.json'));
  chunks = [path.join(src, '00-markets.json')];
  for (const c of all) {
    const f = path.join(src, c.name);
    fs.writeFileSync(f, c.lines.join('\n') + '\n');
    chunks.push(f);
  }
});

afterAll(() => {
  db?.closeSync();
  tmp.cleanup();
});

describe('pmlake ingest --follow', () => {
  it('lands files as they appear, one version per cycle, equal to a one-shot ingest; readers never see a mix; a bad file is one issue', async () => {
    const dir = path.join(tmp.dir, 'a-in');
    const lake = path.join(tmp.dir, 'a-lake');
    fs.mkdirSync(dir);
    const cycles: FollowCycleReport[] = [];
    const follower = await Follower.start({ dirs: [dir], lakeDir: lake, cycleSeconds: 0.5, log, threads: 1, memoryLimit: '1GB', onCycle: (r) => cycles.push(r) });
    const landed = (): number => follower.stats().filesLanded;

    // The reader: a lake session pinned before a publish, reading while cycles run. Within one version the
    // catalogue's availability counts equal the data sets' rows, so a mix of two versions shows as a mismatch.
    const reader = await DuckDBInstance.create(':memory:', { threads: '1' });
    let stop = false;
    const problems: string[] = [];
    const versionsSeen = new Set<number>();
    const reading = (async () => {
      while (!stop) {
        const s = new LakeSession(reader, lake);
        if (!s.hasFiles('markets') || !s.hasFiles('book_snapshots')) {
          await new Promise((r) => setTimeout(r, 20));
          continue;
        }
        versionsSeen.add(s.version.version);
        const m = await s.one({ sql: `SELECT sum(trade_count) AS t, sum(orderbook_count) AS b FROM ${s.sources.from('markets')}`, params: {} });
        await new Promise((r) => setTimeout(r, 30));
        const t = s.hasFiles('trades') ? await s.count({ sql: `SELECT count(*) FROM ${s.sources.from('trades')}`, params: {} }) : 0;
        const b = await s.count({ sql: `SELECT count(*) FROM ${s.sources.from('book_snapshots')}`, params: {} });
        if (Number(m?.t ?? 0) !== t || Number(m?.b ?? 0) !== b) problems.push(`v${s.version.version}: markets say ${m?.t}/${m?.b}, sets hold ${t}/${b}`);
      }
    })();

    const dataTo: string[] = [];
    const maxDataTo = async (): Promise<string> => {
      const s = new LakeSession(reader, lake);
      const r = await s.one({ sql: `SELECT max(data_to)::VARCHAR AS d FROM ${s.sources.from('markets')}`, params: {} });
      return String(r?.d);
    };
    try {
      // Files appear one or two at a time; a recorder's open file (a dot file) is never taken.
      fs.writeFileSync(path.join(dir, '.open-rec-1.capture.jsonl'), '{"recv_ms":1,"event":"start"');
      let i = 0;
      while (i < chunks.length) {
        const batch = chunks.slice(i, i + (i % 3 === 0 ? 1 : 2));
        for (const f of batch) fs.copyFileSync(f, path.join(dir, path.basename(f)));
        i += batch.length;
        if (i === 4) fs.writeFileSync(path.join(dir, '20251013T0900Z-broken.jsonl'), '{"event_type":"book","asset_id":\n');
        await until(`${i} files landed`, () => landed() >= i);
        if (i > 2) dataTo.push(await maxDataTo());
      }
      const settled = cycles.length;
      await until('two more cycles', () => cycles.length >= settled + 2);
    } finally {
      stop = true;
      await reading;
      await follower.stop();
    }
    reader.closeSync();

    expect(problems).toEqual([]);
    expect(versionsSeen.size).toBeGreaterThanOrEqual(3);
    const stats = follower.stats();
    expect(stats.filesLanded).toBe(chunks.length);
    expect(stats.failedCycles).toBe(0);
    // The broken file: one issue in one cycle, not one per cycle; the loop went on.
    expect(stats.filesRejected).toBe(1);
    expect(cycles.filter((c) => c.issues > 0).length).toBe(1);
    expect(cycles.filter((c) => c.version !== null).length).toBeGreaterThanOrEqual(6);
    // Each market's data_to moved as the cycles landed.
    expect(new Set(dataTo).size).toBeGreaterThanOrEqual(3);
    expect([...dataTo].sort()).toEqual(dataTo);

    // A one-shot ingest of the same files into another lake holds the same rows, data set by data set.
    const oneShot = path.join(tmp.dir, 'a-oneshot');
    await runIngest([dir], { lakeDir: oneShot, threads: 1, memoryLimit: '1GB' });
    const followed = await lakeContent(currentVersion(lake));
    const reference = await lakeContent(currentVersion(oneShot));
    expect(Object.values(reference).filter((c) => c !== '0').length).toBeGreaterThanOrEqual(10);
    expect(followed).toEqual(reference);

    // Freshness: the manifest's tape time is the newest receive time of raw, and /v1/status serves it with the lag.
    const conn = await db.connect();
    const newest = (
      await conn.runAndReadAll(`SELECT epoch_ms(max(recv_ts)) AS t FROM read_parquet([${currentVersion(lake).files('raw').map((f) => `'${f}'`)}])`)
    ).getRowObjectsJS()[0]!.t;
    conn.closeSync();
    expect(stats.newestLandedMs).toBe(Number(newest));
    const srv = await startTestServer(testConfig({ PMLAKE_LAKE: lake, PMLAKE_STATE: path.join(tmp.dir, 'a-state') }));
    try {
      const body = (await (await fetch(`${srv.url}/v1/status`)).json()) as { lake_version: number; checked_at: string; sources: { name: string; newest_landed_at: string; lag_seconds: number }[] };
      expect(body.lake_version).toBe(currentVersion(lake).version);
      expect(body.sources.map((s) => s.name)).toEqual(['tape']);
      expect(Date.parse(body.sources[0]!.newest_landed_at)).toBe(Number(newest));
      expect(body.sources[0]!.lag_seconds).toBeCloseTo((Date.parse(body.checked_at) - Number(newest)) / 1000, 3);
    } finally {
      await srv.close();
    }
  });
});
