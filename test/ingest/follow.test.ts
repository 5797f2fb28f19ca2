import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DuckDBInstance } from '@duckdb/node-api';
import { generate } from '../../sim/generate/index.js';
import { Follower, type FollowCycleReport } from '../../ingest/follow.js';
import { runIngest } from '../../ingest/run.js';
import { readLedger } from '../../ingest/ledger.js';
import { dataFilesOnDisk } from '../../ingest/sweep.js';
import { createLogger } from '../../src/log.js';
import { LakeSession } from '../../src/lake/session.js';
import { currentVersion, parseManifestName, versionsDir, type LakeVersion, type Manifest, type SetName } from '../../src/lake/versions.js';
import { startTestServer, tempDir, testConfig } from '../helpers/server.js';
import { FollowCompaction } from '../../ingest/follow-compact.js';
import { captureText, splitByTime, tokensOf, venueMs, writeChunks } from './capture-util.js';
import { lakeContent } from '../helpers/lake-content.js';

/**
 * `pmlake ingest --follow`: source files appear in a directory over time (the generator's day split into
 * time-ordered chunks: the tape as capture files, as a recorder rotates them; in the compaction test as plain JSON
 * lines); the follow loop lands them cycle by cycle. Checked against a one-shot ingest of the same files into
 * another lake, with the rows and an order-independent content hash per data set computed here from the Parquet
 * files.
 */

const tmp = tempDir('pmlake-follow-');
const log = createLogger(process.env.FOLLOW_TEST_LOG ?? 'silent');
let db: DuckDBInstance;
/** The source files, in the order they appear: markets, then the tape and fills chunks by time. */
let chunks: string[] = [];
let genRoot = '';
/** The tape in files of half an hour each. */
let halfHours: string[] = [];
let generatedTrades = 0;

async function until(what: string, cond: () => boolean | Promise<boolean>, ms = 40_000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

beforeAll(async () => {
  db = await DuckDBInstance.create(':memory:', { threads: '1' });
  genRoot = path.join(tmp.dir, 'gen');
  const g = await generate({ markets: 4, days: 1, seed: 24, start: '2025-10-13', out: genRoot, workers: 0, rate: 0.4 });
  generatedTrades = g.counts.trades;
  const src = path.join(tmp.dir, 'chunks');
  const THREE_HOURS = 3 * 3_600_000;
  // The tape as a recorder writes it (docs/capture-format.md): each frame with its receive time, in files named by
  // their period's start.
  const tape = splitByTime(path.join(genRoot, g.files.ws[0]!), THREE_HOURS, (o) => Number(o.timestamp ?? 0), 'ws');
  const assets = [...new Set(tape.flatMap((c) => c.lines.flatMap(tokensOf)))];
  let recv = 0;
  const captures = tape.map((c) => {
    const stamp = new Date(c.at).toISOString().replace(/[-:]/g, '').slice(0, 15);
    const body = c.lines.map((frame) => ({ recv_ms: (recv = Math.max(recv, venueMs(frame))), conn: 0, frame }));
    const text = captureText('rec', `s-${stamp}`, [{ conn: 0, assets }], body, c.at);
    return { at: c.at, lines: text.trimEnd().split('\n'), name: `market-${stamp}Z-rec-0000abcd.capture.jsonl` };
  });
  const files = writeChunks(src, [
    ...captures,
    ...splitByTime(path.join(genRoot, g.files.fills[0]!), THREE_HOURS, (o) => Number(o.block_timestamp ?? 0) * 1000, 'fills'),
  ]);
  fs.copyFileSync(path.join(genRoot, g.files.markets), path.join(src, '00-markets.json'));
  chunks = [path.join(src, '00-markets.json'), ...files];
  halfHours = writeChunks(
    path.join(tmp.dir, 'half-hours'),
    splitByTime(path.join(genRoot, g.files.ws[0]!), 1_800_000, (o) => Number(o.timestamp ?? 0), 'ws'),
  );
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
    const follower = await Follower.start({
      dirs: [dir],
      lakeDir: lake,
      cycleSeconds: 0.5,
      log,
      threads: 1,
      memoryLimit: '1GB',
      onCycle: (r) => cycles.push(r),
    });
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

    // The service on a real port: its /v1/status while the cycles land.
    const srv = await startTestServer(testConfig({ PMLAKE_LAKE: lake, PMLAKE_STATE: path.join(tmp.dir, 'a-state') }));
    type Status = { lake_version: number; checked_at: string; sources: { name: string; newest_landed_at: string | null; lag_seconds: number | null }[] };
    const status = async (): Promise<Status> => (await (await fetch(`${srv.url}/v1/status`)).json()) as Status;
    const statuses: Status[] = [];
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
        statuses.push(await status());
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
    // Each file was handed to the orchestrator once: landed files are not hashed again cycle after cycle.
    expect(cycles.reduce((n, c) => n + c.files, 0)).toBe(chunks.length + 1);
    // One ingest version per cycle that landed something (compactions are versions of their own).
    const publishing = cycles.filter((c) => c.version !== null);
    expect(publishing.length).toBeGreaterThanOrEqual(6);
    const history = fs
      .readFileSync(path.join(versionsDir(lake), 'history.jsonl'), 'utf8')
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as { version: number; kind: string });
    expect(history.filter((h) => h.kind === 'ingest').map((h) => h.version)).toEqual(publishing.map((c) => c.version));
    // Each market's data_to moved as the cycles landed.
    expect(new Set(dataTo).size).toBeGreaterThanOrEqual(3);
    expect([...dataTo].sort()).toEqual(dataTo);

    // A one-shot ingest of the same files into another lake holds the same rows, data set by data set.
    const oneShot = path.join(tmp.dir, 'a-oneshot');
    await runIngest([dir], { lakeDir: oneShot, threads: 1, memoryLimit: '1GB' });
    const followed = await lakeContent(db, currentVersion(lake));
    const reference = await lakeContent(db, currentVersion(oneShot));
    expect(Object.values(reference).filter((c) => c !== '0').length).toBeGreaterThanOrEqual(10);
    expect(followed).toEqual(reference);

    // Freshness: each status answer names the newest receive time of raw in the version it served (computed here
    // from that version's files), with the lag; it moved as the cycles landed.
    const conn = await db.connect();
    const newestOf = async (version: number): Promise<number | null> => {
      const m = JSON.parse(fs.readFileSync(path.join(versionsDir(lake), `v${String(version).padStart(8, '0')}.json`), 'utf8')) as Manifest;
      const raw = (m.sets.raw ?? []).map((e) => `'${path.join(lake, e.path)}'`);
      if (raw.length === 0) return null;
      const t = (await conn.runAndReadAll(`SELECT epoch_ms(max(recv_ts)) AS t FROM read_parquet([${raw.join(', ')}])`)).getRowObjectsJS()[0]!.t;
      return Number(t);
    };
    try {
      statuses.push(await status());
      for (const st of statuses) {
        const tape = st.sources.find((x) => x.name === 'tape')!;
        const expected = await newestOf(st.lake_version);
        expect(tape.newest_landed_at === null ? null : Date.parse(tape.newest_landed_at), `v${st.lake_version}`).toBe(expected);
        if (expected !== null) expect(tape.lag_seconds).toBeCloseTo((Date.parse(st.checked_at) - expected) / 1000, 3);
      }
      expect(new Set(statuses.map((x) => x.sources[0]!.newest_landed_at)).size).toBeGreaterThanOrEqual(4);
      const last = statuses[statuses.length - 1]!;
      expect(last.lake_version).toBe(currentVersion(lake).version);
      expect(last.sources.map((x) => x.name)).toEqual(['tape']);
      expect(stats.newestLandedMs).toBe(await newestOf(last.lake_version));
    } finally {
      conn.closeSync();
      await srv.close();
    }
  });

  it('as a process: SIGTERM ends it with 0 and a clean lake; restarted, it carries on from the ledger', async () => {
    const dir = path.join(tmp.dir, 'b-in');
    const lake = path.join(tmp.dir, 'b-lake');
    fs.mkdirSync(dir);
    const env = {
      PMLAKE_LAKE: lake,
      PMLAKE_FOLLOW_SECONDS: '0.5',
      LOG_LEVEL: 'info',
      PMLAKE_DUCKDB_MEMORY: '1GB',
      PMLAKE_DUCKDB_THREADS: '1',
      PMLAKE_LAKE_GRACE_SECONDS: '0',
    };
    type Line = { msg?: string; files?: number; version?: number | null; known_files?: number; cycles?: number };
    const start = () => {
      const child = spawn(process.execPath, ['--import', 'tsx', 'src/cli.ts', 'ingest', '--follow', dir], {
        env: { ...process.env, ...env },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let err = '';
      child.stderr.on('data', (d: Buffer) => (err += d.toString()));
      const done = new Promise<number | null>((resolve) => child.on('close', (code) => resolve(code)));
      const lines = (): Line[] =>
        err
          .split('\n')
          .filter((l) => l.startsWith('{'))
          .map((l) => JSON.parse(l) as Line);
      return { child, done, lines, stderr: () => err };
    };
    const landedBy = (p: ReturnType<typeof start>) =>
      p
        .lines()
        .filter((l) => l.msg === 'follow cycle' && l.version !== null)
        .reduce((s, l) => s + (l.files ?? 0), 0);

    for (const f of chunks.slice(0, 4)) fs.copyFileSync(f, path.join(dir, path.basename(f)));
    const first = start();
    await until('four files landed by the process', () => landedBy(first) >= 4, 45_000);
    // Two more files, and the signal while their cycle may be running: it finishes (or never starts) either way.
    for (const f of chunks.slice(4, 6)) fs.copyFileSync(f, path.join(dir, path.basename(f)));
    await new Promise((r) => setTimeout(r, 300));
    first.child.kill('SIGTERM');
    expect(await first.done, first.stderr()).toBe(0);
    expect(first.lines().some((l) => l.msg === 'follow stopped')).toBe(true);

    // A clean lake: no lock, no scratch, every data file on disk named by a manifest, the ledger matching what landed.
    const clean = (): void => {
      expect(fs.existsSync(path.join(lake, '_ingest', 'lock'))).toBe(false);
      const tmpDir = path.join(lake, '_ingest', 'tmp');
      expect(fs.existsSync(tmpDir) ? fs.readdirSync(tmpDir) : []).toEqual([]);
      const named = new Set<string>();
      for (const n of fs.readdirSync(versionsDir(lake))) {
        if (parseManifestName(n) === null) continue;
        const m = JSON.parse(fs.readFileSync(path.join(versionsDir(lake), n), 'utf8')) as Manifest;
        for (const l of Object.values(m.sets)) for (const e of l ?? []) named.add(e.path);
      }
      expect(dataFilesOnDisk(lake).filter((f) => !named.has(f))).toEqual([]);
    };
    clean();
    const ledger = readLedger(lake);
    const landedFirst = ledger.size;
    expect(landedFirst).toBe(landedBy(first));
    expect(landedFirst).toBeGreaterThanOrEqual(4);

    // Restarted: it knows the landed files from the ledger and takes only the rest.
    for (const f of chunks.slice(6)) fs.copyFileSync(f, path.join(dir, path.basename(f)));
    const second = start();
    await until('every file landed after the restart', () => landedBy(second) >= chunks.length - landedFirst, 45_000);
    expect(second.lines().find((l) => l.msg === 'following')?.known_files).toBe(landedFirst);
    second.child.kill('SIGTERM');
    expect(await second.done, second.stderr()).toBe(0);
    expect(landedBy(second)).toBe(chunks.length - landedFirst);
    clean();
    expect(readLedger(lake).size).toBe(chunks.length);
    // Nothing was landed twice nor lost: the trades are the generated ones.
    const conn = await db.connect();
    const trades = (
      await conn.runAndReadAll(
        `SELECT count(*) AS n FROM read_parquet([${currentVersion(lake)
          .files('trades')
          .map((f) => `'${f}'`)}])`,
      )
    ).getRowObjectsJS()[0]!.n;
    conn.closeSync();
    expect(Number(trades)).toBe(generatedTrades);
  });

  it('compaction folds closed hours into hour files and a closed day into one file, bounded per step, rows unchanged', async () => {
    const lake = path.join(tmp.dir, 'c-lake');
    // Six hours of the tape in half-hour files, each its own version: two files per hour in every tape partition.
    const six = halfHours.slice(0, 12);
    await runIngest([chunks[0]!, ...six], { lakeDir: lake, threads: 1, memoryLimit: '1GB', batchRows: 1, compactSmallFiles: 0 });
    const before = currentVersion(lake);
    expect(before.entries('l2').length).toBe(12);
    const reference = await lakeContent(db, before);
    const conn = await db.connect();
    const spans = async (v: LakeVersion, name: SetName): Promise<number[]> => {
      const out: number[] = [];
      for (const f of v.files(name)) {
        const r = (
          await conn.runAndReadAll(`SELECT epoch_ms(min(recv_ts)) AS lo, epoch_ms(max(recv_ts)) AS hi FROM read_parquet('${f}')`)
        ).getRowObjectsJS()[0]!;
        const hour = Math.floor(Number(r.lo) / 3_600_000);
        expect(Math.floor(Number(r.hi) / 3_600_000), f).toBe(hour);
        out.push(hour);
      }
      return out.sort((a, b) => a - b);
    };
    const day = Date.parse('2025-10-13T00:00:00Z');
    const policy = new FollowCompaction(lake, 30);
    try {
      // 06:04: hours 00–05 have ended but 05 has not settled (five minutes): hours 00–04 are due.
      // A step past its deadline still merges one group (the oldest), and no more.
      const one = await policy.step(conn, 0, day + 6 * 3_600_000 + 4 * 60_000);
      expect(one?.partitions).toBe(1);
      const pinned = new LakeSession(db, lake);
      const pinnedVersion = pinned.version.version;
      const all = await policy.step(conn, Infinity, day + 6 * 3_600_000 + 4 * 60_000);
      expect(all?.version).toBeGreaterThan(pinnedVersion);
      const hours = currentVersion(lake);
      expect(hours.manifest.kind).toBe('compact');
      expect(await spans(hours, 'l2')).toEqual([0, 1, 2, 3, 4, 5, 5].map((h) => Math.floor(day / 3_600_000) + h));
      expect(await spans(hours, 'raw')).toEqual([0, 1, 2, 3, 4, 5, 5].map((h) => Math.floor(day / 3_600_000) + h));
      expect(await lakeContent(db, hours)).toEqual(reference);
      // The reader pinned before the publish still reads its own version's files.
      expect(await pinned.count({ sql: `SELECT count(*) FROM ${pinned.sources.from('l2')}`, params: {} })).toBe(Number(reference.l2!.split(':')[0]));
      // The next day, after the settling time: each day partition is one file.
      await policy.step(conn, Infinity, day + 24 * 3_600_000 + 10 * 60_000);
      const days = currentVersion(lake);
      for (const name of ['l2', 'raw', 'book_snapshots', 'top_of_book'] as const)
        expect(days.entries(name).length, name).toBe(days.partitionValues(name).length);
      expect(await lakeContent(db, days)).toEqual(reference);
      // Nothing left to do: no version.
      const nextDay = day + 24 * 3_600_000 + 10 * 60_000;
      expect(await policy.step(conn, Infinity, nextDay)).toBeNull();
      // A late half hour of that day is not worth rewriting the day file for; three are (a quarter of its size).
      await runIngest([halfHours[12]!], { lakeDir: lake, threads: 1, memoryLimit: '1GB', compactSmallFiles: 0 });
      expect(currentVersion(lake).entries('l2').length).toBe(2);
      // (Data sets of a few rows may still merge: there a file's fixed overhead is a large share.)
      await policy.step(conn, Infinity, nextDay);
      expect(currentVersion(lake).entries('l2').length).toBe(2);
      expect(currentVersion(lake).entries('raw').length).toBe(2);
      await runIngest(halfHours.slice(13, 15), { lakeDir: lake, threads: 1, memoryLimit: '1GB', batchRows: 1, compactSmallFiles: 0 });
      const grown = await lakeContent(db, currentVersion(lake));
      expect((await policy.step(conn, Infinity, nextDay))?.version).toBe(currentVersion(lake).version);
      expect(currentVersion(lake).entries('l2').length).toBe(1);
      expect(currentVersion(lake).entries('raw').length).toBe(1);
      expect(await lakeContent(db, currentVersion(lake))).toEqual(grown);
    } finally {
      conn.closeSync();
    }
  });
});
