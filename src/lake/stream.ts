import { execFile } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { Readable, type Writable } from 'node:stream';
import type { DuckDBConnection, DuckDBInstance } from '@duckdb/node-api';
import { processAlive, sqlString, type Query } from './duckdb.js';

/**
 * The streaming core of downloads and exports: DuckDB produces the file bytes itself
 * (`COPY (select) TO '<fifo>'`) and the FIFO's read side feeds an HTTP response or an S3 upload.
 * Turning rows into JS values is several times slower than letting DuckDB serialise, and the pipe
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

/**
 * The FIFO root: this process's private directory (mkdtemp: an unpredictable name, mode 0700) holding the
 * FIFOs that DuckDB's COPY writes into. It is the only place besides the lake a service DuckDB may touch
 * (`allowed_directories`, src/compose.ts), so it must exist before that database is opened. It goes when
 * its last holder releases it (the service closed) or the process exits; a killed process's is swept by
 * the next one (named by pid, like DuckDB's spill folders).
 */
const FIFO_PREFIX = 'pmlake-fifo-';
let root: string | null = null;
let holders = 0;
/** Someone used the root without holding it (tests, a bare startCopy): it then stays until exit. */
let pinned = false;

function ensureRoot(): string {
  if (root && fs.existsSync(root)) return root;
  if (!root) sweepDeadFifoRoots();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `${FIFO_PREFIX}${process.pid}-`));
  fs.chmodSync(dir, 0o700);
  root = dir;
  spare.length = 0;
  return dir;
}

function removeRoot(): void {
  if (!root) return;
  fs.rmSync(`${root}.spare`, { recursive: true, force: true });
  fs.rmSync(root, { recursive: true, force: true });
  root = null;
  spare.length = 0;
}

/** The FIFO root, kept until the process exits. */
export function fifoRoot(): string {
  pinned = true;
  return ensureRoot();
}

export type FifoRootHold = { readonly dir: string; release(): void };

/** The FIFO root for a database that COPYs into it, until `release`: the last release removes it. */
export function holdFifoRoot(): FifoRootHold {
  const dir = ensureRoot();
  holders += 1;
  let held = true;
  return {
    dir,
    release() {
      if (!held) return;
      held = false;
      holders -= 1;
      if (holders === 0 && !pinned) removeRoot();
    },
  };
}

/** Removes FIFO roots (and their spare folders) of processes that no longer run. */
export function sweepDeadFifoRoots(dir: string = os.tmpdir()): number {
  let removed = 0;
  for (const name of fs.readdirSync(dir)) {
    const m = name.startsWith(FIFO_PREFIX) ? /^(\d+)-[^.]+(\.spare)?$/.exec(name.slice(FIFO_PREFIX.length)) : null;
    if (!m || Number(m[1]) === process.pid || processAlive(Number(m[1]))) continue;
    fs.rmSync(path.join(dir, name), { recursive: true, force: true });
    removed += 1;
  }
  return removed;
}

/** Where ready-made FIFOs wait (a sibling of the root, same file system: taking one is a rename). */
function spareDir(): string {
  const dir = `${ensureRoot()}.spare`;
  if (!fs.existsSync(dir)) fs.mkdirSync(dir, { mode: 0o700 });
  return dir;
}
process.once('exit', removeRoot);

/**
 * FIFOs made ahead of time and reused. Node has no mkfifo(3), so a FIFO costs a `mkfifo` process, and
 * spawning one forks this process — large once DuckDB has warmed up: spawnSync blocks the event loop per
 * download (once per bulk ZIP item, nothing flowing meanwhile), and even an asynchronous spawn blocks the
 * loop for the fork. So: one `mkfifo` makes a batch, off the critical
 * path, and a FIFO whose COPY finished cleanly goes back to the pool (see startCopy's cleanup: EOF on the read
 * side means DuckDB has closed its write side, so nothing can still be attached to it).
 */
const FIFO_BATCH = 8;
const MAX_SPARE = 16;
const spare: string[] = [];
let refilling: Promise<void> | null = null;

function refill(): Promise<void> {
  if (refilling) return refilling;
  const batch = Array.from({ length: FIFO_BATCH }, () => path.join(spareDir(), `f-${randomTag()}`));
  refilling = new Promise<void>((resolve, reject) => {
    execFile('mkfifo', ['-m', '600', ...batch], (err) => {
      refilling = null;
      if (err) {
        for (const f of batch) fs.rmSync(f, { force: true });
        reject(err);
      } else {
        spare.push(...batch);
        resolve();
      }
    });
  });
  return refilling;
}

/** A FIFO for one COPY, moved into its own directory: `<root>/c-…/out.<format>`. */
async function takeFifo(format: CopyFormat): Promise<{ dir: string; fifo: string }> {
  let made: string | undefined;
  while (!made) {
    made = spare.pop();
    // A spare from a previous FIFO root (removed meanwhile) is gone: take another.
    if (made && !fs.existsSync(made)) made = undefined;
    if (!made && spare.length === 0) await refill();
  }
  if (spare.length < 2) refill().catch(() => {}); // the next startCopy reports a persistent failure
  const dir = fs.mkdtempSync(path.join(ensureRoot(), 'c-'));
  const fifo = path.join(dir, `out.${format}`);
  try {
    fs.renameSync(made, fifo);
  } catch (err) {
    fs.rmSync(dir, { recursive: true, force: true });
    fs.rmSync(made, { force: true });
    throw err;
  }
  return { dir, fifo };
}

/** Puts the FIFO of a cleanly finished COPY back into the pool (or removes it), and removes its directory. */
function returnFifo(dir: string, fifo: string, reusable: boolean): void {
  if (reusable && spare.length < MAX_SPARE) {
    try {
      const to = path.join(spareDir(), `f-${randomTag()}`);
      fs.renameSync(fifo, to);
      spare.push(to);
    } catch {
      // removed below
    }
  }
  fs.rmSync(dir, { recursive: true, force: true });
}

let active = 0;
/** Number of COPY statements currently producing bytes (tests and metrics read it). */
export function activeCopies(): number {
  return active;
}

export type CopyStream = {
  /**
   * The bytes DuckDB writes, with back-pressure. Errors if the COPY fails. Its chunks are views into pooled
   * read buffers: a consumer that is done with a chunk (its write completed) may hand it back with
   * `release`, and one that keeps chunks simply never does (see the read-buffer pool below).
   */
  readonly stream: Readable;
  /** Returns a chunk of `stream` to the read-buffer pool. Only once its bytes are no longer needed. */
  release(chunk: Buffer): void;
  /** Bytes that came out of the pipe so far. */
  bytes(): number;
  /** Settles after the COPY ended and every byte was read: the COPY's row count, or the failure. */
  readonly done: Promise<{ rows: number; bytes: number }>;
  /** Stops the query (client went away, upload failed): interrupts DuckDB and removes the FIFO. */
  cancel(reason: string): void;
};

/** Thrown (through `done`) when the stream was cancelled by its consumer. */
export class CopyCancelled extends Error {
  constructor(reason: string) {
    super(`copy cancelled: ${reason}`);
  }
}

/**
 * Read buffers for the FIFOs, reused. A plain net.Socket allocates a fresh 64 KiB buffer per read; at streaming
 * rates that external memory makes V8 run frequent full mark-compacts ("external memory pressure" in
 * --trace-gc), each a pause of the one event loop. With the socket's `onread`
 * option the bytes land in buffers from this pool, and a consumer that wrote a chunk out hands its buffer
 * back once the write completed (`release`). A buffer goes out to one read at a time: `lent` says which are
 * out, so releasing twice (or releasing a chunk that is not the pool's) cannot put one buffer in two places.
 * Chunks nobody releases are ordinary garbage.
 */
const READ_BUFFER = 64 * 1024; // a pipe holds 64 KiB: one read never returns more
const MAX_FREE = 64;
const free: ArrayBuffer[] = [];
const lent = new WeakSet<ArrayBuffer>();

function lendBuffer(): Buffer {
  const ab = free.pop();
  const b = ab ? Buffer.from(ab) : Buffer.allocUnsafeSlow(READ_BUFFER);
  lent.add(b.buffer as ArrayBuffer);
  return b;
}

export function releaseChunk(chunk: Buffer): void {
  const ab = chunk.buffer as ArrayBuffer;
  if (ab.byteLength === READ_BUFFER && lent.delete(ab) && free.length < MAX_FREE) free.push(ab);
}

/** The consumer's side of a FIFO: pushes the socket's chunks, resumes the socket when asked for more. */
class FifoReadable extends Readable {
  constructor(private readonly more: () => void) {
    // A few reads' worth of slack before the socket is paused: fewer readStop/readStart toggles.
    super({ highWaterMark: 4 * READ_BUFFER });
  }

  override _read(): void {
    this.more();
  }
}

/**
 * Starts `COPY (query) TO fifo (format)` on its own connection and returns the read side.
 * `query.sql` is a SELECT from a builder; its values stay `$name` parameters.
 */
export async function startCopy(db: DuckDBInstance, query: Query, format: CopyFormat): Promise<CopyStream> {
  const { dir, fifo } = await takeFifo(format);
  let conn: DuckDBConnection | null = null;
  let socket: net.Socket | null = null;
  let count = 0;
  let discard = false;
  let out: FifoReadable | null = null;
  try {
    // O_NONBLOCK: opening the read side must not wait for the writer (that would hold a libuv thread-pool
    // thread, and a handful of concurrent downloads would dead-lock the pool). On Linux a non-blocking reader
    // that has never seen a writer gets no EOF from epoll, so the socket simply waits for DuckDB's first write.
    const fd = fs.openSync(fifo, fs.constants.O_RDONLY | fs.constants.O_NONBLOCK);
    // `onread` is accepted by the Socket constructor too (Node ≥ 12; @types/node lists it for connect() only).
    const opts: net.SocketConstructorOpts & { onread: net.OnReadOpts } = {
      fd,
      readable: true,
      writable: false,
      onread: {
        buffer: lendBuffer,
        // Returning false pauses the socket (readStop) until FifoReadable._read asks for more.
        callback: (n: number, buf: Uint8Array): boolean => {
          count += n;
          if (discard || !out || out.destroyed) return true;
          return out.push(Buffer.from(buf.buffer, buf.byteOffset, n));
        },
      },
    };
    socket = new net.Socket(opts);
    conn = await db.connect();
  } catch (err) {
    socket?.destroy();
    fs.rmSync(dir, { recursive: true, force: true });
    throw err;
  }
  const sock = socket;
  const c = conn;
  const stream = new FifoReadable(() => sock.resume());
  out = stream;
  let cancelled: string | null = null;
  let finished = false;
  let clean = false;
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
    returnFifo(dir, fifo, clean);
  };

  const copy = c.run(`COPY (${query.sql}) TO ${sqlString(fifo)} (${copyOptions(format)})`, { ...query.params });

  const ended = new Promise<void>((resolve, reject) => {
    stream.once('end', resolve);
    stream.once('error', reject);
  });
  // Nothing may go unhandled: consumers await `done` (or not, on early exits).
  ended.catch(() => {});
  sock.once('end', () => stream.push(null));
  sock.once('error', (err) => stream.destroy(err));

  const done = (async () => {
    try {
      const res = await copy;
      // DuckDB closed the FIFO: the socket sees EOF, and the stream ends once its consumer has read it all.
      await ended;
      if (cancelled) throw new CopyCancelled(cancelled);
      // The COPY returned and the read side saw EOF: no writer is left on the FIFO, it can be reused.
      clean = true;
      return { rows: Number(res.rowsChanged), bytes: count };
    } catch (err) {
      const e = cancelled ? new CopyCancelled(cancelled) : err instanceof Error ? err : new Error(String(err));
      if (!stream.destroyed) stream.destroy(e);
      throw e;
    } finally {
      cleanup();
    }
  })();
  done.catch(() => {});

  return {
    stream,
    release: releaseChunk,
    bytes: () => count,
    done,
    cancel(reason: string) {
      if (cancelled || finished) return;
      cancelled = reason;
      // Interrupt stops DuckDB at its next chunk boundary; meanwhile keep draining the pipe (into nothing) so a
      // writer blocked in write(2) wakes up and sees the interrupt instead of hanging on a full pipe, and so a
      // writer that has not opened the FIFO yet does not block forever in open(2) for want of a reader.
      c.interrupt();
      discard = true;
      sock.resume();
      stream.destroy(new CopyCancelled(reason));
    },
  };
}

/** `out` closed (client went away) before everything was written to it. */
export class OutputClosed extends Error {
  constructor() {
    super('output closed before the end of the stream');
  }
}

/** A gate refused the next chunk (the user's fair use has no room for it): the output is left unfinished. */
export class GateClosed extends Error {
  constructor() {
    super('the stream was refused more bytes');
  }
}

/**
 * Asked before each chunk is written: true at once when it may go, else a promise — true to go, false to stop
 * the stream there (GateClosed). src/accounts/streams.ts LiveStream.take is one.
 */
export type WriteGate = (bytes: number) => true | Promise<boolean>;

export type WriteCopyOptions = {
  /** Chunks already read from the copy (a preflight's), written first. */
  head: readonly Buffer[];
  /** False: the copy's stream has nothing more (the preflight read it to the end). */
  rest: boolean;
  /** Sees every chunk before it is written (byte counts, CRC, hashes). */
  onChunk?: (b: Buffer) => void;
  gate?: WriteGate;
};

/**
 * Writes `head` and then, unless `rest` is false, the remainder of `copy.stream` to `out` as the chunks arrive,
 * pausing the stream while `out` is full (the back-pressure pipe() gives) or the gate is deciding. Each chunk
 * goes back to the read-buffer pool when its write has completed. Resolves at the stream's end; rejects when
 * the stream fails (cancelled, COPY error), the gate refuses a chunk, or `out` closes first.
 */
export function writeCopyTo(copy: Pick<CopyStream, 'stream' | 'release'>, out: Writable, o: WriteCopyOptions): Promise<void> {
  const src = copy.stream;
  const { head, rest, onChunk, gate } = o;
  return new Promise<void>((resolve, reject) => {
    let settled = false;
    const finish = (err?: Error): void => {
      if (settled) return;
      settled = true;
      src.off('data', onData);
      src.off('end', onEnd);
      src.off('error', finish);
      src.off('close', onSrcClose);
      out.off('drain', onDrain);
      out.off('close', onOutClose);
      out.off('error', onOutClose);
      if (err) reject(err);
      else resolve();
    };
    const write = (chunk: Buffer): boolean => {
      onChunk?.(chunk);
      return out.write(chunk, () => copy.release(chunk));
    };
    /** Writes a chunk once the gate lets it: true to go on at once, false when waiting (a drain or the gate). */
    const put = (chunk: Buffer): boolean => {
      const g = gate?.(chunk.length) ?? true;
      if (g === true) return write(chunk);
      busy = true;
      g.then(
        (ok) => {
          busy = false;
          if (settled) return;
          if (!ok) return finish(new GateClosed());
          const room = write(chunk);
          // The source ended while the gate decided: this was its last chunk.
          if (ended) return finish();
          // Go on now, or at the drain when the output is full.
          if (room) onDrain();
        },
        (err: unknown) => finish(err instanceof Error ? err : new Error(String(err))),
      );
      return false;
    };
    const onData = (chunk: Buffer): void => {
      if (!put(chunk)) src.pause();
    };
    let waitingHead = false;
    const onDrain = (): void => {
      if (waitingHead) {
        waitingHead = false;
        next();
      } else if (!settled && !ended) src.resume();
    };
    let ended = false;
    /** A chunk is held by the gate: it is written before the end. */
    let busy = false;
    const onEnd = (): void => {
      ended = true;
      if (!busy) finish();
    };
    // Destroyed without an error or an 'end': it will never finish.
    const onSrcClose = (): void => {
      if (!ended) finish(new Error('stream closed before its end'));
    };
    const onOutClose = (): void => {
      src.pause();
      finish(new OutputClosed());
    };
    if (out.destroyed || out.writableEnded) {
      finish(new OutputClosed());
      return;
    }
    out.on('drain', onDrain);
    out.on('close', onOutClose);
    out.on('error', onOutClose);
    let i = 0;
    const next = (): void => {
      while (i < head.length) {
        if (!put(head[i++]!)) {
          waitingHead = true;
          return;
        }
      }
      // An 'end' already emitted (the preflight read everything just before EOF) will not come again.
      if (!rest || src.readableEnded) return finish();
      src.on('end', onEnd);
      src.on('error', finish);
      src.on('close', onSrcClose);
      src.on('data', onData);
      src.resume();
    };
    next();
  });
}

/** A short random name part for files and objects. */
export function randomTag(): string {
  return crypto.randomBytes(6).toString('hex');
}
