import type { Readable, Writable } from 'node:stream';
import type { PullRequest, UsageMeter } from '../accounts/meter.js';
import type { Principal } from '../accounts/principal.js';
import { stopError, type LiveStream } from '../accounts/streams.js';
import { NotFound } from '../errors.js';
import type { Query } from '../lake/duckdb.js';
import type { LakeSession } from '../lake/session.js';
import { GateClosed, OutputClosed, writeCopyTo, type CopyFormat } from '../lake/stream.js';

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

/**
 * What of the bytes written reached the consumer (src/http/delivery.ts for a socket): told the running total
 * after each write, asked when the consumer left mid-way.
 */
export type Delivery = { wrote(total: number): void; delivered(total: number): number; close(): void };

export type CopyRequest = {
  query: Query;
  format: CopyFormat;
  pull: Omit<PullRequest, 'format'>;
  /** When set, a file with no rows is not sent: NotFound with this text (the pull costs nothing). */
  emptyMessage?: string;
  /**
   * The download among the user's streams (src/accounts/streams.ts): each chunk is taken from the user's fair
   * use before it is written — none left before the first byte: 429 fair_use_cap; later: the file is cut
   * (the output destroyed, so the client sees an incomplete transfer) — and a revocation stops it likewise.
   */
  live?: LiveStream;
};

/**
 * Where the bytes go. `out` is any Writable (an HTTP response, a file); its 'close' before it finished means
 * the consumer went away. `begin` is called once, just before the first byte is written, with the file's size
 * and row count when the whole file fit in the preflight buffer (else null): the caller's moment for headers.
 */
export type CopyTarget = {
  out: Writable;
  begin(known: { size: number; rows: number } | null): void;
  /** Made once the first byte goes: what of the bytes reached the consumer. */
  delivery?: () => Delivery;
};

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
  const { live } = opts;
  const ticket = await deps.meter.begin(principal, { ...opts.pull, format: opts.format });
  live?.bind(ticket);
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
  // Stopped by its registry (revoked, plan changed): DuckDB is interrupted; what was sent is charged.
  const onStop = (): void => c.cancel('stream stopped');
  live?.signal.addEventListener('abort', onStop, { once: true });
  const unhook = (): void => {
    out.off('close', onClose);
    live?.signal.removeEventListener('abort', onStop);
  };

  let head: Preflight;
  try {
    head = await preflight(c.stream);
  } catch (err) {
    unhook();
    await c.done.catch(() => {});
    // Nothing was sent yet: whether the client left or the query failed, the pull costs nothing.
    await ticket.refund(clientGone ? 'client disconnected before the first byte' : live?.stopped ? 'stopped before the first byte' : 'download failed');
    if (clientGone) return { rows: 0, bytes: 0, complete: false, started: false };
    if (live?.stopped) throw stopError(live.stopped);
    throw err;
  }

  let rows: number | null = null;
  if (head.ended) {
    // The whole file fit in the preflight buffer: its length (and row count) are known before the headers.
    let r;
    try {
      r = await c.done;
    } catch (err) {
      unhook();
      await ticket.refund('download failed');
      throw err;
    }
    rows = r.rows;
    if (rows === 0 && opts.emptyMessage) {
      // Nothing in the window: a 404 the anchor's client recognises ("… in this range"), and nothing served.
      unhook();
      await ticket.refund('empty result');
      throw new NotFound(opts.emptyMessage);
    }
  }
  // The first bytes must fit the user's fair use before any header goes: else the answer is the 429 itself.
  const first = live ? live.take(head.size) : true;
  if (first !== true && !(await first)) {
    unhook();
    c.cancel('fair use reached');
    await c.done.catch(() => {});
    await ticket.refund('fair use reached before the first byte');
    throw stopError(live!.stopped ?? { code: 'fair_use_cap', message: "The plan's monthly fair-use volume is reached" });
  }
  target.begin(head.ended ? { size: head.size, rows: rows ?? 0 } : null);
  const delivery = target.delivery?.();
  let sent = 0;
  try {
    // Chunks go straight from the FIFO's pooled read buffers to the output and back to the pool
    // (writeCopyTo), paused while the output is full; the head's bytes were taken above.
    let untaken = head.size;
    const gate = live
      ? (n: number): true | Promise<boolean> => {
          if (untaken >= n) {
            untaken -= n;
            return true;
          }
          return live.take(n);
        }
      : undefined;
    await writeCopyTo(c, out, {
      head: head.chunks,
      rest: !head.ended,
      gate,
      onChunk: (b) => {
        sent += b.length;
        delivery?.wrote(sent);
      },
    });
    if (!head.ended) rows = (await c.done).rows;
    await new Promise<void>((resolve, reject) => {
      out.once('close', () => (out.writableFinished ? resolve() : reject(new OutputClosed())));
      out.end(resolve);
    });
  } catch (err) {
    const cut = err instanceof GateClosed || live?.stopped;
    // DuckDB still writing into the FIFO nobody reads any more would never finish: interrupt it first.
    if (cut) c.cancel('stream cut');
    await c.done.catch(() => {});
    unhook();
    if (clientGone || cut) {
      // Charged what was sent (what reached a client that left); a cut file ends without its last chunk.
      if (cut) out.destroy();
      const bytes = clientGone && delivery ? delivery.delivered(sent) : sent;
      delivery?.close();
      await ticket.commit({ bytes, rows: 0 });
      return { rows: 0, bytes, complete: false, started: true };
    }
    delivery?.close();
    await ticket.refund('download failed mid-stream');
    out.destroy();
    return { rows: 0, bytes: sent, complete: false, started: true, error: err };
  }
  unhook();
  delivery?.close();
  const result = { rows: rows ?? 0, bytes: sent, complete: true, started: true };
  await ticket.commit({ bytes: result.bytes, rows: result.rows });
  return result;
}
