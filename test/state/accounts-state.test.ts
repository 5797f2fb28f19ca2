import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { tempDir } from '../helpers/server.js';
import { StateStore } from '../../src/state/store.js';
import { addMonthsUTC, fairUsePeriod } from '../../src/accounts/entitlements.js';
import { sqliteMeter } from '../../src/accounts/usage.js';
import { fairUseShare, fairUseStatus } from '../../src/accounts/fairuse.js';
import { adjustBalance, getCreditAccount, ledgerSum, moveTx } from '../../src/state/billing.js';
import type { SubscriptionRow } from '../../src/state/accounts.js';
import type { Principal } from '../../src/accounts/principal.js';

const GB = 1024 ** 3;
const dirs: { cleanup(): void }[] = [];
function store(): { s: StateStore; dir: string } {
  const t = tempDir();
  dirs.push(t);
  return { s: StateStore.open(t.dir), dir: t.dir };
}
afterEach(() => {
  for (const d of dirs.splice(0)) d.cleanup();
});
const principal = async (s: StateStore, email: string, plan: 'free' | 'professional'): Promise<Principal> => {
  const u = await s.upsertUser(email, plan);
  return { userId: u.id, email: u.email, keyId: null, plan, scopes: ['read', 'download'] };
};

describe('fair-use periods', () => {
  it('calendar months (UTC) without a subscription', () => {
    const p = fairUsePeriod(undefined, new Date('2025-03-15T12:00:00Z'));
    expect(p.start.toISOString()).toBe('2025-03-01T00:00:00.000Z');
    expect(p.end.toISOString()).toBe('2025-04-01T00:00:00.000Z');
  });
  it('months from the billing date with one, clamped at month ends and at the period end', () => {
    const sub = { current_period_start: '2025-01-31T10:00:00.000Z', current_period_end: '2026-01-31T10:00:00.000Z' } as SubscriptionRow;
    const p = fairUsePeriod(sub, new Date('2025-03-05T00:00:00Z'));
    expect(p.start.toISOString()).toBe('2025-02-28T10:00:00.000Z');
    expect(p.end.toISOString()).toBe('2025-03-31T10:00:00.000Z');
    expect(fairUsePeriod(sub, new Date('2025-01-31T10:00:00Z')).start.toISOString()).toBe('2025-01-31T10:00:00.000Z');
    expect(fairUsePeriod(sub, new Date('2026-01-20T00:00:00Z')).end.toISOString()).toBe('2026-01-31T10:00:00.000Z');
    expect(addMonthsUTC(new Date('2024-01-31T00:00:00Z'), 1).toISOString()).toBe('2024-02-29T00:00:00.000Z');
  });
});

describe('usage meter on the state store', () => {
  it('the cap holds within a month and lifts on the next billing date', async () => {
    const { s } = store();
    let now = new Date('2025-03-10T00:00:00Z');
    const meter = sqliteMeter(s, { now: () => now });
    const p = await principal(s, 'cap@example.com', 'free');
    await (await meter.begin(p, { kind: 'download', dataset: 'trades', description: 't', estimatedBytes: GB })).commit({ bytes: GB, rows: 1 });
    await expect(meter.begin(p, { kind: 'download', dataset: 'trades', description: 't', estimatedBytes: 0 })).rejects.toMatchObject({
      kind: 'quota_exceeded',
      detail: { code: 'fair_use_cap', resets_at: '2025-04-01T00:00:00.000Z' },
    });
    now = new Date('2025-04-01T00:00:01Z');
    const t = await meter.begin(p, { kind: 'download', dataset: 'trades', description: 't', estimatedBytes: 100 });
    await t.commit({ bytes: 100, rows: 1 });
    await t.commit({ bytes: 1e9, rows: 1 }); // a ticket settles once
    await t.refund('late');
    expect(await fairUseStatus(s, p.userId, now)).toMatchObject({ used_bytes: 100, period_start: '2025-04-01T00:00:00.000Z' });
    await s.close();
  });

  it('50 parallel begin/commit against one allowance never exceed it', async () => {
    const { s } = store();
    const meter = sqliteMeter(s);
    const p = await principal(s, 'race@example.com', 'professional');
    const results = await Promise.allSettled(
      Array.from({ length: 50 }, async () => {
        const t = await meter.begin(p, { kind: 'export', dataset: 'trades', description: 'x', estimatedBytes: 3 * GB });
        await new Promise((r) => setTimeout(r, 1));
        await t.commit({ bytes: 3 * GB, rows: 1 });
      }),
    );
    const ok = results.filter((r) => r.status === 'fulfilled').length;
    expect(ok).toBe(16); // floor(50 GB / 3 GB)
    const status = (await fairUseStatus(s, p.userId))!;
    expect(status.used_bytes).toBe(48 * GB);
    expect(status.used_bytes).toBeLessThanOrEqual(status.allowance_bytes);
    await s.close();
  });

  it('fair_use_share = estimated bytes / what is left of the allowance; above 1 exactly when the meter refuses', async () => {
    const { s } = store();
    expect(await fairUseShare(s, await principal(s, 'pro@example.com', 'professional'), 5 * GB)).toBe(0.1);
    const free = await principal(s, 'free@example.com', 'free');
    expect(await fairUseShare(s, free, GB / 4)).toBe(0.25);
    expect(await fairUseShare(s, undefined, GB)).toBe(1);
    const meter = sqliteMeter(s);
    await (await meter.begin(free, { kind: 'download', dataset: 'trades', description: 't', estimatedBytes: GB / 2 })).commit({ bytes: GB / 2, rows: 1 });
    expect(await fairUseShare(s, free, GB / 4)).toBe(0.5);
    expect(await fairUseShare(s, free, GB / 2)).toBe(1);
    expect(await fairUseShare(s, free, GB / 2 + 1024)).toBeGreaterThan(1);
    await expect(meter.begin(free, { kind: 'download', dataset: 'trades', description: 't', estimatedBytes: GB / 2 + 1024 })).rejects.toMatchObject({
      kind: 'quota_exceeded',
    });
    await s.close();
  });
});

describe('ledger across connections and crashes', () => {
  it('two connections debiting one balance in turn never overdraw it', async () => {
    const { s, dir } = store();
    const s2 = StateStore.open(dir);
    const u = await s.upsertUser('two@example.com', 'free');
    await adjustBalance(s, u.id, 1000, 'seed');
    let ok = 0;
    for (let i = 0; i < 30; i++) {
      const st = i % 2 ? s : s2;
      const row = await st.tx((t) => moveTx(t, { userId: u.id, type: 'usage_charge', amountCents: -70, description: 'x', at: new Date() }));
      if (row) ok++;
    }
    expect(ok).toBe(14);
    expect((await getCreditAccount(s2, u.id)).balance_cents).toBe(1000 - 14 * 70);
    expect(await ledgerSum(s, u.id)).toBe((await getCreditAccount(s, u.id)).balance_cents);
    await s2.close();
    await s.close();
  });

  it('a committed credit survives kill -9 of the writing process', async () => {
    const { s, dir } = store();
    const u = await s.upsertUser('crash@example.com', 'free');
    await s.close();
    const script = `
      import { StateStore } from ${JSON.stringify(path.resolve('src/state/store.ts'))};
      import { adjustBalance } from ${JSON.stringify(path.resolve('src/state/billing.ts'))};
      const s = StateStore.open(${JSON.stringify(dir)});
      await adjustBalance(s, ${JSON.stringify(u.id)}, 4242, 'before crash');
      process.kill(process.pid, 'SIGKILL');
    `;
    // .mts: an ES module wherever the temp directory is (top-level await), not CommonJS by default.
    const file = path.join(dir, 'crash.mts');
    fs.writeFileSync(file, script);
    let signal: string | null | undefined;
    try {
      // node itself runs the script (tsx as a loader), so the SIGKILL hits the direct child.
      execFileSync(process.execPath, ['--import', 'tsx', file], { stdio: 'pipe' });
    } catch (err) {
      signal = (err as { signal?: string | null }).signal;
    }
    expect(signal).toBe('SIGKILL');
    const again = StateStore.open(dir);
    expect((await getCreditAccount(again, u.id)).balance_cents).toBe(4242);
    expect(await ledgerSum(again, u.id)).toBe(4242);
    await again.close();
  });
});
