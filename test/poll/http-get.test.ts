import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { backoffMs, getWithRetries, retryAfterMs } from '../../src/poll/http-get.js';

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

/** A loopback server answering request n with `answers[n]` (the last one from then on); null = never answers. */
async function server(answers: ({ status: number; headers?: Record<string, string>; body: string } | null)[]): Promise<{ url: string; asked: () => number }> {
  let n = 0;
  const s = http.createServer((_req, res) => {
    const a = answers[Math.min(n++, answers.length - 1)];
    if (a) res.writeHead(a.status, a.headers).end(a.body);
  });
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  cleanups.push(
    () =>
      new Promise<void>((r) => {
        s.closeAllConnections();
        s.close(() => r());
      }),
  );
  return { url: `http://127.0.0.1:${(s.address() as AddressInfo).port}/x`, asked: () => n };
}

const fast = { timeoutMs: 2_000, retries: 3, baseDelayMs: 10, maxDelayMs: 40 };

describe('getWithRetries', () => {
  it('reads Retry-After as seconds or an HTTP date, and caps it', () => {
    const now = Date.UTC(2026, 10, 26, 12, 0, 0);
    expect(retryAfterMs('3', now)).toBe(3000);
    expect(retryAfterMs('Thu, 26 Nov 2026 12:00:07 GMT', now)).toBe(7000);
    expect(retryAfterMs('Thu, 26 Nov 2026 11:00:00 GMT', now)).toBe(0);
    expect(retryAfterMs('86400', now)).toBe(300_000);
    expect(retryAfterMs('soon', now)).toBeNull();
    expect(retryAfterMs(null, now)).toBeNull();
  });

  it('backs off with full jitter under a doubling ceiling', () => {
    expect([0, 1, 2, 3, 10].map((a) => backoffMs(a, 100, 1000, () => 0.999))).toEqual([99, 199, 399, 799, 999]);
    expect(backoffMs(5, 100, 1000, () => 0)).toBe(0);
  });

  it('retries 429 and 5xx, waiting at least what Retry-After asks, then returns the body', async () => {
    const s = await server([
      { status: 429, headers: { 'retry-after': '1' }, body: 'slow down' },
      { status: 502, body: 'bad gateway' },
      { status: 200, body: '[1,2]' },
    ]);
    const waits: { status: number | null; waitMs: number }[] = [];
    const r = await getWithRetries(s.url, { ...fast, onRetry: (i) => waits.push({ status: i.status, waitMs: i.waitMs }) });
    expect(r).toEqual({ ok: true, status: 200, body: '[1,2]', attempts: 3 });
    expect(waits[0]).toEqual({ status: 429, waitMs: 1000 });
    expect(waits[1]!.status).toBe(502);
    expect(waits[1]!.waitMs).toBeLessThan(20);
  });

  it('gives up after its retries with the last status and body; a 4xx other than 429 at once', async () => {
    const s = await server([{ status: 503, body: 'down' }]);
    expect(await getWithRetries(s.url, fast)).toEqual({ ok: false, status: 503, body: 'down', message: 'HTTP 503', attempts: 4 });
    expect(s.asked()).toBe(4);
    const t = await server([{ status: 404, body: '{"error":"not found"}' }]);
    expect(await getWithRetries(t.url, fast)).toEqual({ ok: false, status: 404, body: '{"error":"not found"}', message: 'HTTP 404', attempts: 1 });
  });

  it('retries a refused connection and a server that does not answer, and never throws', async () => {
    const s = await server([null]);
    const slow = await getWithRetries(s.url, { ...fast, timeoutMs: 100, retries: 1 });
    expect(slow).toMatchObject({ ok: false, status: null, message: 'no answer within 100 ms', attempts: 2 });
    const refused = await getWithRetries('http://127.0.0.1:9/x', { ...fast, retries: 2 });
    expect(refused).toMatchObject({ ok: false, status: null, attempts: 3 });
    expect((refused as { message: string }).message).toMatch(/ECONNREFUSED|fetch failed/);
  });

  it('stops at once when its signal aborts', async () => {
    const s = await server([null]);
    const ac = new AbortController();
    const p = getWithRetries(s.url, { ...fast, timeoutMs: 60_000, signal: ac.signal });
    setTimeout(() => ac.abort(), 50);
    expect(await p).toMatchObject({ ok: false, message: 'stopped', attempts: 1 });
  });
});
