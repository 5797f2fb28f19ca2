import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DuckDBInstance } from '@duckdb/node-api';
import { LakeSession } from '../../src/lake/session.js';
import { CURRENT, manifestName, versionsDir, type Manifest } from '../../src/lake/versions.js';

/**
 * The lake session pins one version: its first use resolves the current one and every later use returns it, so
 * a reader that started on version N reads N even when N+1 is published meanwhile; a new session reads N+1.
 */
describe('lake session', () => {
  const lakeDir = fs.mkdtempSync(path.join(os.tmpdir(), 'pmlake-session-'));
  let db: DuckDBInstance;

  /** Publishes a version whose `markets` set is one file of `rows` rows, as an ingest does: vN.json, then the rename. */
  async function publish(version: number, rows: number): Promise<void> {
    const rel = `catalog/markets/v${version}.parquet`;
    fs.mkdirSync(path.join(lakeDir, 'catalog', 'markets'), { recursive: true });
    const conn = await db.connect();
    await conn.run(`COPY (SELECT range::BIGINT AS id FROM range(${rows})) TO '${path.join(lakeDir, rel)}' (FORMAT parquet)`);
    conn.closeSync();
    const bytes = fs.statSync(path.join(lakeDir, rel)).size;
    const m: Manifest = {
      format: 1,
      version,
      parent: version > 1 ? version - 1 : null,
      published_at: new Date().toISOString(),
      kind: 'ingest',
      change: { files_added: 1, files_removed: 1, bytes_added: bytes, rows_added: {}, inputs: [] },
      sets: { markets: [{ path: rel, partition: null, rows, bytes }] },
    };
    fs.mkdirSync(versionsDir(lakeDir), { recursive: true });
    fs.writeFileSync(path.join(versionsDir(lakeDir), manifestName(version)), JSON.stringify(m));
    const tmp = path.join(versionsDir(lakeDir), `${CURRENT}.tmp`);
    fs.writeFileSync(tmp, JSON.stringify(m));
    fs.renameSync(tmp, path.join(versionsDir(lakeDir), CURRENT));
  }

  const count = (lake: LakeSession): Promise<number> => lake.count({ sql: `SELECT count(*) FROM ${lake.sources.from('markets')}`, params: {} });

  beforeAll(async () => {
    db = await DuckDBInstance.create(':memory:', { threads: '1' });
  });
  afterAll(() => {
    db?.closeSync();
    fs.rmSync(lakeDir, { recursive: true, force: true });
  });

  it('reads the version of its first use to its end; a new session reads the newer one', async () => {
    await publish(1, 3);
    const first = new LakeSession(db, lakeDir);
    expect(await count(first)).toBe(3);
    const stamp = first.stamp;
    await publish(2, 5);
    // Published mid-session: the session still reads version 1, its files and its stamp.
    expect(first.version.version).toBe(1);
    expect(await count(first)).toBe(3);
    expect(first.stamp).toBe(stamp);
    expect(await first.bytesPerRow('markets')).toBe(fs.statSync(path.join(lakeDir, 'catalog/markets/v1.parquet')).size / 3);
    const second = new LakeSession(db, lakeDir);
    expect(second.version.version).toBe(2);
    expect(await count(second)).toBe(5);
    expect(second.stamp).not.toBe(stamp);
  });

  it('resolves its version on first use, not when it is opened', async () => {
    const opened = new LakeSession(db, lakeDir);
    await publish(3, 7);
    expect(opened.hasFiles('markets')).toBe(true);
    expect(opened.version.version).toBe(3);
    expect(await count(opened)).toBe(7);
  });
});
