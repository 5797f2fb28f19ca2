import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { buildDownloadsLake, type DlLake } from '../helpers/downloads-lake.js';
import { files } from '../helpers/lake-files.js';
import { sqliteOf } from '../helpers/state.js';

/**
 * Export links on the default configuration (no PMLAKE_S3_ENDPOINT), through the real server (issue 11 item
 * 4). The link must enforce what a presigned link promises: a genuine one serves the exact bytes (ranges too)
 * without an API key; a tampered, bare, expired (then "extended") or cross-user one is refused; nothing lists.
 * The rewrites below are written against either link shape (pmlake's `expires`/`signature`, or an S3
 * presigned `X-Amz-*` URL), so they also show the old default — an embedded s3rver — answering 200.
 */
let L: DlLake;
let marketId: string;
let userB: string;
const post = (body: unknown, key?: string) =>
  L.fetch('/v1/exports', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body), ...(key ? { key } : {}) });

async function finished(body: Record<string, unknown>, key?: string): Promise<Record<string, any>> {
  const job = (await (await post(body, key)).json()) as { id: string };
  for (;;) {
    const j = (await (await L.fetch(`/v1/exports/${job.id}`, key ? { key } : {})).json()) as Record<string, any>;
    if (!['queued', 'running'].includes(j.status)) return j;
    await new Promise((r) => setTimeout(r, 50));
  }
}

async function linkOf(jobId: string, key?: string, ttl = 300): Promise<string> {
  const r = await L.fetch(`/v1/exports/${jobId}/url?ttl=${ttl}`, key ? { key } : {});
  expect(r.status).toBe(200);
  return ((await r.json()) as { data: { download_url: string } }).data.download_url;
}

/** The link with one query parameter changed (whichever of the names it carries). */
function withParam(link: string, names: string[], value: (old: string) => string): string {
  const u = new URL(link);
  const name = names.find((n) => u.searchParams.has(n));
  expect(name, `one of ${names.join(', ')} in ${link}`).toBeDefined();
  u.searchParams.set(name!, value(u.searchParams.get(name!)!));
  return u.toString();
}

const get = async (url: string, headers: Record<string, string> = {}) => {
  const r = await fetch(url, { headers }); // never an API key: the link is the only credential
  return { status: r.status, headers: r.headers, body: Buffer.from(await r.arrayBuffer()) };
};

let jobA: Record<string, any>;
let linkA: string;
let bytesA: Buffer;

beforeAll(async () => {
  L = await buildDownloadsLake({ seed: 5, defaultStore: true });
  const m = (
    await L.rows(
      `SELECT m.id, count(*) n FROM read_parquet(${files(L.lakeDir, 'catalog/markets')}) m
     JOIN read_parquet(${files(L.lakeDir, 'trades')}) t ON list_contains(m.outcome_token_ids, t.token_id) GROUP BY ALL ORDER BY n DESC LIMIT 1`,
    )
  )[0]!;
  marketId = String(m.id);
  userB = (sqliteOf(L.srv.ctx.state).prepare(`SELECT id FROM users WHERE email = 'other@example.com'`).get() as { id: string }).id;
  jobA = await finished({ kind: 'trades', market_id: marketId, format: 'parquet' });
  expect(jobA.status).toBe('succeeded');
  linkA = await linkOf(jobA.id);
});
afterAll(async () => {
  vi.useRealTimers();
  await L?.close();
});

describe('export links, default store', () => {
  it('a genuine link → 200 with the exact bytes, no key, re-usable; Content-Length, ETag; Range 206 and 416', async () => {
    const first = await get(linkA);
    expect(first.status).toBe(200);
    expect(first.headers.get('content-type')).toBe('application/vnd.apache.parquet');
    expect(first.headers.get('content-disposition')).toContain(`filename="${jobA.file_name}"`);
    expect(Number(first.headers.get('content-length'))).toBe(jobA.size_bytes);
    bytesA = first.body;
    expect(bytesA.length).toBe(jobA.size_bytes);
    // The bytes are the export: DuckDB reads back every row the job counted.
    const f = path.join(L.dir, 'link.parquet');
    fs.writeFileSync(f, bytesA);
    expect((await L.rows(`SELECT count(*)::INT n FROM read_parquet('${f}')`))[0]!.n).toBe(jobA.record_count);
    const again = await get(linkA);
    expect(again.status).toBe(200);
    expect(again.body.equals(bytesA)).toBe(true);
    const etag = first.headers.get('etag')!;
    expect(etag).toMatch(/^".+"$/);
    expect(again.headers.get('etag')).toBe(etag);

    const part = await get(linkA, { range: 'bytes=4-99' });
    expect(part.status).toBe(206);
    expect(part.headers.get('content-range')).toBe(`bytes 4-99/${bytesA.length}`);
    expect(part.body.equals(bytesA.subarray(4, 100))).toBe(true);
    const tail = await get(linkA, { range: 'bytes=-10' });
    expect(tail.status).toBe(206);
    expect(tail.body.equals(bytesA.subarray(bytesA.length - 10))).toBe(true);
    const rest = await get(linkA, { range: `bytes=${bytesA.length - 5}-` });
    expect(rest.body.equals(bytesA.subarray(bytesA.length - 5))).toBe(true);
    const past = await get(linkA, { range: `bytes=${bytesA.length}-` });
    expect(past.status).toBe(416);
    expect(past.headers.get('content-range')).toBe(`bytes */${bytesA.length}`);
    // A stale If-Range: the client's partial copy is of another file, so the whole file comes back.
    const stale = await get(linkA, { range: 'bytes=0-9', 'if-range': '"other"' });
    expect(stale.status).toBe(200);
    expect(stale.body.length).toBe(bytesA.length);
    expect((await get(linkA, { 'if-none-match': etag })).status).toBe(304);
  });

  it('a tampered signature, or a tampered expiry under the same signature → 403', async () => {
    const flip = (s: string) => s.slice(0, -1) + (s.endsWith('0') ? '1' : '0');
    for (const url of [
      withParam(linkA, ['signature', 'X-Amz-Signature'], flip),
      withParam(linkA, ['signature', 'X-Amz-Signature'], (s) => s.slice(0, 10)),
      withParam(linkA, ['signature', 'X-Amz-Signature'], () => ''),
      withParam(linkA, ['expires', 'X-Amz-Expires'], (e) => String(Number(e) + 1)),
    ]) {
      const r = await get(url);
      expect(r.status, url).toBe(403);
      expect(JSON.parse(r.body.toString()), url).toEqual({ detail: 'Invalid download link' });
    }
  });

  it('no signature at all — the bare object URL, or half the parameters → 403', async () => {
    const bare = new URL(linkA);
    bare.search = '';
    for (const drop of [[], ['signature', 'X-Amz-Signature'], ['expires', 'X-Amz-Expires']]) {
      const u = new URL(linkA);
      if (drop.length === 0) u.search = '';
      for (const d of drop) u.searchParams.delete(d);
      const r = await get(u.toString());
      expect([401, 403], u.toString()).toContain(r.status);
      expect(r.body.length).toBeLessThan(200); // an error, not the file
    }
  });

  it('an expired link → 403, and stays refused when its expiry is rewritten larger', async () => {
    const link = await linkOf(jobA.id, undefined, 60);
    expect((await get(link)).status).toBe(200);
    // Two hours later (only the clock moves; timers stay real).
    vi.useFakeTimers({ toFake: ['Date'], now: Date.now() + 2 * 3_600_000 });
    try {
      const extended = withParam(link, ['expires', 'X-Amz-Expires'], (e) => String(Number(e) + 3 * 3600));
      expect((await get(extended)).status).toBe(403);
      const expired = await get(link);
      expect(expired.status).toBe(403);
      expect(JSON.parse(expired.body.toString()).detail).toMatch(/^Download link expired/);
      // A new link from the API works again: the file itself has not expired (retention is 7 days).
      expect((await get(await linkOf(jobA.id))).status).toBe(200);
    } finally {
      vi.useRealTimers();
    }
  });

  it("another user's job with this user's link parameters → refused; that user's own link works", async () => {
    // The same export as A's (same file name): only the job, and its owner, differ.
    const jobB = await finished({ kind: 'trades', market_id: marketId, format: 'parquet' }, L.otherKey);
    expect(jobB.file_name).toBe(jobA.file_name);
    expect(jobB.status).toBe('succeeded');
    // Point A's link at B's job (and B's user, where a link names the user, as an S3 object key does).
    const crossed = linkA.replaceAll(jobA.id, jobB.id).replaceAll(L.userId, userB);
    expect(crossed).not.toBe(linkA);
    const r = await get(crossed);
    expect(r.status).toBe(403);
    expect(r.body.length).toBeLessThan(200); // an error, not the file
    // B's own link is fine: the refusal above is the signature's doing, not a missing file.
    const own = await get(await linkOf(jobB.id, L.otherKey));
    expect(own.status).toBe(200);
    expect(own.body.length).toBe(jobB.size_bytes);
    // And B's link cannot fetch A's file either.
    expect((await get((await linkOf(jobB.id, L.otherKey)).replaceAll(jobB.id, jobA.id).replaceAll(userB, L.userId))).status).toBe(403);
  });

  it('nothing lists exports: bucket-, prefix- and directory-style URLs on the link host → 401/403/404, no job named', async () => {
    const origin = new URL(linkA).origin;
    const file = new URL(linkA).pathname;
    for (const p of [
      '/',
      '/pmlake-exports',
      '/pmlake-exports/',
      '/pmlake-exports?list-type=2',
      '/pmlake-exports?list-type=2&prefix=exports/',
      '/pmlake-exports?uploads',
      `/pmlake-exports/exports/${L.userId}/`,
      path.posix.dirname(file) + '/',
      path.posix.dirname(path.posix.dirname(file)),
      `/v1/exports/${jobA.id}/file/`,
      `/v1/exports/${jobA.id}/file/..`,
      '/v1/exports/%2e%2e/file',
      '/v1/exports',
    ]) {
      const r = await fetch(origin + p);
      const text = await r.text();
      // GET / is the service's public root (the anchor's root__get): 200, naming the service and never a job.
      expect(p === '/' ? [200] : [401, 403, 404], p).toContain(r.status);
      expect(text, p).not.toContain(jobA.id);
      expect(text, p).not.toContain(jobA.file_name);
    }
  });
});
