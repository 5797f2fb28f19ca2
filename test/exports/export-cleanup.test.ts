import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startPmlakeServer } from '../../bench/server.js';
import { LocalObjectStore } from '../../src/exports/local-store.js';
import { MAX_ATTEMPTS } from '../../src/exports/service.js';
import { activeCopies } from '../../src/lake/stream.js';
import type { RunningServer } from '../../src/server.js';
import { activateSubscriptionTx } from '../../src/state/accounts.js';
import { StateStore } from '../../src/state/store.js';
import { buildDownloadsLake, type DlLake } from '../helpers/downloads-lake.js';
import { startTestServer, tempDir, testConfig } from '../helpers/server.js';
import { sqliteOf } from '../helpers/state.js';

/**
 * Interrupted exports leave no parts behind in the default (local) store (issue 11 item 5): a build that
 * fails mid-upload discards its upload at once; a server killed with SIGKILL mid-upload has its parts
 * discarded by the next start before the job re-runs; uploads nobody knows about are swept by age. The lake
 * is busy enough (generator rate 10) that a raw-tape CSV export spans several 8 MiB parts, and each test
 * waits until the store really holds a part before interrupting.
 */
let B: DlLake;
const MiB = 1024 * 1024;
const uploadsOf = (stateDir: string) => path.join(stateDir, 'exports', 'uploads');
/** Upload directories and their stored (complete) parts, from the local store's layout. */
function uploads(stateDir: string): { id: string; parts: string[]; bytes: number }[] {
  const root = uploadsOf(stateDir);
  if (!fs.existsSync(root)) return [];
  return fs.readdirSync(root).map((id) => {
    const files = fs.readdirSync(path.join(root, id));
    return { id, parts: files.filter((f) => /^\d+$/.test(f)), bytes: files.reduce((n, f) => n + fs.statSync(path.join(root, id, f)).size, 0) };
  });
}
/**
 * Upload directories with the key their upload.json names and their stored part count, read while a server
 * may be creating or removing them (a directory without a whole upload.json yet, or gone between two reads).
 */
function uploadKeys(stateDir: string): { id: string; key: string; parts: number }[] {
  const root = uploadsOf(stateDir);
  if (!fs.existsSync(root)) return [];
  return fs.readdirSync(root).flatMap((id) => {
    try {
      const files = fs.readdirSync(path.join(root, id));
      let key = '';
      try {
        key = (JSON.parse(fs.readFileSync(path.join(root, id, 'upload.json'), 'utf8')) as { key: string }).key;
      } catch {
        // not written yet: read again on the next poll
      }
      return [{ id, key, parts: files.filter((f) => /^\d+$/.test(f)).length }];
    } catch {
      return [];
    }
  });
}
const submit = (url: string, key: string, idem: string) =>
  fetch(`${url}/v1/exports`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-api-key': key },
    body: JSON.stringify({ kind: 'raw', series_id: 'polymarket:raw-tape', format: 'csv', idempotency_key: idem }),
  }).then((r) => r.json() as Promise<{ id: string; file_name: string }>);
async function poll(url: string, key: string, id: string): Promise<Record<string, any>> {
  for (;;) {
    const j = (await (await fetch(`${url}/v1/exports/${id}`, { headers: { 'x-api-key': key } })).json()) as Record<string, any>;
    if (!['queued', 'running'].includes(j.status)) return j;
    await new Promise((r) => setTimeout(r, 50));
  }
}
async function waitForPart(stateDir: string): Promise<void> {
  while (!uploads(stateDir).some((u) => u.parts.length > 0)) await new Promise((r) => setTimeout(r, 10));
}

beforeAll(async () => {
  B = await buildDownloadsLake({ seed: 7, markets: 4, days: 2, rate: 10, defaultStore: true });
});
afterAll(async () => {
  await B?.close();
});

describe('interrupted exports, default store', () => {
  it('a build failing mid-upload discards its parts at once; the job says what failed, without paths', async () => {
    const state = B.srv.ctx.config.stateDir;
    const job = await submit(B.srv.url, B.key, 'k-cut');
    await waitForPart(state);
    expect(activeCopies()).toBe(1); // DuckDB still producing: the upload is genuinely mid-way
    expect(uploads(state)[0]!.bytes).toBeGreaterThanOrEqual(8 * MiB);
    // The COPY fails (as a DuckDB error would) while parts are stored and more are coming.
    B.srv.ctx.exports.running.get(job.id)!.copy!.cancel('test: the build broke');
    const done = await poll(B.srv.url, B.key, job.id);
    expect(done.status).toBe('failed');
    expect(done.error).toBe('export failed: the export could not be built; nothing was charged');
    expect(uploads(state)).toEqual([]);
    expect(fs.readdirSync(path.join(state, 'exports', 'objects'))).toEqual([]);
    const row = sqliteOf(B.srv.ctx.state).prepare('SELECT upload_id FROM export_jobs WHERE id = ?').get(job.id) as { upload_id: string | null };
    expect(row.upload_id).toBeNull();
  });

  it('a server killed (SIGKILL) mid-upload: the next start discards the parts, then the job re-runs and succeeds', async () => {
    const tmp = tempDir('pmlake-export-kill-');
    const state = path.join(tmp.dir, 'state');
    const store = StateStore.open(state);
    const user = await store.upsertUser('kill@example.com', 'professional');
    await store.tx((t) => activateSubscriptionTx(t, { userId: user.id, tier: 'professional', billingPeriod: 'monthly', fundedBy: 'grant', at: new Date() }));
    const key = (await store.createApiKey({ userId: user.id, name: 't', prefix: 'pm_' })).plaintext;
    await store.close();
    let srv: RunningServer | null = null;
    try {
      const child = await startPmlakeServer({ lakeDir: B.lakeDir, stateDir: state, env: { LOG_LEVEL: 'warn' }, logFile: path.join(tmp.dir, 'child.log') });
      const job = await submit(child.url, key, 'k-kill');
      await waitForPart(state);
      const exited = new Promise((r) => child.child.once('exit', r));
      child.child.kill('SIGKILL');
      await exited;
      const left = uploads(state);
      expect(left).toHaveLength(1);
      expect(left[0]!.bytes).toBeGreaterThanOrEqual(8 * MiB);

      // What the killed server left in its state: the kill landed mid-build (not after it), and the upload id
      // was on the job from its first moment.
      const dead = StateStore.open(state);
      const before = sqliteOf(dead).prepare('SELECT status, attempts, upload_id FROM export_jobs WHERE id = ?').get(job.id);
      await dead.close();
      expect(before).toEqual({ status: 'running', attempts: 1, upload_id: left[0]!.id });

      srv = await startTestServer(testConfig({ PMLAKE_LAKE: B.lakeDir, PMLAKE_STATE: state }));
      const done = await poll(srv.url, key, job.id);
      expect(done.status).toBe('succeeded');
      expect(done.attempts).toBe(2);
      // The first attempt's parts are gone; only the finished object remains.
      expect(uploads(state)).toEqual([]);
      const link = (
        (await (await fetch(`${srv.url}/v1/exports/${job.id}/url`, { headers: { 'x-api-key': key } })).json()) as { data: { download_url: string } }
      ).data.download_url;
      const file = await fetch(link);
      expect(file.status).toBe(200);
      expect((await file.arrayBuffer()).byteLength).toBe(done.size_bytes);
      // The link secret was generated once (by the killed server), private to the owner, and links outlive a
      // restart.
      expect(fs.statSync(path.join(state, 'export-link-secret')).mode & 0o777).toBe(0o600);
      await srv.close();
      srv = await startTestServer(testConfig({ PMLAKE_LAKE: B.lakeDir, PMLAKE_STATE: state }));
      expect((await fetch(link.replace(/^http:\/\/[^/]+/, srv.url))).status).toBe(200);
    } finally {
      await srv?.close();
      tmp.cleanup();
    }
  });

  it('an export interrupted MAX_ATTEMPTS times (SIGKILL) fails saying so, attempts agreeing, and leaves no upload of any attempt', async () => {
    const tmp = tempDir('pmlake-export-thrice-');
    const state = path.join(tmp.dir, 'state');
    const store = StateStore.open(state);
    const user = await store.upsertUser('thrice@example.com', 'professional');
    await store.tx((t) => activateSubscriptionTx(t, { userId: user.id, tier: 'professional', billingPeriod: 'monthly', fundedBy: 'grant', at: new Date() }));
    const key = (await store.createApiKey({ userId: user.id, name: 't', prefix: 'pm_' })).plaintext;
    await store.close();
    let srv: RunningServer | null = null;
    try {
      let jobId = '';
      let fileName = '';
      let unrecorded = '';
      for (let attempt = 1; attempt <= MAX_ATTEMPTS; attempt++) {
        const child = await startPmlakeServer({ lakeDir: B.lakeDir, stateDir: state, env: { LOG_LEVEL: 'warn' }, logFile: path.join(tmp.dir, 'child.log') });
        if (attempt === 1) ({ id: jobId, file_name: fileName } = (await submit(child.url, key, 'k-thrice')) as { id: string; file_name: string });
        // This attempt's own upload holds a part (the previous attempt's was discarded when it started).
        while (!uploadKeys(state).some((u) => u.key.includes(`/${jobId}/${attempt}/`) && u.id !== unrecorded && u.parts > 0)) {
          await new Promise((r) => setTimeout(r, 10));
        }
        const exited = new Promise((r) => child.child.once('exit', r));
        child.child.kill('SIGKILL');
        await exited;
        if (attempt === 2) {
          // What an attempt killed between creating its upload and recording it on the job leaves: the store's
          // files under the job's prefix, named by no record (the real local store writes them).
          const local = new LocalObjectStore(path.join(state, 'exports'));
          const k = `exports/${user.id}/${jobId}/2/${fileName}`;
          unrecorded = await local.createUpload(k, 'text/csv');
          await local.uploadPart(k, unrecorded, 1, Buffer.alloc(MiB, 7));
        }
      }
      srv = await startTestServer(testConfig({ PMLAKE_LAKE: B.lakeDir, PMLAKE_STATE: state }));
      const done = await poll(srv.url, key, jobId);
      expect(done.status).toBe('failed');
      // One count: the attempts that ran, the error's, and the bound.
      expect(done.attempts).toBe(MAX_ATTEMPTS);
      expect(done.error).toBe(`interrupted ${MAX_ATTEMPTS} times (its worker stopped); nothing was charged`);
      // Nothing of any attempt is left: neither the recorded uploads nor the unrecorded one, and no object.
      expect(uploadKeys(state)).toEqual([]);
      expect(fs.readdirSync(path.join(state, 'exports', 'objects'))).toEqual([]);
      const row = sqliteOf(srv.ctx.state).prepare('SELECT upload_id, worker FROM export_jobs WHERE id = ?').get(jobId) as { upload_id: string | null };
      expect(row.upload_id).toBeNull();
      expect(sqliteOf(srv.ctx.state).prepare(`SELECT COUNT(*) AS n FROM pulls WHERE user_id = ?`).get(user.id)).toEqual({ n: 0 });
    } finally {
      await srv?.close();
      tmp.cleanup();
    }
  });

  it('the sweep discards uploads untouched for longer than the bound and keeps recent ones', async () => {
    const state = B.srv.ctx.config.stateDir;
    const store = new LocalObjectStore(path.join(state, 'exports'));
    const old = await store.createUpload('exports/u/j/1/old.csv', 'text/csv');
    await store.uploadPart('exports/u/j/1/old.csv', old, 1, Buffer.alloc(MiB, 1));
    const recent = await store.createUpload('exports/u/j/1/new.csv', 'text/csv');
    await store.uploadPart('exports/u/j/1/new.csv', recent, 1, Buffer.alloc(MiB, 2));
    // Last touched two days ago (the default bound is 24 h).
    const then = new Date(Date.now() - 48 * 3_600_000);
    fs.utimesSync(path.join(uploadsOf(state), old), then, then);
    await B.srv.ctx.exports.sweep();
    expect(uploads(state).map((u) => u.id)).toEqual([recent]);
    await store.discardUpload('exports/u/j/1/new.csv', recent);
    expect(uploads(state)).toEqual([]);
  });
});
