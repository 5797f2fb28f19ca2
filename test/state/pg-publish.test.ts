import type { Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { StateStore } from '../../src/state/store.js';
import { startTestPostgres, type TestPostgres } from '../helpers/postgres.js';
import { tempDir } from '../helpers/server.js';

/**
 * publishChanges on PostgreSQL (what a key revocation waits for before it answers): it returns only once every
 * other listening process has counted the change, not merely once this process's own listener has it. The
 * other listener is made slow the way a busy machine makes it (its socket not read for a while).
 */
describe('PostgreSQL publishChanges', () => {
  let pg: TestPostgres;
  let a: StateStore;
  let b: StateStore;
  let c: StateStore;
  const tmp = tempDir('pmlake-publish-');
  beforeAll(async () => {
    pg = await startTestPostgres();
    [a, b, c] = await Promise.all(['a', 'b', 'c'].map((role) => StateStore.connect({ stateDir: tmp.dir, databaseUrl: pg.url, role })));
  });
  afterAll(async () => {
    await Promise.allSettled([a?.close(), b?.close(), c?.close()]);
    await pg?.close();
    tmp.cleanup();
  });

  /** The socket of a store's listening connection (pg.Client keeps it as connection.stream). */
  const listenerSocket = (s: StateStore): Socket => (s.backend as unknown as { listener: { connection: { stream: Socket } } }).listener.connection.stream;

  it('returns after every other listener counted the change, even one that reads its socket late', async () => {
    for (let round = 0; round < 3; round++) {
      await a.upsertUser(`publish-${round}@example.com`, 'free');
      const before = [b.changeStamp(), c.changeStamp()];
      // B reads nothing for 300 ms; C at once.
      const slow = listenerSocket(b);
      slow.pause();
      const resume = setTimeout(() => slow.resume(), 300);
      try {
        await a.publishChanges();
        // Checked synchronously after the return: nothing else may run in between.
        expect(b.changeStamp()).not.toBe(before[0]);
        expect(c.changeStamp()).not.toBe(before[1]);
      } finally {
        clearTimeout(resume);
        slow.resume();
      }
    }
  });

  it('a listener that never answers delays the answer by a bounded wait, it does not block it', async () => {
    const stuck = listenerSocket(c);
    stuck.pause();
    try {
      await a.upsertUser('publish-stuck@example.com', 'free');
      await a.publishChanges();
    } finally {
      stuck.resume();
    }
    // The paused listener catches up once read again.
    const s = c.changeStamp();
    await new Promise((r) => setTimeout(r, 200));
    expect(c.changeStamp()).not.toBe(s);
  });
});
