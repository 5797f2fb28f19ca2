import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { sqliteMeter } from '../../src/accounts/usage.js';
import type { Principal } from '../../src/accounts/principal.js';
import { PLANS } from '../../src/accounts/plans.js';
import { revokeKey, rotateKey } from '../../src/state/accounts.js';
import { adjustBalance, applyCheckoutEvent, createCheckout, getCreditAccount, ledgerSum, placeOrder } from '../../src/state/billing.js';
import { claimNextExport, createOrGetExport, getExport, recordProgress, renewLease, succeedExport } from '../../src/state/exports.js';
import { openDeletionRequest, confirmDeletion } from '../../src/state/lifecycle.js';
import { dailyPullTotals, getPull } from '../../src/state/pulls.js';
import { sql } from '../../src/state/sql.js';
import type { StateStore } from '../../src/state/store.js';
import { addRequestCounts, dailyRequestCounts } from '../../src/state/usage.js';
import { postgresBackend, sqliteBackend, type StateBackend } from '../helpers/state-backends.js';

/**
 * The state store's contract, run against both backends: the embedded SQLite file and a real PostgreSQL. Two
 * stores on the same data stand for two processes (SQLite) or two replicas (PostgreSQL); concurrent calls are
 * spread over both. Expected figures are computed here from the inputs, not read back from the code under test.
 */
const GB = 1024 ** 3;

const backends: { name: string; make: () => Promise<StateBackend> }[] = [
  { name: 'sqlite', make: async () => sqliteBackend() },
  { name: 'postgres', make: postgresBackend },
];

describe.each(backends)('state store on $name', ({ make }) => {
  let B: StateBackend;
  beforeAll(async () => {
    B = await make();
  }, 120_000);
  afterEach(async () => {
    await B?.closeStores();
  });
  afterAll(async () => {
    await B?.close();
  });

  const principalOf = async (s: StateStore, email: string, plan: 'free' | 'professional'): Promise<Principal> => {
    const u = await s.upsertUser(email, plan);
    return { userId: u.id, email: u.email, keyId: null, plan, scopes: ['read', 'download'] };
  };

  it('a key created on one is live on the other; revoked on one, it is gone on the other and its change stamp moved', async () => {
    const a = await B.fresh();
    const b = await B.another(a);
    const u = await a.upsertUser('Keys@Example.com ', 'professional');
    expect((await b.getUserByEmail('keys@example.com'))?.id).toBe(u.id);
    const { row, plaintext } = await a.createApiKey({ userId: u.id, name: 'k', prefix: 'pm_' });
    expect((await b.findLiveKey(plaintext))?.id).toBe(row.id);
    // One hex digit changed (the key's own last digit is random: a fixed replacement would sometimes be the key).
    expect(await b.findLiveKey(`${plaintext.slice(0, -1)}${plaintext.endsWith('0') ? '1' : '0'}`)).toBeUndefined();
    const before = b.changeStamp();
    expect((await revokeKey(a, u.id, row.id))?.revoked_at).not.toBeNull();
    // Another replica's listener counts the notification as its socket is read: at once, not synchronously.
    await expect.poll(() => b.changeStamp(), { timeout: 5000, interval: 5 }).not.toBe(before);
    expect(await b.findLiveKey(plaintext)).toBeUndefined();
    // Rotation: the old key keeps working until its scheduled revocation, the new one at once.
    const k2 = await a.createApiKey({ userId: u.id, name: 'k2', prefix: 'pm_' });
    const rotated = (await rotateKey(b, u.id, k2.row.id, 'pm_'))!;
    expect((await a.findLiveKey(k2.plaintext))?.id).toBe(k2.row.id);
    expect((await a.findLiveKey(rotated.plaintext))?.id).toBe(rotated.row.id);
    expect(await a.findLiveKey(k2.plaintext, new Date(Date.parse(rotated.old.scheduled_revoke_at!) + 1))).toBeUndefined();
  });

  it('20 concurrent orders over two stores against a balance that covers 3: exactly 3 succeed, balance ≥ 0, ledger = balance', async () => {
    const a = await B.fresh();
    const b = await B.another(a);
    const u = await a.upsertUser('orders@example.com', 'free');
    const price = 700;
    const seed = 3 * price + 250;
    await adjustBalance(a, u.id, seed, 'seed');
    const results = await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        placeOrder(i % 2 ? a : b, { userId: u.id, idempotencyKey: `o-${i}`, items: [], totalCents: price, minimumApplied: false, at: new Date() }),
      ),
    );
    expect(results.filter((r) => r.outcome === 'ok')).toHaveLength(3);
    expect(results.filter((r) => r.outcome === 'insufficient')).toHaveLength(17);
    const balance = (await getCreditAccount(b, u.id)).balance_cents;
    expect(balance).toBe(seed - 3 * price);
    expect(await ledgerSum(a, u.id)).toBe(balance);
  });

  it('one idempotency key sent to both stores at once: one order, one charge, the rest replay it', async () => {
    const a = await B.fresh();
    const b = await B.another(a);
    const u = await a.upsertUser('idem@example.com', 'free');
    await adjustBalance(a, u.id, 10_000, 'seed');
    const results = await Promise.all(
      Array.from({ length: 10 }, (_, i) =>
        placeOrder(i % 2 ? a : b, { userId: u.id, idempotencyKey: 'same', items: [], totalCents: 900, minimumApplied: false, at: new Date() }),
      ),
    );
    const ids = new Set(results.map((r) => ('order' in r ? r.order.id : null)));
    expect(ids.size).toBe(1);
    expect(results.filter((r) => r.outcome === 'ok')).toHaveLength(1);
    expect(results.filter((r) => r.outcome === 'replayed')).toHaveLength(9);
    expect((await getCreditAccount(a, u.id)).balance_cents).toBe(10_000 - 900);
  });

  it('a payment event delivered to both stores at once credits once', async () => {
    const a = await B.fresh();
    const b = await B.another(a);
    const u = await a.upsertUser('pay@example.com', 'free');
    const at = new Date().toISOString();
    await createCheckout(a, {
      id: 'co_1',
      user_id: u.id,
      provider: 'local',
      kind: 'credits',
      amount_cents: 5000,
      tier: null,
      billing_period: null,
      success_url: 'https://example.com/ok',
      cancel_url: 'https://example.com/no',
      status: 'open',
      created_at: at,
      completed_at: null,
      provider_ref: null,
    });
    const outcomes = await Promise.all(
      Array.from({ length: 6 }, (_, i) =>
        applyCheckoutEvent(i % 2 ? a : b, { provider: 'local', eventId: `ev-${i % 3}`, type: 'checkout.completed', checkoutId: 'co_1' }),
      ),
    );
    expect(outcomes.filter((o) => o.outcome === 'credited')).toHaveLength(1);
    expect(outcomes.filter((o) => o.outcome === 'duplicate')).toHaveLength(3);
    expect(outcomes.filter((o) => o.outcome === 'already_completed')).toHaveLength(2);
    expect((await getCreditAccount(b, u.id)).balance_cents).toBe(5000);
  });

  it('parallel pulls over two meters never pass the fair-use allowance; a refund frees its bytes', async () => {
    const a = await B.fresh();
    const b = await B.another(a);
    const p = await principalOf(a, 'fair@example.com', 'professional');
    const meters = [sqliteMeter(a), sqliteMeter(b)];
    const each = 3 * GB;
    const results = await Promise.allSettled(
      Array.from({ length: 30 }, (_, i) => meters[i % 2]!.begin(p, { kind: 'export', dataset: 'trades', description: 'x', estimatedBytes: each })),
    );
    const ok = results.filter((r) => r.status === 'fulfilled');
    const allowance = PLANS.professional.fair_use_bytes_month;
    expect(ok).toHaveLength(Math.floor(allowance / each));
    const first = (ok[0] as PromiseFulfilledResult<Awaited<ReturnType<(typeof meters)[0]['begin']>>>).value;
    await first.refund('test');
    expect((await getPull(b, first.id))?.status).toBe('failed');
    await expect(meters[1]!.begin(p, { kind: 'export', dataset: 'trades', description: 'x', estimatedBytes: each })).resolves.toBeTruthy();
    await expect(meters[0]!.begin(p, { kind: 'export', dataset: 'trades', description: 'x', estimatedBytes: each })).rejects.toMatchObject({
      kind: 'quota_exceeded',
    });
  });

  it('the download rate counts over both meters: the plan’s hourly number and no more', async () => {
    const a = await B.fresh();
    const b = await B.another(a);
    const p = await principalOf(a, 'rate@example.com', 'free');
    const meters = [sqliteMeter(a), sqliteMeter(b)];
    const limit = PLANS.free.downloads_per_hour;
    const results = await Promise.allSettled(
      Array.from({ length: limit + 5 }, (_, i) => meters[i % 2]!.begin(p, { kind: 'download', dataset: 'trades', description: 'd', estimatedBytes: 10 })),
    );
    expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(limit);
    expect(results.find((r) => r.status === 'rejected')).toMatchObject({ reason: { kind: 'rate_limited' } });
  });

  it('one export idempotency key on both stores: one job; five jobs claimed by two workers: each exactly once', async () => {
    const a = await B.fresh();
    const b = await B.another(a);
    const u = await a.upsertUser('exp@example.com', 'professional');
    const submits = await Promise.all(
      Array.from({ length: 8 }, (_, i) =>
        createOrGetExport(i % 2 ? a : b, { userId: u.id, idempotencyKey: 'x', spec: '{}', format: 'csv', fileName: 'f.csv' }),
      ),
    );
    expect(new Set(submits.map((s) => s.row.id)).size).toBe(1);
    expect(submits.filter((s) => s.created)).toHaveLength(1);
    for (let i = 0; i < 4; i++) await createOrGetExport(a, { userId: u.id, idempotencyKey: `y${i}`, spec: '{}', format: 'csv', fileName: 'f.csv' });
    const now = new Date();
    const lease = new Date(now.getTime() + 60_000);
    const claims = await Promise.all(Array.from({ length: 12 }, (_, i) => claimNextExport(i % 2 ? a : b, `w${i % 2}`, now, lease)));
    const taken = claims.filter((c) => c !== undefined).map((c) => c!.id);
    expect(taken).toHaveLength(5);
    expect(new Set(taken).size).toBe(5);
    // A worker that died: its lease runs out, a third worker takes the job as a new attempt; the first can no longer write.
    expect(await claimNextExport(b, 'w2', now, lease)).toBeUndefined();
    const later = new Date(lease.getTime() + 1);
    const retaken = (await claimNextExport(b, 'w2', later, new Date(later.getTime() + 60_000)))!;
    const oldHolder = retaken.worker!;
    expect(['w0', 'w1']).toContain(oldHolder);
    expect(await getExport(a, retaken.id)).toMatchObject({ worker: 'w2', status: 'running', attempts: 2 });
    expect(await renewLease(a, retaken.id, oldHolder, later)).toBe(false);
    await recordProgress(a, retaken.id, oldHolder, 99, 99, 'stale-upload');
    expect((await getExport(a, retaken.id))!.upload_id).toBeNull();
    expect(await succeedExport(a, retaken.id, oldHolder, { rows: 1, bytes: 1, cost: 0, expiresAt: later.toISOString() })).toBe(false);
    expect(await succeedExport(b, retaken.id, 'w2', { rows: 1, bytes: 1, cost: 0, expiresAt: later.toISOString() })).toBe(true);
    expect((await getExport(a, retaken.id))!.status).toBe('succeeded');
  });

  it('request counters from both stores add up; pull totals per day and data set', async () => {
    const a = await B.fresh();
    const b = await B.another(a);
    const u = await a.upsertUser('count@example.com', 'free');
    await Promise.all(Array.from({ length: 10 }, (_, i) => addRequestCounts(i % 2 ? a : b, [{ userId: u.id, keyId: 'k', day: '2025-01-02', n: i + 1 }])));
    expect(await dailyRequestCounts(b, u.id, '2025-01-01', '2025-01-31')).toEqual([{ day: '2025-01-02', requests: 55 }]);
    // One batch holding the same key and day twice, and another day.
    await addRequestCounts(a, [
      { userId: u.id, keyId: 'k', day: '2025-01-02', n: 5 },
      { userId: u.id, keyId: 'k', day: '2025-01-02', n: 7 },
      { userId: u.id, keyId: 'k', day: '2025-01-05', n: 1 },
    ]);
    expect(await dailyRequestCounts(b, u.id, '2025-01-01', '2025-01-31')).toEqual([
      { day: '2025-01-02', requests: 67 },
      { day: '2025-01-05', requests: 1 },
    ]);
    // last_used_at: buffered, then written for several keys in one statement; the other store reads them.
    const k1 = await a.createApiKey({ userId: u.id, name: 'k1', prefix: 'pm_' });
    const k2 = await a.createApiKey({ userId: u.id, name: 'k2', prefix: 'pm_' });
    a.touchKey(k1.row.id, '2025-01-03T01:00:00.000Z');
    a.touchKey(k2.row.id, '2025-01-03T02:00:00.000Z');
    await a.flushTouches();
    const used = await b.all<{ id: string; last_used_at: string }>(sql`SELECT id, last_used_at FROM api_keys WHERE user_id = ${u.id} ORDER BY last_used_at`);
    expect(used).toEqual([
      { id: k1.row.id, last_used_at: '2025-01-03T01:00:00.000Z' },
      { id: k2.row.id, last_used_at: '2025-01-03T02:00:00.000Z' },
    ]);
    const meter = sqliteMeter(a, { now: () => new Date('2025-01-03T10:00:00Z') });
    const p: Principal = { userId: u.id, email: 'count@example.com', keyId: null, plan: 'free', scopes: ['read', 'download'] };
    for (const [dataset, bytes] of [
      ['trades', 100],
      ['trades', 50],
      ['ohlcv', 7],
    ] as const) {
      await (await meter.begin(p, { kind: 'download', dataset, description: 'd', estimatedBytes: bytes })).commit({ bytes, rows: 1 });
    }
    const totals = await dailyPullTotals(b, u.id, new Date('2025-01-01T00:00:00Z'), new Date('2025-02-01T00:00:00Z'));
    expect(totals).toHaveLength(1);
    expect(totals[0]).toMatchObject({ day: '2025-01-03', bytes: 157, downloads: 3 });
    expect(JSON.parse(totals[0]!.dataset_bytes)).toEqual({ trades: 150, ohlcv: 7 });
  });

  it('a confirmed deletion revokes every key everywhere; the ledger refuses edits', async () => {
    const a = await B.fresh();
    const b = await B.another(a);
    const u = await a.upsertUser('gone@example.com', 'professional');
    const keys = [await a.createApiKey({ userId: u.id, name: 'a', prefix: 'pm_' }), await a.createApiKey({ userId: u.id, name: 'b', prefix: 'pm_' })];
    await adjustBalance(a, u.id, 100, 'seed');
    const at = new Date();
    const origin = { ipHash: null, userAgent: null };
    await openDeletionRequest(a, { userId: u.id, tokenHash: 'h1', reason: null, expiresAt: new Date(at.getTime() + 60_000), origin, at });
    const done = await confirmDeletion(b, 'h1', at);
    expect(done.summary).toMatchObject({ keys_revoked: 2 });
    for (const k of keys) expect(await a.findLiveKey(k.plaintext)).toBeUndefined();
    expect((await a.getUser(u.id))?.email).toBe(`deleted+${u.id}@deleted.invalid`);
    await expect(a.run(sql`UPDATE ledger SET amount_cents = 1 WHERE user_id = ${u.id}`)).rejects.toThrow(/append-only/);
    await expect(b.run(sql`DELETE FROM ledger WHERE user_id = ${u.id}`)).rejects.toThrow(/append-only/);
    expect(await ledgerSum(a, u.id)).toBe(100);
  });

  it('migrations apply once: a second store on the same data applies none again', async () => {
    const a = await B.fresh();
    const before = await a.all<{ id: number }>(sql`SELECT id FROM schema_migrations ORDER BY id`);
    const b = await B.another(a);
    const after = await b.all<{ id: number }>(sql`SELECT id FROM schema_migrations ORDER BY id`);
    expect(after).toEqual(before);
    expect(before.map((r) => r.id)).toEqual([1, 100, 101, 200, 300, 400, 500, 600]);
  });
});

describe('state store on postgres: the database away and back', () => {
  let B: StateBackend;
  beforeAll(async () => {
    B = await postgresBackend();
  }, 120_000);
  afterAll(async () => {
    await B?.close();
  });

  it('unreachable → Unavailable naming no address, the change stamp never repeats; back → works without a new store', async () => {
    const a = await B.fresh();
    const u = await a.upsertUser('away@example.com', 'free');
    await adjustBalance(a, u.id, 500, 'seed');
    await B.server!.stop();
    const err = await placeOrder(a, { userId: u.id, idempotencyKey: 'down', items: [], totalCents: 100, minimumApplied: false, at: new Date() }).catch(
      (e: unknown) => e,
    );
    expect(err).toMatchObject({ kind: 'unavailable' });
    const detail = String((err as { detail: unknown }).detail);
    expect(detail).toMatch(/state database is unavailable/);
    expect(detail).not.toContain('127.0.0.1');
    expect(detail).not.toContain(String(B.server!.port));
    expect(detail).not.toContain(B.server!.password);
    await expect(a.getUser(u.id)).rejects.toMatchObject({ kind: 'unavailable' });
    // The listener is gone: no cached principal may be trusted meanwhile.
    await expect.poll(() => a.changeStamp() !== a.changeStamp(), { timeout: 10_000 }).toBe(true);
    await B.server!.start();
    await expect.poll(async () => (await a.getUser(u.id).catch(() => undefined))?.id, { timeout: 20_000, interval: 200 }).toBe(u.id);
    // Nothing of the refused order was written; orders go through again.
    expect((await getCreditAccount(a, u.id)).balance_cents).toBe(500);
    const ok = await placeOrder(a, { userId: u.id, idempotencyKey: 'up', items: [], totalCents: 100, minimumApplied: false, at: new Date() });
    expect(ok.outcome).toBe('ok');
    await expect.poll(() => a.changeStamp() === a.changeStamp(), { timeout: 10_000 }).toBe(true);
  }, 90_000);
});
