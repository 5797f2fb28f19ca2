import crypto from 'node:crypto';
import fs from 'node:fs';
import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DuckDBInstance } from '@duckdb/node-api';
import { openLakeDb } from '../../src/lake/duckdb.js';
import { activeCopies, fifoRoot, OutputClosed, startCopy, writeCopyTo } from '../../src/lake/stream.js';
import { tempDir } from '../helpers/server.js';

/**
 * The streaming core on the real, locked-down DuckDB: bytes arrive before the query ends, a consumer that
 * stops reading stops the query (bounded bytes in flight), and cancelling interrupts DuckDB and removes the
 * FIFO. No wall-clock assertions: everything is checked through states and byte counts.
 */
const tmp = tempDir();
let db: DuckDBInstance;
const BIG = { sql: `SELECT range AS i, md5(range::VARCHAR) AS h FROM range(20000000)`, params: {} };

beforeAll(async () => {
  db = await openLakeDb({ allowedDirectories: [tmp.dir, fifoRoot()], threads: 2 });
});
afterAll(() => {
  db.closeSync();
  tmp.cleanup();
});

describe('COPY into a FIFO', () => {
  it('first bytes arrive while the query is still running; a paused reader holds DuckDB back; cancel cleans up', async () => {
    const before = fs.readdirSync(fifoRoot()).length;
    const copy = await startCopy(db, BIG, 'csv');
    const first = await new Promise<Buffer>((resolve) => copy.stream.once('data', resolve));
    copy.stream.pause();
    expect(first.subarray(0, 4).toString()).toBe('i,h\n');
    let settled = false;
    void copy.done.then(
      () => (settled = true),
      () => (settled = true),
    );
    // Give DuckDB every chance to run ahead; with the reader paused it cannot: the pipe is full.
    await new Promise((r) => setTimeout(r, 300));
    const inFlight = copy.bytes();
    await new Promise((r) => setTimeout(r, 300));
    expect(settled).toBe(false);
    expect(activeCopies()).toBeGreaterThan(0);
    expect(copy.bytes()).toBe(inFlight);
    // 20M rows are ~900 MB of CSV; what left DuckDB is bounded by the buffers.
    expect(copy.bytes()).toBeLessThan(8 * 1024 * 1024);
    copy.cancel('test');
    await expect(copy.done).rejects.toThrow(/cancelled/);
    expect(activeCopies()).toBe(0);
    expect(fs.readdirSync(fifoRoot()).length).toBe(before);
  });

  it('a query error reaches the consumer and leaves nothing behind', async () => {
    const copy = await startCopy(db, { sql: `SELECT CAST('x' AS INTEGER) AS bad`, params: {} }, 'json');
    await expect(copy.done).rejects.toThrow(/Conversion|convert/i);
    expect(activeCopies()).toBe(0);
  });

  it('JSON is one array; the row count comes from COPY', async () => {
    const copy = await startCopy(db, { sql: `SELECT range AS i FROM range($n)`, params: { n: 1000 } }, 'json');
    const chunks: Buffer[] = [];
    copy.stream.on('data', (c: Buffer) => chunks.push(c));
    const r = await copy.done;
    expect(r.rows).toBe(1000);
    const arr = JSON.parse(Buffer.concat(chunks).toString()) as { i: number }[];
    expect(arr.map((x) => x.i)).toEqual(Array.from({ length: 1000 }, (_, i) => i));
    expect(r.bytes).toBe(Buffer.concat(chunks).length);
  });

  it('pooled read buffers: a chunk is reused only once its write completed (a slow writer gets every byte intact)', async () => {
    const n = 200_000;
    const copy = await startCopy(db, { sql: `SELECT range AS i, md5(range::VARCHAR) AS h FROM range($n)`, params: { n } }, 'csv');
    const got: Buffer[] = [];
    const slow = new Writable({
      highWaterMark: 256 * 1024,
      write(chunk: Buffer, _enc, cb) {
        // The bytes are copied only when the write completes: had the chunk's buffer gone back to the pool (and
        // been refilled by a later read) before this point, — or while it sat queued behind this write — the
        // copy would hold later bytes.
        setTimeout(() => {
          got.push(Buffer.from(chunk));
          cb();
        }, 0);
      },
    });
    let seen = 0;
    await writeCopyTo(copy, slow, { head: [], rest: true, onChunk: (b) => (seen += b.length) });
    const r = await copy.done;
    // writeCopyTo resolves when the source ended (as pipe() does); the last writes may still be queued.
    await new Promise<void>((resolve) => slow.end(resolve));
    expect(r.rows).toBe(n);
    let want = 'i,h\n';
    for (let i = 0; i < n; i++) want += `${i},${crypto.createHash('md5').update(String(i)).digest('hex')}\n`;
    const text = Buffer.concat(got).toString();
    expect(text.length).toBe(want.length);
    expect(text === want).toBe(true);
    expect(seen).toBe(r.bytes);
  });

  it('writeCopyTo rejects when its output closes; cancel then stops the COPY and removes the FIFO', async () => {
    const before = fs.readdirSync(fifoRoot()).length;
    const copy = await startCopy(db, BIG, 'csv');
    const out = new Writable({
      highWaterMark: 64 * 1024,
      write(_c, _e, cb) {
        setTimeout(cb, 5);
      },
    });
    const p = writeCopyTo(copy, out, { head: [], rest: true });
    while (copy.bytes() === 0) await new Promise((r) => setTimeout(r, 10));
    out.destroy();
    await expect(p).rejects.toBeInstanceOf(OutputClosed);
    copy.cancel('test');
    await expect(copy.done).rejects.toThrow(/cancelled/);
    expect(activeCopies()).toBe(0);
    expect(fs.readdirSync(fifoRoot()).length).toBe(before);
  });
});
