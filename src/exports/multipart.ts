import type { CopyStream } from '../lake/stream.js';
import type { ObjectStore, StoredPart } from './store.js';

/**
 * A multipart upload into an ObjectStore (./store.ts: local files or S3) fed by a COPY's FIFO stream, with
 * reused part buffers.
 *
 * Not @aws-sdk/lib-storage's Upload: it keeps every 64 KiB chunk it is given until a part is full and then
 * `Buffer.concat`s them into a fresh part, so the FIFO's pooled read buffers can never go back to their pool and
 * every part is a new allocation — garbage-collector time (external-memory pressure) taken from the cores
 * DuckDB's COPY needs. Here each chunk is copied once into a
 * part buffer and handed straight back to the FIFO pool (`copy.release`), and the part buffers themselves are
 * reused across parts and exports: a steady export allocates nothing per byte.
 *
 * Back-pressure: at most `queueSize` parts are in flight; when all part buffers are busy the stream is paused
 * (and with it, through the FIFO, DuckDB) until a part has been stored.
 * Failure: the first error (the COPY's stream, a refused part, an unreachable store) rejects `run` after
 * `abort()`: no further part is sent, the parts in flight are waited for (a part landing after the discard
 * would be left behind), and the store discards the upload. `abort()` resolves true when the parts are gone,
 * false when the store could not be reached (the caller keeps `uploadId` to retry).
 */

/** Part buffers kept for the next parts and exports (each is `partSize` bytes). */
const MAX_POOLED = 8;
const pool = new Map<number, Buffer[]>();

function takeBuffer(size: number): Buffer {
  return pool.get(size)?.pop() ?? Buffer.allocUnsafeSlow(size);
}

function giveBuffer(b: Buffer): void {
  const list = pool.get(b.length) ?? [];
  if (list.length < MAX_POOLED) list.push(b);
  pool.set(b.length, list);
}

/**
 * The upload stopped because of its input — the COPY's stream failed or ended early, or abort() was called —
 * not because of the store: the caller must not blame object storage for it.
 */
export class FeedStopped extends Error {
  constructor(message: string, cause?: unknown) {
    super(message, { cause });
    this.name = 'FeedStopped';
  }
}

export type MultipartParams = { key: string; contentType: string };

/** How long a discard waits for parts still in flight (a wedged store must not keep a failed job running). */
const IN_FLIGHT_WAIT_MS = 10_000;

export class MultipartUpload {
  /** The store's id for this upload, once createUpload answered (kept on the job for a later discard). */
  uploadId: string | null = null;
  private stopped = false;
  private discarded: Promise<boolean> | null = null;
  /** Part requests not yet answered (a discard waits for them). */
  private readonly sending = new Set<Promise<unknown>>();

  constructor(
    private readonly store: ObjectStore,
    private readonly params: MultipartParams,
    private readonly partSize: number,
    private readonly queueSize: number,
  ) {
    if (partSize < 5 * 1024 * 1024) throw new Error('S3 parts other than the last must be at least 5 MiB');
  }

  /**
   * Uploads everything `copy.stream` yields and completes the upload. `onCreated` hears the upload id as soon
   * as the store gave it (the job records it, so even a crash leaves a discardable id behind); `onChunk` sees
   * each chunk before it is copied (progress counters); the chunk is released to the FIFO pool right after.
   */
  async run(
    copy: Pick<CopyStream, 'stream' | 'release'>,
    onChunk: (b: Buffer) => void,
    onCreated: (uploadId: string) => void | Promise<void> = () => {},
  ): Promise<void> {
    this.uploadId = await this.store.createUpload(this.params.key, this.params.contentType);
    try {
      // Recorded before the first part is sent; if it cannot be recorded, the upload is discarded right away.
      await onCreated(this.uploadId);
      if (this.stopped) throw new FeedStopped('upload aborted');
      const parts = await this.feed(copy, onChunk);
      await this.store.completeUpload(this.params.key, this.uploadId, parts);
    } catch (err) {
      await this.abort();
      throw err;
    }
  }

  /**
   * Stops the upload and discards its parts (once; later calls return the same answer). Resolves true when
   * nothing is left in the store, false when the store refused or could not be reached.
   */
  abort(): Promise<boolean> {
    this.stopped = true;
    // Not created yet: nothing to discard now, and run() discards the upload as soon as the store creates it.
    const uploadId = this.uploadId;
    if (!uploadId) return Promise.resolve(true);
    this.discarded ??= (async () => {
      await settleWithin(Promise.allSettled([...this.sending]), IN_FLIGHT_WAIT_MS);
      return this.store.discardUpload(this.params.key, uploadId).then(
        () => true,
        () => false,
      );
    })();
    return this.discarded;
  }

  /** Reads the stream into parts; resolves with every stored part once the stream ended and all parts are in. */
  private feed(copy: Pick<CopyStream, 'stream' | 'release'>, onChunk: (b: Buffer) => void): Promise<StoredPart[]> {
    const src = copy.stream;
    const done: StoredPart[] = [];
    return new Promise((resolve, reject) => {
      let cur: Buffer | null = null;
      let used = 0;
      let nextPart = 1;
      let inFlight = 0;
      let free = this.queueSize + 1;
      let ended = false;
      let failed = false;
      /** A chunk whose tail did not fit before the part buffers ran out: copied on when one frees up. */
      let pending: { chunk: Buffer; off: number } | null = null;

      const fail = (err: unknown): void => {
        if (failed) return;
        failed = true;
        src.pause();
        src.off('data', onData);
        reject(err instanceof Error ? err : new Error(String(err)));
      };
      const send = (buf: Buffer, len: number): void => {
        // Stopped by abort(): a part sent now could land after the discard and be left behind.
        if (this.stopped) return fail(new FeedStopped('upload aborted'));
        const partNumber = nextPart++;
        inFlight += 1;
        const req = this.store.uploadPart(this.params.key, this.uploadId!, partNumber, buf.subarray(0, len));
        this.sending.add(req);
        void req.finally(() => this.sending.delete(req)).catch(() => {});
        req.then(
          (etag) => {
            inFlight -= 1;
            if (failed) return;
            done.push({ ETag: etag, PartNumber: partNumber });
            // The request is over: its body buffer is free for the next part.
            giveBuffer(buf);
            free += 1;
            if (this.stopped) return fail(new FeedStopped('upload aborted'));
            if (pending) drainPending();
            maybeFinish();
          },
          (err: unknown) => {
            inFlight -= 1;
            fail(err);
          },
        );
      };
      /** Copies `chunk[off..]` into parts; returns where it stopped (chunk.length when all of it fit). */
      const copyIn = (chunk: Buffer, off: number): number => {
        while (off < chunk.length) {
          if (!cur) {
            if (free === 0) return off;
            free -= 1;
            cur = takeBuffer(this.partSize);
            used = 0;
          }
          const n = Math.min(chunk.length - off, this.partSize - used);
          chunk.copy(cur, used, off, off + n);
          used += n;
          off += n;
          if (used === this.partSize) {
            const full = cur;
            cur = null;
            send(full, this.partSize);
          }
        }
        return off;
      };
      const drainPending = (): void => {
        const p = pending!;
        const off = copyIn(p.chunk, p.off);
        if (off < p.chunk.length) {
          p.off = off;
          return;
        }
        pending = null;
        copy.release(p.chunk);
        if (!ended) src.resume();
      };
      const maybeFinish = (): void => {
        if (!ended || pending || failed) return;
        if (cur && used > 0) {
          const last = cur;
          cur = null;
          send(last, used);
          return;
        }
        if (inFlight > 0) return;
        if (nextPart === 1) {
          // Nothing at all came out (S3 needs one part, even an empty one).
          const empty = cur ?? takeBuffer(this.partSize);
          cur = null;
          send(empty, 0);
          return;
        }
        if (cur) {
          giveBuffer(cur);
          cur = null;
        }
        done.sort((a, b) => a.PartNumber - b.PartNumber);
        resolve(done);
      };
      const onData = (chunk: Buffer): void => {
        if (failed) return;
        onChunk(chunk);
        const off = copyIn(chunk, 0);
        if (off < chunk.length) {
          pending = { chunk, off };
          src.pause();
          return;
        }
        copy.release(chunk);
      };
      src.on('data', onData);
      src.once('end', () => {
        ended = true;
        maybeFinish();
      });
      src.once('error', (err: Error) => fail(new FeedStopped(err.message, err)));
      src.once('close', () => {
        if (!ended) fail(new FeedStopped('stream closed before its end'));
      });
      src.resume();
    });
  }
}

/** Waits for `p` to settle (either way), at most `ms`. */
export function settleWithin(p: Promise<unknown>, ms: number): Promise<void> {
  return new Promise<void>((resolve) => {
    const t = setTimeout(resolve, ms);
    const done = (): void => {
      clearTimeout(t);
      resolve();
    };
    p.then(done, done);
  });
}
