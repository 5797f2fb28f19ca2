import fs from 'node:fs';
import path from 'node:path';
import { HeadObjectCommand, ListObjectsV2Command, type S3Client } from '@aws-sdk/client-s3';
import { SignJWT } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeS3Client } from '../../src/s3/client.js';
import { startLocalS3, type LocalS3 } from '../../src/s3/local.js';
import type { RunningServer } from '../../src/server.js';
import { sql } from '../../src/state/sql.js';
import { call } from '../helpers/accounts.js';
import { buildAccountsLake } from '../helpers/accounts-lake.js';
import { startTestPostgres, type TestPostgres } from '../helpers/postgres.js';
import { startTestServer, tempDir, testConfig } from '../helpers/server.js';

/**
 * A deleted account stays deleted: after delete-confirm, the dashboard token it was deleted with (and any
 * token issued up to the deletion, or carrying no `iat`) answers 401 and creates no user for the erased
 * address; a token issued after the deletion — a deliberate sign-in since — is a new, empty account, and the
 * old token still signs in to nothing. The account's export files (its finished export; in the local store
 * also an upload an interrupted build left) are gone from the store when delete-confirm answers. On both
 * state backends, each with one of the two stores: SQLite with the default local store, PostgreSQL with an S3
 * store (s3rver on loopback).
 */
const SECRET = 'deletion-jwt-secret-0123456789abcdef';
const sign = (email: string, iat: number | null) => {
  const t = new SignJWT({ email }).setProtectedHeader({ alg: 'HS256' }).setExpirationTime('10m');
  return (iat === null ? t : t.setIssuedAt(iat)).sign(new TextEncoder().encode(SECRET));
};
const nowSeconds = () => Math.floor(Date.now() / 1000);

type Setup = { name: string; dialect: 'sqlite' | 'postgres'; start(dir: string): Promise<{ srv: RunningServer; s3: S3Client | null; close(): Promise<void> }> };

const SETUPS: Setup[] = [
  {
    name: 'SQLite, local store',
    dialect: 'sqlite',
    async start(dir) {
      const srv = await startTestServer(testConfig({ PMLAKE_LAKE: `${dir}/lake`, PMLAKE_STATE: `${dir}/state`, PMLAKE_JWT_SECRET: SECRET }));
      return { srv, s3: null, close: () => srv.close() };
    },
  },
  {
    name: 'PostgreSQL, S3 store',
    dialect: 'postgres',
    async start(dir) {
      const pg: TestPostgres = await startTestPostgres();
      const s3: LocalS3 = await startLocalS3({ directory: `${dir}/s3`, buckets: ['pmlake-exports'] });
      const srv = await startTestServer(
        testConfig({
          PMLAKE_LAKE: `${dir}/lake`,
          PMLAKE_STATE: `${dir}/state`,
          PMLAKE_JWT_SECRET: SECRET,
          PMLAKE_DATABASE_URL: pg.url,
          PMLAKE_S3_ENDPOINT: s3.endpoint,
        }),
      );
      const client = makeS3Client({ endpoint: s3.endpoint, bucket: 'pmlake-exports', region: 'us-east-1', accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' });
      return {
        srv,
        s3: client,
        async close() {
          client.destroy();
          await srv.close();
          await s3.close();
          await pg.close();
        },
      };
    },
  },
];

describe.each(SETUPS)('account deletion ($name)', (setup) => {
  const tmp = tempDir('pmlake-deletion-');
  let env: Awaited<ReturnType<Setup['start']>>;
  beforeAll(async () => {
    await buildAccountsLake(`${tmp.dir}/lake`, { trades: 2000, books: 10 });
    env = await setup.start(tmp.dir);
  }, 120_000);
  afterAll(async () => {
    await env?.close();
    tmp.cleanup();
  });

  /** The objects the store holds under a prefix, listed through the store's own means (files, or ListObjectsV2). */
  async function objectsUnder(prefix: string): Promise<string[]> {
    if (env.s3) {
      const page = await env.s3.send(new ListObjectsV2Command({ Bucket: 'pmlake-exports', Prefix: prefix }));
      return (page.Contents ?? []).map((o) => o.Key!);
    }
    const root = path.join(env.srv.ctx.config.stateDir, 'exports', 'objects');
    const dir = path.join(root, prefix);
    if (!fs.existsSync(dir)) return [];
    return (fs.readdirSync(dir, { recursive: true, withFileTypes: true }) as fs.Dirent[])
      .filter((e) => e.isFile())
      .map((e) => path.relative(root, path.join(e.parentPath, e.name)));
  }
  /** Unfinished uploads in the local store whose upload.json names a key under the prefix. */
  function localUploadsUnder(prefix: string): string[] {
    const root = path.join(env.srv.ctx.config.stateDir, 'exports', 'uploads');
    return fs
      .readdirSync(root)
      .filter((id) => (JSON.parse(fs.readFileSync(path.join(root, id, 'upload.json'), 'utf8')) as { key: string }).key.startsWith(prefix));
  }

  it('tokens of before the deletion are refused and create no user; a later sign-in is a new account; the export files are gone', async () => {
    const { srv } = env;
    const state = srv.ctx.state;
    expect([state.dialect, (await srv.ctx.exports.store()).kind]).toEqual([setup.dialect, env.s3 ? 's3' : 'local']);
    const email = 'gone@example.com';
    const before = await sign(email, nowSeconds());
    const me = await call(srv, 'GET', '/v1/user/me', { bearer: before });
    expect(me.status).toBe(200);
    const userId = me.body.id as string;
    // A plan that covers exports, then one finished export through the API.
    await state.upsertUser(email, 'professional');
    const sub = await call(srv, 'POST', '/v1/exports', { bearer: before, body: { kind: 'trades', market_id: '1001', format: 'csv' } });
    expect(sub.status).toBe(202);
    const jobId = sub.body.id as string;
    const statusOf = async () => (await state.get<{ status: string }>(sql`SELECT status FROM export_jobs WHERE id = ${jobId}`))?.status;
    while (['queued', 'running'].includes((await statusOf())!)) await new Promise((r) => setTimeout(r, 50));
    expect(await statusOf()).toBe('succeeded');
    const { object_key: objectKey } = (await state.get<{ object_key: string }>(sql`SELECT object_key FROM export_jobs WHERE id = ${jobId}`))!;
    const prefix = `exports/${userId}/`;
    expect(await objectsUnder(prefix)).toEqual([objectKey]);
    if (env.s3) expect((await env.s3.send(new HeadObjectCommand({ Bucket: 'pmlake-exports', Key: objectKey }))).$metadata.httpStatusCode).toBe(200);
    else {
      // What a build interrupted between creating its upload and recording it leaves: parts no job names.
      const store = await srv.ctx.exports.store();
      const key = `${prefix}${jobId}/9/${sub.body.file_name}`;
      await store.uploadPart(key, await store.createUpload(key, 'text/csv'), 1, Buffer.alloc(1024, 1));
      expect(localUploadsUnder(prefix)).toHaveLength(1);
    }

    const req = await call(srv, 'POST', '/v1/user/delete-request', { bearer: before, body: {} });
    expect(req.status).toBe(200);
    const ok = await call(srv, 'POST', '/v1/user/delete-confirm', { body: { token: req.body.token } });
    expect(ok.status).toBe(200);
    const deletedAt = Date.parse(ok.body.deleted_at);

    // The token it was deleted with, and one without iat: 401, and no new user for the erased address.
    for (const token of [before, await sign(email, null)]) {
      for (const p of ['/v1/user/me', '/v1/user/data-export', '/v1/exports']) {
        const r = await call(srv, 'GET', p, { bearer: token });
        expect(r.status, p).toBe(401);
        expect(r.body).toHaveProperty('detail');
      }
    }
    expect(await state.getUserByEmail(email)).toBeUndefined();
    // The export files went with the account: the finished object and any upload, in the store itself.
    expect(await objectsUnder(prefix)).toEqual([]);
    if (!env.s3) expect(localUploadsUnder(prefix)).toEqual([]);
    expect(await state.all(sql`SELECT id FROM export_jobs WHERE user_id = ${userId}`)).toEqual([]);
    expect(await state.all(sql`SELECT user_id FROM export_purges`)).toEqual([]);

    // A sign-in after the deletion (its iat a later second) is a deliberate new account, empty and Free.
    while (nowSeconds() * 1000 <= deletedAt) await new Promise((r) => setTimeout(r, 50));
    const after = await sign(email, nowSeconds());
    const fresh = await call(srv, 'GET', '/v1/user/me', { bearer: after });
    expect(fresh.status).toBe(200);
    expect(fresh.body.id).not.toBe(userId);
    expect(fresh.body.email).toBe(email);
    expect((await call(srv, 'GET', '/v1/exports', { bearer: after })).body.data).toEqual([]);
    // The old token stays refused now that the address has an account again.
    expect((await call(srv, 'GET', '/v1/user/me', { bearer: before })).status).toBe(401);
    // The pseudonymised account signs in to nothing either.
    expect((await call(srv, 'GET', '/v1/user/me', { bearer: await sign(`deleted+${userId}@deleted.invalid`, nowSeconds()) })).status).toBe(401);
  });

  it('an export still building when the account is deleted leaves no file and charges nothing', async () => {
    const { srv } = env;
    const state = srv.ctx.state;
    const email = 'building@example.com';
    const token = await sign(email, nowSeconds());
    const userId = (await call(srv, 'GET', '/v1/user/me', { bearer: token })).body.id as string;
    await state.upsertUser(email, 'professional');
    // The build waits, its file whole in the store's parts, until the deletion has been answered.
    const store = await srv.ctx.exports.store();
    const complete = store.completeUpload.bind(store);
    let reached = false;
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    store.completeUpload = async (...args) => {
      reached = true;
      await gate;
      return complete(...args);
    };
    try {
      const sub = await call(srv, 'POST', '/v1/exports', { bearer: token, body: { kind: 'trades', market_id: '1001', format: 'csv' } });
      expect(sub.status).toBe(202);
      while (!reached) await new Promise((r) => setTimeout(r, 20));
      const req = await call(srv, 'POST', '/v1/user/delete-request', { bearer: token, body: {} });
      const ok = await call(srv, 'POST', '/v1/user/delete-confirm', { body: { token: req.body.token } });
      expect(ok.status).toBe(200);
      expect(ok.body.export_jobs_erased).toBe(1);
    } finally {
      release();
      store.completeUpload = complete;
    }
    await srv.ctx.exports.idle();
    expect(await objectsUnder(`exports/${userId}/`)).toEqual([]);
    if (!env.s3) expect(localUploadsUnder(`exports/${userId}/`)).toEqual([]);
    expect(await state.all(sql`SELECT id FROM pulls WHERE user_id = ${userId}`)).toEqual([]);
    expect(await state.all(sql`SELECT id FROM export_jobs WHERE user_id = ${userId}`)).toEqual([]);
  });
});
