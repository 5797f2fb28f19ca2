import type { Request, Response } from 'express';
import type { Readable } from 'node:stream';
import type { AppContext } from '../http/context.js';
import { NotFound } from '../errors.js';
import type { PullRequest } from '../accounts/meter.js';
import type { Query } from '../lake/duckdb.js';
import { CONTENT_TYPES, OutputClosed, startCopy, writeCopyTo, type CopyFormat } from '../lake/stream.js';

/** Bytes held back before the headers go out: a small file gets an exact Content-Length this way. */
const PREFLIGHT_BYTES = 256 * 1024;
/** Once the first byte arrived, how long to wait for more before committing to a chunked response. */
const PREFLIGHT_MS = 100;

export type Preflight = { chunks: Buffer[]; size: number; ended: boolean };

/**
 * Reads the start of a stream: until PREFLIGHT_BYTES are buffered, the stream ends, or PREFLIGHT_MS passed
 * after the first byte. A failure here still becomes a proper HTTP error because no header has been sent.
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

/** RFC 6266 attachment header; file names are built from validated ids, the ASCII fallback is belt and braces. */
export function contentDisposition(fileName: string): string {
  const ascii = fileName.replace(/[^A-Za-z0-9._-]/g, '_');
  return `attachment; filename="${ascii}"; filename*=UTF-8''${encodeURIComponent(fileName)}`;
}

export type SendResult = { rows: number; bytes: number; complete: boolean };

/**
 * Streams `COPY (query) TO fifo` to the response and settles the usage ticket:
 *  - complete → commit the rows and bytes sent;
 *  - the client went away mid-way → commit the bytes that were actually sent (rows unknown, recorded as 0):
 *    the caller received them, and the accounts rule is that recorded bytes equal bytes sent;
 *  - the service failed (DuckDB error) → refund: a 5xx costs nothing.
 */
export async function sendCopy(
  req: Request,
  res: Response,
  ctx: AppContext,
  opts: { query: Query; format: CopyFormat; fileName: string; pull: Omit<PullRequest, 'format'>; emptyMessage?: string },
): Promise<SendResult> {
  const ticket = await ctx.meter.begin(req.principal!, { ...opts.pull, format: opts.format });
  let copy;
  try {
    copy = await startCopy(ctx.db, opts.query, opts.format);
  } catch (err) {
    ticket.refund('download failed to start');
    throw err;
  }
  const c = copy;
  let clientGone = false;
  const onClose = (): void => {
    if (!res.writableFinished) {
      clientGone = true;
      c.cancel('client disconnected');
    }
  };
  res.once('close', onClose);

  let head: Preflight;
  try {
    head = await preflight(c.stream);
  } catch (err) {
    res.off('close', onClose);
    await c.done.catch(() => {});
    // Nothing was sent yet: whether the client left or the query failed, the pull costs nothing.
    ticket.refund(clientGone ? 'client disconnected before the first byte' : 'download failed');
    if (clientGone) return { rows: 0, bytes: 0, complete: false };
    throw err;
  }

  let rows: number | null = null;
  if (head.ended) {
    // The whole file fit in the preflight buffer: its length (and row count) are known before the headers.
    let r;
    try {
      r = await c.done;
    } catch (err) {
      res.off('close', onClose);
      ticket.refund('download failed');
      throw err;
    }
    rows = r.rows;
    if (rows === 0 && opts.emptyMessage) {
      // Nothing in the window: a 404 the anchor's client recognises ("… in this range"), and nothing served.
      res.off('close', onClose);
      ticket.refund('empty result');
      throw new NotFound(opts.emptyMessage);
    }
    res.setHeader('Content-Length', String(head.size));
    res.setHeader('X-Record-Count', String(rows));
  }
  res.status(200);
  res.setHeader('Accept-Ranges', 'none');
  res.setHeader('Content-Type', CONTENT_TYPES[opts.format]);
  res.setHeader('Content-Disposition', contentDisposition(opts.fileName));
  res.setHeader('Cache-Control', 'no-store');
  let sent = 0;
  try {
    // Chunks go straight from the FIFO's pooled read buffers to the socket and back to the pool
    // (writeCopyTo), paused while the socket is full.
    await writeCopyTo(c, res, head.chunks, !head.ended, (b) => {
      sent += b.length;
    });
    if (!head.ended) rows = (await c.done).rows;
    await new Promise<void>((resolve, reject) => {
      res.once('close', () => (res.writableFinished ? resolve() : reject(new OutputClosed())));
      res.end(resolve);
    });
  } catch (err) {
    await c.done.catch(() => {});
    res.off('close', onClose);
    res.locals.bytes = sent;
    if (clientGone) {
      ticket.commit({ bytes: sent, rows: 0 });
      return { rows: 0, bytes: sent, complete: false };
    }
    ticket.refund('download failed mid-stream');
    req.log.error({ err }, 'download failed after headers were sent');
    res.destroy();
    return { rows: 0, bytes: sent, complete: false };
  }
  res.off('close', onClose);
  const result = { rows: rows ?? 0, bytes: sent, complete: true };
  res.locals.rows = result.rows;
  res.locals.bytes = result.bytes;
  ticket.commit({ bytes: result.bytes, rows: result.rows });
  return result;
}
