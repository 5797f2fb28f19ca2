import {
  AbortMultipartUploadCommand,
  CompleteMultipartUploadCommand,
  CreateMultipartUploadCommand,
  UploadPartCommand,
  type S3Client,
} from '@aws-sdk/client-s3';
import type { CopyStream } from '../lake/stream.js';

/**
 * An S3 multipart upload fed by a COPY's FIFO stream, with reused part buffers.
 *
 * It replaces @aws-sdk/lib-storage's Upload on the export path. lib-storage keeps every 64 KiB chunk it is
 * given until a part is full and then `Buffer.concat`s them into a fresh part, so the FIFO's pooled read
 * buffers can never go back to their pool and every part is a new 8 MiB allocation: profiled on a 136 MB
 * Parquet export, the server spent ~0.8 s of CPU per export in V8's garbage collector (external-memory
 * pressure), on a 2-core machine where DuckDB's COPY wants both cores. Here each chunk is copied once into a
 * part buffer and handed straight back to the FIFO pool (`copy.release`), and the part buffers themselves are
 * reused across parts and exports: a steady export allocates nothing per byte.
 *
 * Back-pressure: at most `queueSize` parts are in flight; when all part buffers are busy the stream is paused
 * (and with it, through the FIFO, DuckDB) until a part has been stored.
 * Failure: the first error (the COPY's stream, a refused part, an unreachable store) rejects `run`, pauses
 * the stream and sends AbortMultipartUpload once (best effort; the caller retries it and keeps `uploadId`
 * when the store refuses).
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

export type MultipartParams = { Bucket: string; Key: string; ContentType: string };

export class MultipartUpload {
  /** The store's id for this upload, once CreateMultipartUpload answered (kept on the job for a later abort). */
  uploadId: string | null = null;
  private aborted = false;

  constructor(
    private readonly client: S3Client,
    private readonly params: MultipartParams,
    private readonly partSize: number,
    private readonly queueSize: number,
  ) {
    if (partSize < 5 * 1024 * 1024) throw new Error('S3 parts other than the last must be at least 5 MiB');
  }

  /**
   * Uploads everything `copy.stream` yields and completes the upload. `onChunk` sees each chunk before it is
   * copied (progress counters); the chunk is released to the FIFO pool right after.
   */
  async run(copy: Pick<CopyStream, 'stream' | 'release'>, onChunk: (b: Buffer) => void): Promise<void> {
    const created = await this.client.send(new CreateMultipartUploadCommand({ ...this.params }));
    if (!created.UploadId) throw new Error('CreateMultipartUpload returned no upload id');
    this.uploadId = created.UploadId;
    if (this.aborted) throw new Error('upload aborted');
    try {
      const parts = await this.feed(copy, onChunk);
      await this.client.send(
        new CompleteMultipartUploadCommand({
          Bucket: this.params.Bucket,
          Key: this.params.Key,
          UploadId: this.uploadId,
          MultipartUpload: { Parts: parts },
        }),
      );
    } catch (err) {
      await this.abort();
      throw err;
    }
  }

  /** Stops the upload: no further part is sent, and the store is asked once to drop the parts it has. */
  async abort(): Promise<void> {
    if (this.aborted) return;
    this.aborted = true;
    if (!this.uploadId) return;
    await this.client
      .send(new AbortMultipartUploadCommand({ Bucket: this.params.Bucket, Key: this.params.Key, UploadId: this.uploadId }))
      .catch(() => undefined);
  }

  /** Reads the stream into parts; resolves with every stored part once the stream ended and all parts are in. */
  private feed(copy: Pick<CopyStream, 'stream' | 'release'>, onChunk: (b: Buffer) => void): Promise<{ ETag: string; PartNumber: number }[]> {
    const src = copy.stream;
    const done: { ETag: string; PartNumber: number }[] = [];
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
        const partNumber = nextPart++;
        inFlight += 1;
        this.client
          .send(
            new UploadPartCommand({
              Bucket: this.params.Bucket,
              Key: this.params.Key,
              UploadId: this.uploadId!,
              PartNumber: partNumber,
              Body: buf.subarray(0, len),
              ContentLength: len,
            }),
          )
          .then(
            (r) => {
              inFlight -= 1;
              if (failed) return;
              if (!r.ETag) return fail(new Error(`part ${partNumber} stored without an ETag`));
              done.push({ ETag: r.ETag, PartNumber: partNumber });
              // The request is over: its body buffer is free for the next part.
              giveBuffer(buf);
              free += 1;
              if (this.aborted) return fail(new Error('upload aborted'));
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
      src.once('error', fail);
      src.once('close', () => {
        if (!ended) fail(new Error('stream closed before its end'));
      });
      src.resume();
    });
  }
}
