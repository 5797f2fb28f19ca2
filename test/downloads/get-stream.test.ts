import http from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { activeCopies } from '../../src/lake/stream.js';
import { buildDownloadsLake, type DlLake } from '../helpers/downloads-lake.js';
import { sqliteOf } from '../helpers/state.js';

/**
 * A single GET /v1/download/* file through the HTTP glue (src/http/download-send.ts) over the core stream
 * (src/downloads/send.ts): the headers of a small and of a streamed file, and a client that stops reading and
 * then hangs up — DuckDB held back, then interrupted, and only the bytes that left the server recorded.
 * The lake is busier than the shared one (generator rate 3): the normalized L2 tape as JSON is ~36 MB, more
 * than loopback socket buffers hold.
 */
let L: DlLake;
const BIG = '/v1/download/raw?data_type=polymarket_l2_deltas&shape=normalized&format=json&limit=2000000';

type Pull = { status: string; bytes: number | null; rows: number | null; reason: string | null };
const pullsOf = (email: string): Pull[] =>
  sqliteOf(L.srv.ctx.state)
    .prepare(`SELECT p.status, p.bytes, p.rows, p.reason FROM pulls p JOIN users u ON u.id = p.user_id WHERE u.email = ? ORDER BY p.created_at, p.rowid`)
    .all(email) as Pull[];

beforeAll(async () => {
  L = await buildDownloadsLake({ seed: 3, rate: 3 });
});
afterAll(async () => {
  await L?.close();
});

describe('GET /v1/download/* streaming', () => {
  it('a small file: exact Content-Length and X-Record-Count, attachment headers; recorded bytes = body', async () => {
    const res = await L.fetch('/v1/download/raw?data_type=polymarket_l2_deltas&format=csv&shape=normalized&limit=3');
    expect(res.status).toBe(200);
    const body = Buffer.from(await res.arrayBuffer());
    expect(res.headers.get('content-length')).toBe(String(body.length));
    expect(res.headers.get('x-record-count')).toBe('3');
    expect(res.headers.get('content-type')).toBe('text/csv; charset=utf-8');
    expect(res.headers.get('content-disposition')).toBe(`attachment; filename="raw_polymarket_l2_deltas_normalized.csv"`);
    expect(res.headers.get('cache-control')).toBe('no-store');
    expect(res.headers.get('accept-ranges')).toBe('none');
    expect(res.headers.get('transfer-encoding')).toBeNull();
    expect(pullsOf('dl@example.com').at(-1)).toMatchObject({ status: 'completed', bytes: body.length, rows: 3 });
  });

  it('a large file is chunked (no length known before the first byte) and recorded with its bytes and rows', async () => {
    const res = await L.fetch(BIG);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-length')).toBeNull();
    expect(res.headers.get('x-record-count')).toBeNull();
    expect(res.headers.get('transfer-encoding')).toBe('chunked');
    const body = Buffer.from(await res.arrayBuffer());
    const rows = (JSON.parse(body.toString()) as unknown[]).length;
    expect(body.length).toBeGreaterThan(16 * 1024 * 1024);
    await new Promise((r) => setTimeout(r, 50));
    expect(pullsOf('dl@example.com').at(-1)).toMatchObject({ status: 'completed', bytes: body.length, rows });
  });

  it('a client that stops reading holds the COPY back; when it hangs up the COPY is interrupted and only what was sent is charged', async () => {
    const got = await new Promise<{ req: http.ClientRequest; res: http.IncomingMessage }>((resolve, reject) => {
      const req = http.get(`${L.srv.url}${BIG}`, { headers: { 'x-api-key': L.otherKey } }, (res) => resolve({ req, res }));
      req.on('error', reject);
    });
    expect(got.res.statusCode).toBe(200);
    got.res.pause();
    // Wait until the server is stuck: a COPY open and nothing more arriving for a while.
    let last = -1;
    for (let stable = 0; stable < 5;) {
      await new Promise((r) => setTimeout(r, 50));
      const now = got.res.readableLength;
      stable = now === last ? stable + 1 : 0;
      last = now;
    }
    expect(activeCopies()).toBe(1);
    got.req.destroy();
    got.res.destroy();
    for (let i = 0; i < 200 && activeCopies() > 0; i++) await new Promise((r) => setTimeout(r, 25));
    expect(activeCopies()).toBe(0);
    await new Promise((r) => setTimeout(r, 50));
    const p = pullsOf('other@example.com');
    expect(p).toHaveLength(1);
    // Charged for what left the server (rows unknown: 0), not the whole file, and nothing left pending.
    expect(p[0]!.status).toBe('completed');
    expect(p[0]!.bytes).toBeGreaterThan(0);
    expect(p[0]!.bytes).toBeLessThan(30 * 1024 * 1024);
    expect(p[0]!.rows).toBe(0);
  });

  it('an empty window is a 404 the client recognises, and refunded', async () => {
    const res = await L.fetch('/v1/download/raw?data_type=polymarket_l2_deltas&start=2001-01-01&end=2001-01-02', { key: L.otherKey });
    expect(res.status).toBe(404);
    expect(await res.json()).toEqual({ detail: 'No raw tape records in this range' });
    expect(pullsOf('other@example.com').at(-1)).toMatchObject({ status: 'failed', reason: 'empty result' });
  });
});
