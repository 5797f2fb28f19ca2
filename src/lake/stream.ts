import { execFileSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { Transform, type Readable, type TransformCallback } from 'node:stream';
import type { DuckDBConnection, DuckDBInstance } from '@duckdb/node-api';
import { sqlString, type Query } from './duckdb.js';

/**
 * The streaming core of downloads and exports: DuckDB produces the file bytes itself
 * (`COPY (select) TO '<fifo>'`) and the FIFO's read side feeds an HTTP response or an S3 upload.
 * Turning rows into JS values is 4–9× slower than letting DuckDB serialise (stack-notes.md), and the pipe
 * gives back-pressure for free: when the consumer stops reading, the 64 KiB pipe buffer fills, DuckDB's
 * write(2) blocks and the query stops producing — memory stays flat whatever the result size.
 */

export type CopyFormat = 'csv' | 'parquet' | 'json';

export const CONTENT_TYPES: Readonly<Record<CopyFormat, string>> = {
  csv: 'text/csv; charset=utf-8',
  parquet: 'application/vnd.apache.parquet',
  json: 'application/json',
};

/**
 * DuckDB COPY options per format. JSON is one array (`ARRAY true`), not newline-delimited records, so the
 * body parses with any JSON parser. USE_TMP_FILE false: DuckDB would otherwise write `<target>.tmp` and
 * rename it over an existing target — here the target is the FIFO and must be written in place.
 */
export function copyOptions(format: CopyFormat): string {
  switch (format) {
    case 'csv':
      return 'FORMAT csv, HEADER true, USE_TMP_FILE false';
    case 'parquet':
      return 'FORMAT parquet, COMPRESSION zstd, ROW_GROUP_SIZE 122880, USE_TMP_FILE false';
    case 'json':
      return 'FORMAT json, ARRAY true, USE_TMP_FILE false';
  }
}

let root: string | null = null;

/**
 * The private directory (mode 0700) holding this process's FIFOs. It must exist before the lake database
 * is opened, because the locked DuckDB may only write where `allowed_directories` says.
 */
export function fifoRoot(): string {
  if (root && fs.existsSync(root)) return root;
  root = fs.mkdtempSync(path.join(os.tmpdir(), `pmlake-fifo-${process.pid}-`));
  fs.chmodSync(root, 0o700);
  return root;
}

let active = 0;
/** Number of COPY statements currently producing bytes (tests and metrics read it). */
export function activeCopies(): number {
  return active;
}

export type CopyStream = {
  /** The bytes DuckDB writes, with back-pressure. Errors if the COPY fails. */
  readonly stream: Readable;
  /** Bytes that came out of the pipe so far. */
  bytes(): number;
  /** Settles after the COPY ended and every byte was read: the COPY's row count, or the failure. */
  readonly done: Promise<{ rows: number; bytes: number }>;
  /** Stops the query (client went away, upload failed): interrupts DuckDB and removes the FIFO. */
  cancel(reason: string): void;
};

class Counter extends Transform {
  count = 0;
  override _transform(chunk: Buffer, _enc: BufferEncoding, cb: TransformCallback): void {
    this.count += chunk.length;
    cb(null, chunk);
  }
}

/** Thrown (through `done`) when the stream was cancelled by its consumer. */
export class CopyCancelled extends Error {
  constructor(reason: string) {
    super(`copy cancelled: ${reason}`);
  }
}

/**
 * Starts `COPY (query) TO fifo (format)` on its own connection and returns the read side.
 * `query.sql` is a SELECT from a builder; its values stay `$name` parameters.
 */
export async function startCopy(db: DuckDBInstance, query: Query, format: CopyFormat): Promise<CopyStream> {
  const dir = fs.mkdtempSync(path.join(fifoRoot(), 'c-'));
  const fifo = path.join(dir, `out.${format}`);
  let conn: DuckDBConnection | null = null;
  let socket: net.Socket | null = null;
  try {
    execFileSync('mkfifo', ['-m', '600', fifo]);
    // O_NONBLOCK: opening the read side must not wait for the writer (that would hold a libuv thread-pool
    // thread, and a handful of concurrent downloads would dead-lock the pool). On Linux a non-blocking reader
    // that has never seen a writer gets no EOF from epoll, so the socket simply waits for DuckDB's first write.
    const fd = fs.openSync(fifo, fs.constants.O_RDONLY | fs.constants.O_NONBLOCK);
    socket = new net.Socket({ fd, readable: true, writable: false });
    conn = await db.connect();
  } catch (err) {
    socket?.destroy();
    fs.rmSync(dir, { recursive: true, force: true });
    throw err;
  }
  const sock = socket;
  const c = conn;
  const counter = new Counter();
  let cancelled: string | null = null;
  let finished = false;
  active += 1;

  const cleanup = (): void => {
    if (finished) return;
    finished = true;
    active -= 1;
    sock.destroy();
    try {
      c.closeSync();
    } catch {
      // already closed
    }
    fs.rmSync(dir, { recursive: true, force: true });
  };

  const copy = c.run(`COPY (${query.sql}) TO ${sqlString(fifo)} (${copyOptions(format)})`, { ...query.params });
  sock.pipe(counter);

  const ended = new Promise<void>((resolve, reject) => {
    counter.once('end', resolve);
    counter.once('error', reject);
    sock.once('error', reject);
  });
  // Nothing may go unhandled: consumers await `done` (or not, on early exits).
  ended.catch(() => {});

  const done = (async () => {
    try {
      const res = await copy;
      await ended;
      if (cancelled) throw new CopyCancelled(cancelled);
      return { rows: Number(res.rowsChanged), bytes: counter.count };
    } catch (err) {
      const e = cancelled ? new CopyCancelled(cancelled) : err instanceof Error ? err : new Error(String(err));
      if (!counter.destroyed) counter.destroy(e);
      throw e;
    } finally {
      cleanup();
    }
  })();
  done.catch(() => {});

  return {
    stream: counter,
    bytes: () => counter.count,
    done,
    cancel(reason: string) {
      if (cancelled || finished) return;
      cancelled = reason;
      // Interrupt stops DuckDB at its next chunk boundary; meanwhile keep draining the pipe (into nothing) so a
      // writer blocked in write(2) wakes up and sees the interrupt instead of hanging on a full pipe, and so a
      // writer that has not opened the FIFO yet does not block forever in open(2) for want of a reader.
      c.interrupt();
      sock.unpipe(counter);
      sock.on('data', () => {});
      sock.resume();
      counter.destroy(new CopyCancelled(reason));
    },
  };
}

/** A short random name part for files and objects. */
export function randomTag(): string {
  return crypto.randomBytes(6).toString('hex');
}
