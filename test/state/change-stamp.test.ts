import { afterEach, describe, expect, it } from 'vitest';
import { tempDir } from '../helpers/server.js';
import { StateStore } from '../../src/state/store.js';
import { listKeys } from '../../src/state/accounts.js';

/** StateStore.changeStamp, benignWrite/writeBehind and the buffered last_used_at (what the key cache relies on). */
describe('StateStore change stamp', () => {
  const cleanups: (() => void)[] = [];
  afterEach(() => {
    for (const c of cleanups.splice(0)) c();
  });
  function open(): { a: StateStore; b: StateStore; dir: string } {
    const tmp = tempDir('pmlake-stamp-');
    const a = StateStore.open(tmp.dir);
    const b = StateStore.open(tmp.dir);
    cleanups.push(() => {
      if (a.db.open) a.close();
      if (b.db.open) b.close();
      tmp.cleanup();
    });
    return { a, b, dir: tmp.dir };
  }

  it('stays put while nothing is committed', () => {
    const { a } = open();
    const s = a.changeStamp();
    for (let i = 0; i < 100; i++) expect(a.changeStamp()).toBe(s);
  });

  it("moves on another connection's commit, and on this connection's own writes", () => {
    const { a, b } = open();
    const s0 = a.changeStamp();
    b.upsertUser('other@example.com', 'free');
    const s1 = a.changeStamp();
    expect(s1).not.toBe(s0);
    expect(a.changeStamp()).toBe(s1);
    a.upsertUser('own@example.com', 'free');
    expect(a.changeStamp()).not.toBe(s1);
  });

  it('does not move for benign writes; writeBehind restores synchronous=FULL', () => {
    const { a } = open();
    const user = a.upsertUser('u@example.com', 'free');
    const { row } = a.createApiKey({ userId: user.id, name: 'k', prefix: 'pm_' });
    const s = a.changeStamp();
    a.benignWrite(() => a.db.prepare('UPDATE api_keys SET name = name WHERE id = ?').run(row.id));
    a.writeBehind(() => a.db.prepare('UPDATE api_keys SET name = name WHERE id = ?').run(row.id));
    expect(a.changeStamp()).toBe(s);
    expect(a.db.pragma('synchronous', { simple: true })).toBe(2);
    // A failing benign write still leaves the stamp where it was.
    expect(() => a.benignWrite(() => a.db.prepare('INSERT INTO api_keys (id) VALUES (?)').run('key_x'))).toThrow();
    expect(a.changeStamp()).toBe(s);
  });

  it('without the -shm header it still sees other connections (data_version on every call)', () => {
    const { a, b } = open();
    // Simulates a store whose -shm file could not be opened: the documented fallback.
    (a as unknown as { shmFd: number | null }).shmFd = null;
    const s0 = a.changeStamp();
    expect(a.changeStamp()).toBe(s0);
    b.upsertUser('x@example.com', 'free');
    expect(a.changeStamp()).not.toBe(s0);
  });

  it('buffers last_used_at: visible to findLiveKey and listKeys at once, written on flush and on close', () => {
    const { a, b, dir } = open();
    const user = a.upsertUser('t@example.com', 'free');
    const { row, plaintext } = a.createApiKey({ userId: user.id, name: 'k', prefix: 'pm_' });
    const stored = (s: StateStore) => (s.db.prepare('SELECT last_used_at FROM api_keys WHERE id = ?').get(row.id) as { last_used_at: string | null }).last_used_at;
    const at = '2026-01-02T03:04:05.000Z';
    a.touchKey(row.id, at);
    expect(stored(b)).toBeNull();
    expect(a.findLiveKey(plaintext)!.last_used_at).toBe(at);
    expect(listKeys(a, user.id)[0]!.last_used_at).toBe(at);
    expect(stored(b)).toBe(at);
    const later = '2026-01-02T03:05:05.000Z';
    a.touchKey(row.id, later);
    a.close();
    const c = StateStore.open(dir);
    try {
      expect(stored(c)).toBe(later);
    } finally {
      c.close();
    }
  });
});
