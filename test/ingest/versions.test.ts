import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generate } from '../../sim/generate/index.js';
import { runIngest } from '../../ingest/run.js';
import { DATASETS, type DatasetName } from '../../src/lake/layout.js';
import { currentVersion, setPartition, type Manifest, type SetName } from '../../src/lake/versions.js';
import { createTestKey, startTestServer, testConfig } from '../helpers/server.js';
import { listing, runCli } from './lakeutil.js';
import { tempDir } from './oracle.js';
import {
  digestSets,
  list,
  manifestSets,
  manifestsOnDisk,
  namedPaths,
  openTestDb,
  parquetOnDisk,
  publishedManifest,
  q,
  sha256,
  splitJsonl,
  type TestDb,
} from './versions-util.js';

/**
 * Lake versions (src/lake/versions.ts, ingest/versions.ts): a batch lands as new files published by one rename,
 * so a reader that resolves a version sees all of a batch or none of it; appends write new files only;
 * compaction merges a partition's files without changing a row and leaves older versions readable for the
 * grace period. Every check reads the Parquet files with a DuckDB of the test's own.
 */

const tmp = tempDir('pmlake-versions-');
let db: TestDb;
beforeAll(async () => {
  db = await openTestDb(1);
});
afterAll(() => {
  db?.close();
  tmp.cleanup();
});

const OPTS = { threads: 2, memoryLimit: '2GB' } as const;

/** A generated history's inputs of one day (index into the report's dates). */
function dayInputs(gen: string, date: string): string[] {
  return [path.join(gen, 'fills', `${date}.jsonl`), path.join(gen, 'ws', `${date}.jsonl`)];
}

type FilesOf = (name: string) => string[];

/**
 * The invariants that hold between data sets of one published version and break when a reader mixes two
 * batches: minute and hour candles count exactly the trades of their token and bucket; the catalogue's
 * availability counts sum to the trades and book snapshot rows; books and top of book come from l2 rows of
 * their asset; trades name catalogued tokens and are unique. Returns the broken ones.
 */
async function inconsistencies(d: TestDb, files: FilesOf): Promise<string[]> {
  const src = (name: string): string => {
    const f = files(name);
    if (f.length === 0) throw new Error(`no files for ${name}`);
    return `read_parquet(${list(f)}, hive_partitioning = false)`;
  };
  const bad: string[] = [];
  const check = async (label: string, sql: string): Promise<void> => {
    const r = await d.one(sql);
    const n = Number(r.bad);
    if (n !== 0) bad.push(`${label}: ${n}`);
  };
  try {
    const T = src('trades');
    await check('duplicate trade ids', `SELECT count(*) - count(DISTINCT id) AS bad FROM ${T}`);
    for (const [set, unit] of [
      ['candles_1m', 'minute'],
      ['candles_1h', 'hour'],
    ] as const) {
      const C = src(set);
      await check(`${set} duplicate keys`, `SELECT count(*) - count(DISTINCT (token_id, bucket)) AS bad FROM ${C}`);
      await check(
        `${set} trade_count differs from the trades`,
        `WITH t AS (SELECT token_id, date_trunc('${unit}', ts) AS b, count(*) AS n FROM ${T} GROUP BY ALL),
              c AS (SELECT token_id, bucket AS b, trade_count AS n FROM ${C})
         SELECT count(*) AS bad FROM t FULL OUTER JOIN c ON t.token_id = c.token_id AND t.b = c.b WHERE t.n IS DISTINCT FROM c.n`,
      );
    }
    await check(
      'catalogue trade_count sum differs from the trades rows',
      `SELECT abs((SELECT coalesce(sum(trade_count), 0) FROM ${src('markets')}) - (SELECT count(*) FROM ${T})) AS bad`,
    );
    await check(
      'catalogue orderbook_count sum differs from the book_snapshots rows',
      `SELECT abs((SELECT coalesce(sum(orderbook_count), 0) FROM ${src('markets')}) - (SELECT count(*) FROM ${src('book_snapshots')})) AS bad`,
    );
    await check('trades of tokens not in the catalogue', `SELECT count(*) AS bad FROM ${T} WHERE token_id NOT IN (SELECT token_id FROM ${src('tokens')})`);
    for (const set of ['book_snapshots', 'top_of_book']) {
      await check(
        `${set} assets without l2 rows`,
        `SELECT count(DISTINCT asset_id) AS bad FROM ${src(set)} WHERE asset_id NOT IN (SELECT DISTINCT asset_id FROM ${src('l2')})`,
      );
    }
  } catch (err) {
    bad.push(`unreadable: ${(err as Error).message.split('\n')[0]}`);
  }
  return bad;
}

const manifestFiles = (lake: string, m: Manifest): FilesOf => {
  const sets = manifestSets(lake, m);
  return (name) => sets.get(name) ?? [];
};

describe('lake versions', () => {
  it('a reader resolving one version at a time never sees half a batch while ingests publish', async () => {
    const root = path.join(tmp.dir, 'a');
    const lake = path.join(root, 'lake');
    const gen = path.join(root, 'gen');
    const genB = path.join(root, 'genB');
    const g = await generate({ markets: 8, days: 3, seed: 31, start: '2025-10-13', out: gen, workers: 0, rate: 0.5 });
    await generate({ markets: 3, days: 1, seed: 32, start: '2025-10-16', out: genB, workers: 0, rate: 0.5 });
    const dates = g.files.ws.map((f) => path.basename(f, '.jsonl'));
    await runIngest([path.join(gen, 'markets'), ...dayInputs(gen, dates[0]!)], { lakeDir: lake, ...OPTS });
    expect(currentVersion(lake).version).toBe(1);

    const srv = await startTestServer(testConfig({ PMLAKE_LAKE: lake, PMLAKE_STATE: path.join(root, 'state') }));
    let stop = false;
    const seen = new Map<number, number>();
    const problems: string[] = [];
    let iterations = 0;
    // The reader: one version resolved per round, every check over exactly that version's files.
    const reader = (async () => {
      while (!stop) {
        const v = currentVersion(lake);
        const bad = await inconsistencies(db, (n) => v.files(n as DatasetName));
        for (const b of bad) problems.push(`v${v.version}: ${b}`);
        seen.set(v.version, (seen.get(v.version) ?? 0) + 1);
        iterations += 1;
      }
    })();
    // The service: /v1/stats pins one version per request; each answer must be one version's counts.
    const answers: string[] = [];
    const http = (async () => {
      while (!stop) {
        const r = await fetch(`${srv.url}/v1/stats`);
        const s = (await r.json()) as Record<string, number>;
        answers.push(`${s.lake_version}|${s.markets}|${s.trades}|${s.orderbook_snapshots}|${s.top_of_book_rows}`);
        await new Promise((res) => setTimeout(res, 20));
      }
    })();
    try {
      // Two ingests in child processes (the same markets a day later; three new markets), then one in this
      // process in batches of one file (metadata, fills and tape land as versions of their own).
      const r2 = await runCli(['ingest', ...dayInputs(gen, dates[1]!)], { PMLAKE_LAKE: lake, PMLAKE_DUCKDB_MEMORY: '2GB' });
      expect(r2.code, r2.stderr).toBe(0);
      const r3 = await runCli(['ingest', genB], { PMLAKE_LAKE: lake, PMLAKE_DUCKDB_MEMORY: '2GB' });
      expect(r3.code, r3.stderr).toBe(0);
      const r4 = await runIngest(dayInputs(gen, dates[2]!), { lakeDir: lake, ...OPTS, batchRows: 1 });
      expect(r4.versions_published.length).toBe(2);
      // Let the reader finish a round on the last version.
      const last = currentVersion(lake).version;
      while ((seen.get(last) ?? 0) < 2) await new Promise((res) => setTimeout(res, 20));
    } finally {
      stop = true;
      await reader;
      await http;
    }

    expect(problems).toEqual([]);
    expect(iterations).toBeGreaterThanOrEqual(20);
    expect(seen.size).toBeGreaterThanOrEqual(3);
    // Every version ever published (the grace period keeps them all) is consistent, including the ones between
    // the reader's rounds; the last one is the sum of all inputs.
    const all = manifestsOnDisk(lake);
    expect(all.map((m) => m.version)).toEqual([1, 2, 3, 4, 5]);
    const counts = new Set<string>();
    for (const m of all) {
      expect(await inconsistencies(db, manifestFiles(lake, m)), `v${m.version}`).toEqual([]);
      const f = manifestFiles(lake, m);
      const c = await db.one(
        `SELECT (SELECT count(*) FROM read_parquet(${list(f('markets'))})) AS m, (SELECT count(*) FROM read_parquet(${list(f('trades'))})) AS t,
                (SELECT count(*) FROM read_parquet(${list(f('book_snapshots'))})) AS b, (SELECT count(*) FROM read_parquet(${list(f('top_of_book'))})) AS k`,
      );
      counts.add(`${m.version}|${c.m}|${c.t}|${c.b}|${c.k}`);
    }
    const finalTrades = Number((await db.one(`SELECT count(*) AS n FROM read_parquet(${list(currentVersion(lake).files('trades'))})`)).n);
    const genTrades = g.counts.trades + JSON.parse(fs.readFileSync(path.join(genB, 'manifest.json'), 'utf8')).counts.trades;
    expect(finalTrades).toBe(genTrades);
    // The service answered throughout, and each answer was exactly the counts of the version it names.
    expect(answers.length).toBeGreaterThanOrEqual(10);
    for (const a of new Set(answers)) expect(counts, a).toContain(a);
    expect(new Set(answers).size).toBeGreaterThanOrEqual(2);
    // Catalogue and stats agree with the lake at the end.
    const key = await createTestKey(srv, { email: 'pro@example.com', plan: 'professional' });
    const markets = (await (await fetch(`${srv.url}/v1/markets?limit=1000`, { headers: { 'x-api-key': key } })).json()) as { trade_count: number }[];
    expect(markets.reduce((s, m) => s + m.trade_count, 0)).toBe(finalTrades);
    const stats = (await (await fetch(`${srv.url}/v1/stats`)).json()) as { trades: number };
    expect(stats.trades).toBe(finalTrades);
    const health = (await (await fetch(`${srv.url}/health`)).json()) as { lake_version: number; lake_published_at: string };
    expect(health.lake_version).toBe(all[all.length - 1]!.version);
    expect(health.lake_published_at).toBe(all[all.length - 1]!.published_at);
    await srv.close();

    // The checks have teeth: trades of the last version with everything else of the first is caught.
    const first = manifestFiles(lake, all[0]!);
    const lastFiles = manifestFiles(lake, all[all.length - 1]!);
    expect((await inconsistencies(db, (n) => (n === 'trades' ? lastFiles(n) : first(n)))).length).toBeGreaterThan(0);
    expect((await inconsistencies(db, (n) => (n === 'candles_1m' ? lastFiles(n) : first(n)))).length).toBeGreaterThan(0);
  });

  it('an append writes new files in proportion to the batch and rewrites nothing', async () => {
    const root = path.join(tmp.dir, 'b');
    const lake = path.join(root, 'lake');
    const alone = path.join(root, 'alone');
    const big = path.join(root, 'big');
    const day = path.join(root, 'day');
    // A month of history whose trades partition is megabytes, and one later day of three other markets.
    await generate({ markets: 30, days: 5, seed: 11, start: '2025-10-01', out: big, workers: 0, rate: 1, makerFills: 8 });
    const small = await generate({ markets: 3, days: 1, seed: 12, start: '2025-10-25', out: day, workers: 0, rate: 1 });
    await runIngest([big], { lakeDir: lake, ...OPTS });
    await runIngest([day], { lakeDir: alone, ...OPTS });
    const tradesMonth = currentVersion(lake).partitionFiles('trades', ['2025-10']);
    expect(tradesMonth.length).toBe(1);
    const monthBytes = fs.statSync(tradesMonth[0]!).size;
    expect(monthBytes).toBeGreaterThan(2_000_000);
    const aloneManifest = publishedManifest(alone)!;
    const aloneBytes = [...namedPaths(aloneManifest)].reduce((s, p) => s + fs.statSync(path.join(alone, p)).size, 0);

    const before = publishedManifest(lake)!;
    const beforeList = listing(lake);
    const beforeParquet = parquetOnDisk(lake);
    const hashes = Object.fromEntries(beforeParquet.map((f) => [f, sha256(path.join(lake, f))]));
    const report = await runIngest([day], { lakeDir: lake, ...OPTS });
    expect(report.versions_published).toEqual([before.version + 1]);
    const after = publishedManifest(lake)!;

    // Nothing that existed was rewritten: same bytes, same inode and mtime.
    for (const f of beforeParquet) {
      expect(listing(lake)[f], f).toBe(beforeList[f]);
      expect(sha256(path.join(lake, f)), f).toBe(hashes[f]);
    }
    // Every data-set file stays in the new version; only the small catalogue files were replaced.
    for (const [name, entries] of Object.entries(before.sets)) {
      if (setPartition(name as SetName) === 'none') continue;
      const now = new Set((after.sets[name as keyof Manifest['sets']] ?? []).map((e) => e.path));
      for (const e of entries ?? []) expect(now.has(e.path), `${name} ${e.path} retired`).toBe(true);
    }
    // The new bytes: what the same day costs alone, not what the partitions it lands in hold.
    const added = parquetOnDisk(lake).filter((f) => !(f in hashes));
    const addedBytes = added.reduce((s, f) => s + fs.statSync(path.join(lake, f)).size, 0);
    expect(new Set(added)).toEqual(new Set([...namedPaths(after)].filter((p) => !namedPaths(before).has(p))));
    expect(report.bytes_written).toBe(addedBytes);
    expect(addedBytes).toBeLessThanOrEqual(10 * aloneBytes);
    // The trades month in particular gained one small file, not a rewrite of its megabytes.
    const addedTrades = added.filter((f) => f.startsWith('trades/'));
    expect(addedTrades.length).toBe(1);
    const addedTradeBytes = fs.statSync(path.join(lake, addedTrades[0]!)).size;
    expect(addedTradeBytes).toBeLessThan(monthBytes / 10);

    // The rows: the lake before plus the day alone, set by set, and the day's trades as the generator counted them.
    expect(report.rows_added.trades).toBe(small.counts.trades);
    const beforeSets = manifestSets(lake, before);
    const aloneSets = manifestSets(alone, aloneManifest);
    const afterSets = manifestSets(lake, after);
    for (const name of ['trades', 'candles_1m', 'candles_1h', 'l2', 'raw', 'last_trades', 'book_snapshots', 'top_of_book']) {
      const union = await digestSets(db, new Map([[name, [...beforeSets.get(name)!, ...aloneSets.get(name)!]]]));
      expect(await digestSets(db, new Map([[name, afterSets.get(name)!]])), name).toEqual(union);
    }
    const n = async (files: string[]) => Number((await db.one(`SELECT count(*) AS n FROM read_parquet(${list(files)})`)).n);
    expect(await n(afterSets.get('trades')!)).toBe((await n(beforeSets.get('trades')!)) + small.counts.trades);
  });
});

/** Rows of a file out of the data set's sort order (NULLs last, as ORDER BY puts them), in file order. */
async function outOfOrder(d: TestDb, name: DatasetName, file: string): Promise<number> {
  const cols = DATASETS[name].sortBy.map((c) => `"${c}"`);
  const cmp = (a: string, b: string) =>
    `CASE WHEN ${a} IS NOT DISTINCT FROM ${b} THEN 0 WHEN ${a} IS NULL THEN 1 WHEN ${b} IS NULL THEN -1 WHEN ${a} < ${b} THEN -1 ELSE 1 END`;
  const chain = cols.map((c, i) => cmp(c, `p${i}`)).reduceRight((rest, c) => `CASE WHEN (${c}) <> 0 THEN (${c}) ELSE (${rest}) END`, '0');
  const r = await d.one(
    `SELECT count(*) AS bad FROM (
       SELECT *, ${cols.map((c, i) => `lag(${c}) OVER w AS p${i}`).join(', ')}, row_number() OVER w AS k
       FROM read_parquet(${q(file)}, file_row_number = true) WINDOW w AS (ORDER BY file_row_number))
     WHERE k > 1 AND (${chain}) < 0`,
  );
  return Number(r.bad);
}

describe('compaction, re-ingest and the version log (one lake, in order)', () => {
  const root = path.join(tmp.dir, 'c');
  const lake = path.join(root, 'lake');
  const gen = path.join(root, 'gen');
  const genB = path.join(root, 'genB');
  const half = (n: string) => path.join(root, 'halves', n);
  let inputs: string[][] = [];
  /** What each version should say in the log: kind and rows added, in publication order. */
  const expected: { kind: string; rows?: Record<string, number> }[] = [];
  const ingest = async (paths: string[]) => {
    const r = await runIngest(paths, { lakeDir: lake, ...OPTS });
    for (const _v of r.versions_published) expected.push({ kind: 'ingest', rows: Object.fromEntries(Object.entries(r.rows_added).filter(([, n]) => n > 0)) });
    return r;
  };

  beforeAll(async () => {
    const g = await generate({ markets: 6, days: 2, seed: 41, start: '2025-10-20', out: gen, workers: 0, rate: 0.5 });
    await generate({ markets: 2, days: 1, seed: 42, start: '2025-10-22', out: genB, workers: 0, rate: 0.5 });
    const [d1, d2] = g.files.ws.map((f) => path.basename(f, '.jsonl'));
    // Day 2's tape arrives in two files, so its date partitions hold two files as well as the month ones.
    splitJsonl(path.join(gen, 'ws', `${d2}.jsonl`), half('a/ws.jsonl'), half('b/ws.jsonl'));
    inputs = [[path.join(gen, 'markets'), ...dayInputs(gen, d1!)], [path.join(gen, 'fills', `${d2}.jsonl`), half('a/ws.jsonl')], [half('b/ws.jsonl')], [genB]];
    for (const i of inputs) await ingest(i);
  });

  it('compaction merges each partition into one sorted file with the same rows; the old version stays readable, then is swept', async () => {
    const pre = publishedManifest(lake)!;
    expect(pre.version).toBe(4);
    const preSets = manifestSets(lake, pre);
    const preDigest = await digestSets(db, preSets);
    // Which data sets have a partition of several files (each becomes one compaction version).
    const multi = Object.entries(pre.sets)
      .filter(([name, entries]) => {
        if (setPartition(name as SetName) === 'none') return false;
        const per = new Map<string, number>();
        for (const e of entries ?? []) per.set(e.partition!, (per.get(e.partition!) ?? 0) + 1);
        return [...per.values()].some((n) => n > 1);
      })
      .map(([name]) => name);
    for (const name of ['trades', 'candles_1m', 'l2', 'raw', 'book_snapshots']) expect(multi).toContain(name);

    const run = await runCli(['compact'], { PMLAKE_LAKE: lake, PMLAKE_DUCKDB_MEMORY: '2GB' });
    expect(run.code, run.stderr).toBe(0);
    const report = JSON.parse(run.stdout) as { current_version: number; files_out: number; partitions: number };
    for (const _n of multi) expected.push({ kind: 'compact' });
    const post = publishedManifest(lake)!;
    expect(post.version).toBe(pre.version + multi.length);
    expect(report.current_version).toBe(post.version);

    // One file per partition, in the data set's sort order, no natural key twice.
    for (const [name, entries] of Object.entries(post.sets)) {
      if (setPartition(name as SetName) === 'none') continue;
      const parts = (entries ?? []).map((e) => e.partition);
      expect(new Set(parts).size, name).toBe(parts.length);
      for (const e of entries ?? []) expect(await outOfOrder(db, name as DatasetName, path.join(lake, e.path)), e.path).toBe(0);
      const key = DATASETS[name as DatasetName].naturalKey.map((c) => `"${c}"`).join(', ');
      const files = (entries ?? []).map((e) => path.join(lake, e.path));
      expect(Number((await db.one(`SELECT count(*) - count(DISTINCT (${key})) AS d FROM read_parquet(${list(files)})`)).d), name).toBe(0);
    }
    // (The order check catches a file written out of order.)
    const reversed = path.join(root, 'reversed.parquet');
    const l2 = post.sets.l2![0]!;
    await db.conn.run(`COPY (SELECT * FROM read_parquet(${q(path.join(lake, l2.path))}) ORDER BY asset_id DESC, seq) TO ${q(reversed)} (FORMAT parquet)`);
    expect(await outOfOrder(db, 'l2', reversed)).toBeGreaterThan(0);
    // The same rows, set by set; and still consistent across sets.
    expect(await digestSets(db, manifestSets(lake, post))).toEqual(preDigest);
    expect(await inconsistencies(db, manifestFiles(lake, post))).toEqual([]);
    // A reader still holding the version before can read every file of it (default grace period).
    expect(await digestSets(db, preSets)).toEqual(preDigest);
    const retired = [...namedPaths(pre)].filter((p) => !namedPaths(post).has(p));
    expect(retired.length).toBeGreaterThan(multi.length);
    for (const p of retired) expect(fs.existsSync(path.join(lake, p)), p).toBe(true);

    // With no grace period, the next compaction (nothing left to merge) removes them, and what earlier ingests
    // retired (replaced catalogue and candle files): the disk holds exactly the current version's files.
    const stale = parquetOnDisk(lake).filter((p) => !namedPaths(post).has(p));
    for (const p of retired) expect(stale).toContain(p);
    const again = await runCli(['compact'], { PMLAKE_LAKE: lake, PMLAKE_LAKE_GRACE_SECONDS: '0' });
    expect(again.code, again.stderr).toBe(0);
    const r2 = JSON.parse(again.stdout) as { version: number | null; current_version: number; swept: { retired: number; orphans: number } };
    expect(r2.version).toBeNull();
    expect(r2.current_version).toBe(post.version);
    expect(r2.swept.retired).toBe(stale.length);
    expect(r2.swept.orphans).toBe(0);
    for (const p of retired) expect(fs.existsSync(path.join(lake, p)), p).toBe(false);
    expect(parquetOnDisk(lake)).toEqual([...namedPaths(post)].sort());
    expect(await digestSets(db, manifestSets(lake, publishedManifest(lake)!))).toEqual(preDigest);
  });

  it('re-ingesting the same inputs publishes nothing and adds no row, even with the ledger lost', async () => {
    const v = publishedManifest(lake)!.version;
    const files = () => Object.fromEntries(Object.entries(listing(lake)).filter(([f]) => !f.startsWith('_ingest/')));
    const before = files();
    const all = inputs.flat();
    const r = await runIngest(all, { lakeDir: lake, ...OPTS });
    expect(r.versions_published).toEqual([]);
    expect(r.skipped).toBeGreaterThan(0);
    expect(Object.values(r.rows_added).every((n) => n === 0)).toBe(true);
    expect(publishedManifest(lake)!.version).toBe(v);
    expect(files()).toEqual(before);
    // A run killed after its publish and before its ledger line: everything is staged again, and natural keys,
    // recomputed candles and the catalogue all come out equal to what is stored.
    fs.renameSync(path.join(lake, '_ingest', 'ledger.jsonl'), path.join(root, 'ledger.away'));
    const r2 = await runIngest(all, { lakeDir: lake, ...OPTS });
    expect(r2.ingested).toBe(all.length + 2);
    expect(r2.versions_published).toEqual([]);
    expect(
      Object.values(r2.rows_added).every((n) => n === 0),
      JSON.stringify(r2.rows_added),
    ).toBe(true);
    expect(r2.bytes_written).toBe(0);
    expect(publishedManifest(lake)!.version).toBe(v);
    expect(files()).toEqual(before);
  });

  it('an ingest after compaction lands as usual, and `pmlake lake versions` lists every version with its kind', async () => {
    const genC = path.join(root, 'genC');
    await generate({ markets: 2, days: 1, seed: 43, start: '2025-10-23', out: genC, workers: 0, rate: 0.5 });
    const r = await ingest([genC]);
    expect(r.versions_published.length).toBe(1);
    const cur = publishedManifest(lake)!;
    expect(await inconsistencies(db, manifestFiles(lake, cur))).toEqual([]);

    const out = await runCli(['lake', 'versions', '--json'], { PMLAKE_LAKE: lake });
    expect(out.code, out.stderr).toBe(0);
    const log = JSON.parse(out.stdout) as {
      current: number;
      versions: { version: number; parent: number | null; kind: string; change: { rows_added: Record<string, number>; files_added: number } }[];
    };
    expect(log.current).toBe(cur.version);
    expect(log.versions.map((l) => l.version)).toEqual(expected.map((_, i) => i + 1));
    expect(log.versions.map((l) => l.parent)).toEqual(expected.map((_, i) => i));
    expect(log.versions.map((l) => l.kind)).toEqual(expected.map((e) => e.kind));
    for (const [i, e] of expected.entries()) if (e.rows) expect(log.versions[i]!.change.rows_added, `v${i + 1}`).toEqual(e.rows);
    expect(log.versions.every((l) => l.change.files_added > 0)).toBe(true);
    const text = await runCli(['lake', 'versions'], { PMLAKE_LAKE: lake });
    const marked = text.stdout.split('\n').filter((l) => l.includes('(current)'));
    expect(marked.length).toBe(1);
    expect(marked[0]!.trim().split(/\s+/)[0]).toBe(String(cur.version));
  });
});
