import { afterEach, describe, expect, it } from 'vitest';
import { tempDir } from '../helpers/server.js';
import { StateStore } from '../../src/state/store.js';
import { listKeys } from '../../src/state/accounts.js';
import { sql } from '../../src/state/sql.js';
import { sqliteOf } from '../helpers/state.js';

/**
 * The embedded backend's change stamp (SqliteDb.changeStamp, through StateStore.changeStamp), benign
 * transactions (`tx(fn, { benign: true })`) and the buffered last_used_at (what the key cache relies on).
 */
describe('StateStore change stamp', () => {
  const cleanups: (() => Promise<void>)[] = [];
  afterEach(async () => {
    for (const c of cleanups.splice(0)) await c();
  });
  function open(): { a: StateStore; b: StateStore; dir: string } {
    const tmp = tempDir('pmlake-stamp-');
    const a = StateStore.open(tmp.dir);
    const b = StateStore.open(tmp.dir);
    cleanups.push(async () => {
      await a.close();
      await b.close();
      tmp.cleanup();
    });
    return { a, b, dir: tmp.dir };
  }

  it('stays put while nothing is committed', () => {
    const { a } = open();
    const s = a.changeStamp();
    for (let i = 0; i < 100; i++) expect(a.changeStamp()).toBe(s);
  });

  it("moves on another connection's commit, and on this connection's own writes", async () => {
    const { a, b } = open();
    const s0 = a.changeStamp();
    await b.upsertUser('other@example.com', 'free');
    const s1 = a.changeStamp();
    expect(s1).not.toBe(s0);
    expect(a.changeStamp()).toBe(s1);
    await a.upsertUser('own@example.com', 'free');
    expect(a.changeStamp()).not.toBe(s1);
  });

  it('does not move for benign transactions; a benign transaction restores synchronous=FULL', async () => {
    const { a } = open();
    const user = await a.upsertUser('u@example.com', 'free');
    const { row } = await a.createApiKey({ userId: user.id, name: 'k', prefix: 'pm_' });
    const s = a.changeStamp();
    const benign = () => a.tx((t) => t.run(sql`UPDATE api_keys SET name = name WHERE id = ${row.id}`), { benign: true });
    expect(await benign()).toBe(1);
    expect(await benign()).toBe(1);
    expect(a.changeStamp()).toBe(s);
    expect(sqliteOf(a).pragma('synchronous', { simple: true })).toBe(2);
    // A failing benign transaction still leaves the stamp where it was (and synchronous=FULL restored).
    await expect(a.tx((t) => t.run(sql`INSERT INTO api_keys (id) VALUES (${'key_x'})`), { benign: true })).rejects.toThrow();
    expect(a.changeStamp()).toBe(s);
    expect(sqliteOf(a).pragma('synchronous', { simple: true })).toBe(2);
    // The same write outside a benign transaction moves it.
    await a.run(sql`UPDATE api_keys SET name = name WHERE id = ${row.id}`);
    expect(a.changeStamp()).not.toBe(s);
  });

  it('without the -shm header it still sees other connections (data_version on every call)', async () => {
    const { a, b } = open();
    // Simulates a store whose -shm file could not be opened: the documented fallback.
    (a.backend as unknown as { shmFd: number | null }).shmFd = null;
    const s0 = a.changeStamp();
    expect(a.changeStamp()).toBe(s0);
    await b.upsertUser('x@example.com', 'free');
    expect(a.changeStamp()).not.toBe(s0);
  });

  it('buffers last_used_at: visible to findLiveKey and listKeys at once, written on flush and on close', async () => {
    const { a, b, dir } = open();
    const user = await a.upsertUser('t@example.com', 'free');
    const { row, plaintext } = await a.createApiKey({ userId: user.id, name: 'k', prefix: 'pm_' });
    const stored = (s: StateStore) =>
      (sqliteOf(s).prepare('SELECT last_used_at FROM api_keys WHERE id = ?').get(row.id) as { last_used_at: string | null }).last_used_at;
    const at = '2026-01-02T03:04:05.000Z';
    a.touchKey(row.id, at);
    expect(stored(b)).toBeNull();
    expect((await a.findLiveKey(plaintext))!.last_used_at).toBe(at);
    expect((await listKeys(a, user.id))[0]!.last_used_at).toBe(at);
    expect(stored(b)).toBe(at);
    const later = '2026-01-02T03:05:05.000Z';
    a.touchKey(row.id, later);
    await a.close();
    const c = StateStore.open(dir);
    try {
      expect(stored(c)).toBe(later);
    } finally {
      await c.close();
    }
  });
});
