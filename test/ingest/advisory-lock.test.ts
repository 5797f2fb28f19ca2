import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runIngest } from '../../ingest/run.js';
import { ConfigError, loadConfig } from '../../src/config.js';
import { acquireLakeLock, LakeLockedError, LakeLockUnavailableError, readLedger } from '../../ingest/ledger.js';
import { freePort, startTestPostgres, type TestPostgres } from '../helpers/postgres.js';
import { listing, runCli } from './lakeutil.js';
import { tempDir } from './oracle.js';

/**
 * The ingest's single-writer lock across machines (PMLAKE_DATABASE_URL): a PostgreSQL advisory lock on a real
 * throwaway cluster (scripts/postgres-local.sh), beside the lock file that still guards a machine on its own.
 */
const INPUT = path.resolve('test/fixtures/venue/ws/2025-01-21_book.json');
const INPUT_SHA = createHash('sha256').update(fs.readFileSync(INPUT)).digest('hex');
const tmp = tempDir('pmlake-advisory-');
let db: TestPostgres;

beforeAll(async () => {
  db = await startTestPostgres();
}, 120_000);
afterAll(async () => {
  await db?.close();
  tmp.cleanup();
});

const ingest = (lake: string, databaseUrl?: string) => runIngest([INPUT], { lakeDir: lake, derived: false, threads: 1, memoryLimit: '1GB', databaseUrl });

/** Advisory locks granted on the server right now, as seen by a separate session. */
async function advisoryLocks(): Promise<number> {
  const c = new pg.Client({ connectionString: db.url });
  await c.connect();
  try {
    const r = await c.query<{ n: string }>(`SELECT count(*) AS n FROM pg_locks WHERE locktype = 'advisory' AND granted`);
    return Number(r.rows[0]!.n);
  } finally {
    await c.end();
  }
}

/** Polls a condition (bounded: 100 tries, 50 ms apart); fails the test if it never holds. */
async function until(cond: () => Promise<boolean>): Promise<void> {
  for (let i = 0; i < 100; i++) {
    if (await cond()) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error('condition never held');
}

/** Another process holding the lake's lock through the same database until killed; resolves once it holds it. */
function holderProcess(lake: string): Promise<{ pid: number; kill(): Promise<void> }> {
  const script = path.join(tmp.dir, 'holder.mts');
  fs.writeFileSync(
    script,
    `import { acquireLakeLock } from ${JSON.stringify(path.resolve('ingest/ledger.ts'))};\n` +
      `await acquireLakeLock(process.argv[2], { databaseUrl: process.argv[3] });\n` +
      `process.stdout.write('held\\n');\nsetInterval(() => {}, 60_000);\n`,
  );
  const child = spawn(process.execPath, ['--import', 'tsx', script, lake, db.url], { stdio: ['ignore', 'pipe', 'pipe'] });
  let err = '';
  child.stderr.on('data', (d: Buffer) => (err += d.toString()));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  return new Promise((resolve, reject) => {
    child.once('exit', (code) => reject(new Error(`holder exited (${code}): ${err}`)));
    child.stdout.on('data', (d: Buffer) => {
      if (!d.toString().includes('held')) return;
      resolve({
        pid: child.pid!,
        kill: async () => {
          child.kill('SIGKILL');
          await exited;
        },
      });
    });
  });
}

describe('ingest lock across machines (PMLAKE_DATABASE_URL)', () => {
  it('a second ingest through the same database is refused while another process holds the lake, and lands once it is gone', async () => {
    const lake = path.join(tmp.dir, 'shared');
    const holder = await holderProcess(lake);
    try {
      const before = listing(lake);
      const refused = await ingest(lake, db.url).then(
        () => null,
        (e: unknown) => e,
      );
      expect(refused).toBeInstanceOf(LakeLockedError);
      // Refused by the advisory lock (it names the session holding it), not by the lock file's pid check.
      expect((refused as Error).message).toBe(`lake ${lake} is locked by a running ingest (pmlake ingest pid ${holder.pid} on ${os.hostname()})`);
      // The lock file can vanish (another machine's view of the lake): the advisory lock alone still refuses.
      fs.rmSync(path.join(lake, '_ingest', 'lock'));
      await expect(ingest(lake, db.url)).rejects.toBeInstanceOf(LakeLockedError);
      const { ['_ingest/lock']: _removed, ...rest } = before;
      expect(Object.keys(before)).toContain('_ingest/lock');
      expect(listing(lake)).toEqual(rest);
    } finally {
      // kill -9: no release runs; the server drops the dead session's lock once it sees the socket closed.
      await holder.kill();
    }
    await until(async () => (await advisoryLocks()) === 0);
    const report = await ingest(lake, db.url);
    expect(report.ingested).toBe(1);
    expect([...readLedger(lake).keys()]).toEqual([INPUT_SHA]);
    // Released after the run: no advisory lock left, no lock file left.
    expect(await advisoryLocks()).toBe(0);
    expect(fs.existsSync(path.join(lake, '_ingest', 'lock'))).toBe(false);
  }, 60_000);

  it('pmlake ingest reads PMLAKE_DATABASE_URL: refused (exit 2) while the lake is held, a clear error naming neither host nor password when PostgreSQL is unreachable', async () => {
    const lake = path.join(tmp.dir, 'cli');
    const held = await acquireLakeLock(lake, { databaseUrl: db.url });
    const closed = await freePort();
    const away = `postgresql://pmlake:${db.password}@127.0.0.1:${closed}/pmlake`;
    const lake2 = path.join(tmp.dir, 'cli-away');
    try {
      const [locked, unreachable] = await Promise.all([
        runCli(['ingest', INPUT], { PMLAKE_LAKE: lake, PMLAKE_DATABASE_URL: db.url }),
        runCli(['ingest', INPUT], { PMLAKE_LAKE: lake2, PMLAKE_DATABASE_URL: away }),
      ]);
      expect(locked.code, locked.stderr).toBe(2);
      expect(locked.stderr).toContain(`lake ${lake} is locked by a running ingest (pmlake ingest pid ${process.pid} on ${os.hostname()})`);
      expect(unreachable.code, unreachable.stderr).toBe(2);
      expect(unreachable.stderr).toContain('could not connect: connection refused; nothing was written');
      for (const secret of [db.password, '127.0.0.1', String(closed)]) expect(unreachable.stderr).not.toContain(secret);
      expect(listing(lake2)).toEqual({});
    } finally {
      await held();
    }
    expect(await advisoryLocks()).toBe(0);
  }, 60_000);

  it('PostgreSQL unreachable: the ingest fails before writing anything, the lake stays as it was', async () => {
    const lake = path.join(tmp.dir, 'away');
    expect((await ingest(lake)).ingested).toBe(1);
    const before = listing(lake);
    const closed = await freePort();
    const err = await ingest(lake, `postgresql://pmlake:${db.password}@127.0.0.1:${closed}/pmlake`).then(
      () => null,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(LakeLockUnavailableError);
    const message = (err as Error).message;
    expect(message).toContain('could not connect: connection refused');
    for (const secret of [db.password, '127.0.0.1', String(closed)]) expect(message).not.toContain(secret);
    expect(listing(lake)).toEqual(before);
  }, 60_000);

  it('without a database URL the lock file still excludes, and a writer without the URL also holds off one with it on the same machine', async () => {
    const lake = path.join(tmp.dir, 'file-only');
    const held = await acquireLakeLock(lake);
    try {
      for (const url of [undefined, db.url]) {
        const err = await ingest(lake, url).then(
          () => null,
          (e: unknown) => e,
        );
        expect(err, String(url)).toBeInstanceOf(LakeLockedError);
        expect((err as Error).message).toBe(`lake ${lake} is locked by a running ingest (pid ${process.pid})`);
      }
    } finally {
      await held();
    }
    expect((await ingest(lake)).ingested).toBe(1);
    expect(await advisoryLocks()).toBe(0);
  }, 60_000);

  it('a lock file another host left: refused without the database, taken over under the advisory lock (which proves its writer gone)', async () => {
    const lake = path.join(tmp.dir, 'foreign');
    const lockFile = path.join(lake, '_ingest', 'lock');
    fs.mkdirSync(path.dirname(lockFile), { recursive: true });
    fs.writeFileSync(lockFile, `${process.pid}\nother-host.example\n`);
    const err = await ingest(lake).then(
      () => null,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(LakeLockedError);
    expect((err as Error).message).toContain(`locked by an ingest on host other-host.example (pid ${process.pid})`);
    expect(Object.keys(listing(lake))).toEqual(['_ingest/lock']);
    expect((await ingest(lake, db.url)).ingested).toBe(1);
    expect(fs.existsSync(lockFile)).toBe(false);
  }, 60_000);
});

describe('PMLAKE_DATABASE_URL', () => {
  it('is optional and must be a postgres:// or postgresql:// URL; a refusal names the variable, not the password', () => {
    expect(loadConfig({}).databaseUrl).toBeUndefined();
    expect(loadConfig({ PMLAKE_DATABASE_URL: 'postgresql://u:p@db.internal:5432/pmlake' }).databaseUrl).toBe('postgresql://u:p@db.internal:5432/pmlake');
    expect(loadConfig({ PMLAKE_DATABASE_URL: 'postgres://127.0.0.1/x' }).databaseUrl).toBe('postgres://127.0.0.1/x');
    for (const bad of ['mysql://u:s3cretpw@h/db', 'not a url s3cretpw', '']) {
      let err: unknown;
      try {
        loadConfig({ PMLAKE_DATABASE_URL: bad });
      } catch (e) {
        err = e;
      }
      expect(err, bad).toBeInstanceOf(ConfigError);
      expect((err as Error).message).toContain('PMLAKE_DATABASE_URL');
      expect((err as Error).message).not.toContain('s3cretpw');
    }
  });
});
