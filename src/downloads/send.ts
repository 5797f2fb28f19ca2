import type { Readable, Writable } from 'node:stream';
import type { PullRequest, UsageMeter } from '../accounts/meter.js';
import type { Principal } from '../accounts/principal.js';
import { NotFound } from '../errors.js';
import type { Query } from '../lake/duckdb.js';
import type { LakeSession } from '../lake/session.js';
import { OutputClosed, writeCopyTo, type CopyFormat } from '../lake/stream.js';

/** Bytes held back before the headers go out: a small file gets an exact Content-Length this way. */
const PREFLIGHT_BYTES = 256 * 1024;
/** Once the first byte arrived, how long to wait for more before committing to a chunked response. */
const PREFLIGHT_MS = 100;

export type Preflight = { chunks: Buffer[]; size: number; ended: boolean };

/**
 * Reads the start of a stream: until PREFLIGHT_BYTES are buffered, the stream ends, or PREFLIGHT_MS passed
 * after the first byte. A failure here still becomes a proper error answer because nothing has been sent.
 */
export function preflight(s: Readable, maxBytes = PREFLIGHT_BYTES, ms = PREFLIGHT_MS): Promise<Preflight> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let timer: NodeJS.Timeout | null = null;
    let settled = false;
    const done = (): void => {
      settled = true;
      if (timer) clearTimeout(timer);
      s.off('readable', onReadable);
      s.off('end', onEnd);
      s.off('error', onError);
    };
    const finish = (ended: boolean): void => {
      if (settled) return;
      done();
      resolve({ chunks, size, ended });
    };
    const onReadable = (): void => {
      let c: Buffer | null;
      while (!settled && (c = s.read() as Buffer | null) !== null) {
        chunks.push(c);
        size += c.length;
        if (!timer) timer = setTimeout(() => finish(false), ms);
        if (size >= maxBytes) finish(false);
      }
    };
    const onEnd = (): void => finish(true);
    const onError = (e: Error): void => {
      if (settled) return;
      done();
      reject(e);
    };
    s.on('readable', onReadable);
    s.on('end', onEnd);
    s.on('error', onError);
  });
}

/** What a file pull streams with: the lake session and the usage meter. */
export type SendDeps = { lake: LakeSession; meter: UsageMeter };

export type CopyRequest = {
  query: Query;
  format: CopyFormat;
  pull: Omit<PullRequest, 'format'>;
  /** When set, a file with no rows is not sent: NotFound with this text (the pull costs nothing). */
  emptyMessage?: string;
};

/**
 * Where the bytes go. `out` is any Writable (an HTTP response, a file); its 'close' before it finished means
 * the consumer went away. `begin` is called once, just before the first byte is written, with the file's size
 * and row count when the whole file fit in the preflight buffer (else null): the caller's moment for headers.
 */
export type CopyTarget = { out: Writable; begin(known: { size: number; rows: number } | null): void };

/**
 * `started`: `begin` was called (bytes may have gone out). `error`: the service failed after that point; the
 * output was destroyed and the pull refunded (a failure before it is thrown instead).
 */
export type SendResult = { rows: number; bytes: number; complete: boolean; started: boolean; error?: unknown };

/**
 * Streams `COPY (query) TO fifo` into `target.out` and settles the usage ticket:
 *  - complete → commit the rows and bytes sent;
 *  - the consumer went away mid-way → commit the bytes that were actually sent (rows unknown, recorded as 0):
 *    the caller received them, and the accounts rule is that recorded bytes equal bytes sent;
 *  - the service failed (DuckDB error) → refund: a 5xx costs nothing.
 */
export async function sendCopy(deps: SendDeps, principal: Principal, opts: CopyRequest, target: CopyTarget): Promise<SendResult> {
  const { out } = target;
  const ticket = await deps.meter.begin(principal, { ...opts.pull, format: opts.format });
  let copy;
  try {
    copy = await deps.lake.copy(opts.query, opts.format);
  } catch (err) {
    await ticket.refund('download failed to start');
    throw err;
  }
  const c = copy;
  let clientGone = false;
  const onClose = (): void => {
    if (!out.writableFinished) {
      clientGone = true;
      c.cancel('client disconnected');
    }
  };
  out.once('close', onClose);

  let head: Preflight;
  try {
    head = await preflight(c.stream);
  } catch (err) {
    out.off('close', onClose);
    await c.done.catch(() => {});
    // Nothing was sent yet: whether the client left or the query failed, the pull costs nothing.
    await ticket.refund(clientGone ? 'client disconnected before the first byte' : 'download failed');
    if (clientGone) return { rows: 0, bytes: 0, complete: false, started: false };
    throw err;
  }

  let rows: number | null = null;
  if (head.ended) {
    // The whole file fit in the preflight buffer: its length (and row count) are known before the headers.
    let r;
    try {
      r = await c.done;
    } catch (err) {
      out.off('close', onClose);
      await ticket.refund('download failed');
      throw err;
    }
    rows = r.rows;
    if (rows === 0 && opts.emptyMessage) {
      // Nothing in the window: a 404 the anchor's client recognises ("… in this range"), and nothing served.
      out.off('close', onClose);
      await ticket.refund('empty result');
      throw new NotFound(opts.emptyMessage);
    }
  }
  target.begin(head.ended ? { size: head.size, rows: rows ?? 0 } : null);
  let sent = 0;
  try {
    // Chunks go straight from the FIFO's pooled read buffers to the output and back to the pool
    // (writeCopyTo), paused while the output is full.
    await writeCopyTo(c, out, head.chunks, !head.ended, (b) => {
      sent += b.length;
    });
    if (!head.ended) rows = (await c.done).rows;
    await new Promise<void>((resolve, reject) => {
      out.once('close', () => (out.writableFinished ? resolve() : reject(new OutputClosed())));
      out.end(resolve);
    });
  } catch (err) {
    await c.done.catch(() => {});
    out.off('close', onClose);
    if (clientGone) {
      await ticket.commit({ bytes: sent, rows: 0 });
      return { rows: 0, bytes: sent, complete: false, started: true };
    }
    await ticket.refund('download failed mid-stream');
    out.destroy();
    return { rows: 0, bytes: sent, complete: false, started: true, error: err };
  }
  out.off('close', onClose);
  const result = { rows: rows ?? 0, bytes: sent, complete: true, started: true };
  await ticket.commit({ bytes: result.bytes, rows: result.rows });
  return result;
}
