import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { DuckDBInstance, type DuckDBConnection } from '@duckdb/node-api';
import type { Manifest } from '../../src/lake/versions.js';

/**
 * Helpers of the lake-version tests (versions.test.ts, versions-kill.test.ts). They read the lake the plain way:
 * `_versions/current.json` parsed here, the Parquet files read by a DuckDB of the test's own, the disk walked
 * with fs — never through the code under test.
 */

export type TestDb = {
  conn: DuckDBConnection;
  rows(sql: string): Promise<Record<string, unknown>[]>;
  one(sql: string): Promise<Record<string, unknown>>;
  close(): void;
};

/** A small in-memory DuckDB of the test's own (UTC, modest memory). */
export async function openTestDb(threads = 1): Promise<TestDb> {
  const db = await DuckDBInstance.create(':memory:', { threads: String(threads), memory_limit: '1GB' });
  const conn = await db.connect();
  await conn.run(`SET TimeZone = 'UTC'`);
  const rows = async (sql: string) => (await conn.runAndReadAll(sql)).getRowObjectsJson() as Record<string, unknown>[];
  return {
    conn,
    rows,
    one: async (sql) => (await rows(sql))[0] ?? {},
    close: () => {
      conn.closeSync();
      db.closeSync();
    },
  };
}

export const q = (s: string): string => `'${s.replace(/'/g, "''")}'`;
export const list = (files: readonly string[]): string => `[${files.map(q).join(', ')}]`;

/** The published manifest, read straight from `_versions/current.json` (null: no version yet). */
export function publishedManifest(lake: string): Manifest | null {
  const f = path.join(lake, '_versions', 'current.json');
  return fs.existsSync(f) ? (JSON.parse(fs.readFileSync(f, 'utf8')) as Manifest) : null;
}

/** A manifest's files per set, absolute. */
export function manifestSets(lake: string, m: Manifest): Map<string, string[]> {
  const out = new Map<string, string[]>();
  for (const [name, entries] of Object.entries(m.sets))
    if (entries && entries.length > 0)
      out.set(
        name,
        entries.map((e) => path.join(lake, e.path)),
      );
  return out;
}

/** Every path (relative to the lake) a manifest names. */
export function namedPaths(m: Manifest): Set<string> {
  return new Set(Object.values(m.sets).flatMap((l) => (l ?? []).map((e) => e.path)));
}

/** Every `.parquet` file on disk outside `_ingest/` and `_versions/`, relative to the lake, sorted. */
export function parquetOnDisk(lake: string): string[] {
  const out: string[] = [];
  const walk = (rel: string): void => {
    for (const e of fs.readdirSync(path.join(lake, rel), { withFileTypes: true })) {
      const r = rel ? `${rel}/${e.name}` : e.name;
      if (e.isDirectory()) {
        if (rel === '' && (e.name === '_ingest' || e.name === '_versions')) continue;
        walk(r);
      } else if (e.name.endsWith('.parquet')) out.push(r);
    }
  };
  if (fs.existsSync(lake)) walk('');
  return out.sort();
}

/** Every numbered manifest still on disk. */
export function manifestsOnDisk(lake: string): Manifest[] {
  const dir = path.join(lake, '_versions');
  if (!fs.existsSync(dir)) return [];
  return fs
    .readdirSync(dir)
    .filter((n) => /^v[0-9]{8}\.json$/.test(n))
    .sort()
    .map((n) => JSON.parse(fs.readFileSync(path.join(dir, n), 'utf8')) as Manifest);
}

/**
 * A digest of each set's rows: row count and md5 over the sorted JSON text of every row, computed by DuckDB
 * over exactly the given files. Equal digests mean equal multisets of rows.
 */
export async function digestSets(db: TestDb, sets: Map<string, string[]>): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  for (const [name, files] of [...sets.entries()].sort(([a], [b]) => a.localeCompare(b))) {
    const r = await db.one(
      `SELECT count(*) AS n, coalesce(md5(string_agg(j, chr(10) ORDER BY j)), '') AS h
       FROM (SELECT to_json(t)::VARCHAR AS j FROM read_parquet(${list(files)}, hive_partitioning = false) t)`,
    );
    out[name] = `${String(r.n)}:${String(r.h)}`;
  }
  return out;
}

/** The published version's digest per set (see digestSets); {} before the first version. */
export async function lakeDigest(db: TestDb, lake: string): Promise<Record<string, string>> {
  const m = publishedManifest(lake);
  return m ? digestSets(db, manifestSets(lake, m)) : {};
}

export function sha256(file: string): string {
  return crypto.createHash('sha256').update(fs.readFileSync(file)).digest('hex');
}

/** Writes the lines of a JSONL file into two files: the first `share` of them and the rest. */
export function splitJsonl(src: string, a: string, b: string, share = 0.5): void {
  const lines = fs
    .readFileSync(src, 'utf8')
    .split('\n')
    .filter((l) => l.trim() !== '');
  // Cut between two receive milliseconds: seq is receive ms × 1e6 + the message's rank within the file at that ms,
  // so two capture files sharing a millisecond would give two messages one seq (a real capture's files do not).
  const ms = (l: string | undefined): string | undefined => (l === undefined ? undefined : /"timestamp":"(\d+)"/.exec(l)?.[1]);
  let cut = Math.floor(lines.length * share);
  while (cut < lines.length && ms(lines[cut]) !== undefined && ms(lines[cut]) === ms(lines[cut - 1])) cut += 1;
  fs.mkdirSync(path.dirname(a), { recursive: true });
  fs.mkdirSync(path.dirname(b), { recursive: true });
  fs.writeFileSync(a, `${lines.slice(0, cut).join('\n')}\n`);
  fs.writeFileSync(b, `${lines.slice(cut).join('\n')}\n`);
}

/** Lines of a JSONL file. */
export function jsonlLines(file: string): Record<string, unknown>[] {
  return fs
    .readFileSync(file, 'utf8')
    .split('\n')
    .filter((l) => l.trim() !== '')
    .map((l) => JSON.parse(l) as Record<string, unknown>);
}

export { spawnCli, type Child } from './lakeutil.js';
