import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { GetObjectCommand, HeadObjectCommand, type S3Client } from '@aws-sdk/client-s3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MultipartUpload } from '../src/exports/multipart.js';
import { ensureBucket, makeS3Client } from '../src/s3/client.js';
import { startLocalS3, type LocalS3 } from '../src/s3/local.js';

/**
 * MultipartUpload against a real S3-compatible server (s3rver on loopback): the stored object is byte for
 * byte what the stream produced (checked by SHA-256 computed here over the same chunks), whatever the chunk
 * sizes and however they straddle part boundaries; every chunk goes back to its owner; a failing stream
 * leaves no object.
 */
const MiB = 1024 * 1024;
const BUCKET = 'mp-test';

/** A stream of `sizes`-byte random chunks, recording which chunks were released, and their SHA-256. */
function source(sizes: number[], failAfter?: number): { copy: { stream: Readable; release(b: Buffer): void }; sha256: string; total: number; released: Buffer[]; chunks: Buffer[] } {
  const chunks = sizes.map((n) => crypto.randomBytes(n));
  const hash = crypto.createHash('sha256');
  for (const c of chunks) hash.update(c);
  const released: Buffer[] = [];
  let i = 0;
  const stream = new Readable({
    highWaterMark: 64 * 1024,
    read() {
      if (failAfter !== undefined && i === failAfter) {
        this.destroy(new Error('COPY failed'));
        return;
      }
      this.push(i < chunks.length ? chunks[i++]! : null);
    },
  });
  return {
    copy: { stream, release: (b) => void released.push(b) },
    sha256: hash.digest('hex'),
    total: sizes.reduce((a, b) => a + b, 0),
    released,
    chunks,
  };
}

async function objectSha(client: S3Client, key: string): Promise<{ sha256: string; bytes: number }> {
  const r = await client.send(new GetObjectCommand({ Bucket: BUCKET, Key: key }));
  const body = Buffer.from(await r.Body!.transformToByteArray());
  return { sha256: crypto.createHash('sha256').update(body).digest('hex'), bytes: body.length };
}

describe('MultipartUpload', () => {
  let s3: LocalS3;
  let client: S3Client;
  let dir: string;
  beforeAll(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pmlake-mp-'));
    s3 = await startLocalS3({ directory: dir, buckets: [BUCKET] });
    client = makeS3Client({ endpoint: s3.endpoint, bucket: BUCKET, region: 'us-east-1', accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' });
    await ensureBucket(client, BUCKET);
  });
  afterAll(async () => {
    client.destroy();
    await s3.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('stores exactly the streamed bytes over several parts (chunks straddling part boundaries), releasing every chunk once', async () => {
    // Odd sizes so chunks cross the 5 MiB part boundaries at varying offsets; ~17 MiB = 4 parts, the last short.
    const sizes: number[] = [];
    for (let n = 0, k = 0; n < 17 * MiB; k++) {
      const s = 1 + ((k * 7919) % (64 * 1024));
      sizes.push(s);
      n += s;
    }
    const src = source(sizes);
    const seen: number[] = [];
    const up = new MultipartUpload(client, { Bucket: BUCKET, Key: 'a/multi.bin', ContentType: 'application/octet-stream' }, 5 * MiB, 2);
    await up.run(src.copy, (b) => seen.push(b.length));
    expect(up.uploadId).toBeTruthy();
    expect(seen).toEqual(sizes);
    // Each chunk handed back exactly once (a second release would put one pooled buffer in two places).
    expect(src.released.length).toBe(src.chunks.length);
    expect(new Set(src.released).size).toBe(src.chunks.length);
    for (const c of src.chunks) expect(src.released.includes(c)).toBe(true);
    const got = await objectSha(client, 'a/multi.bin');
    expect(got.bytes).toBe(src.total);
    expect(got.sha256).toBe(src.sha256);
  });

  it('a stream of exactly whole parts, and an empty stream (a zero-byte object)', async () => {
    const whole = source(Array.from({ length: 160 }, () => 64 * 1024)); // 10 MiB = two full 5 MiB parts
    await new MultipartUpload(client, { Bucket: BUCKET, Key: 'a/whole.bin', ContentType: 'application/octet-stream' }, 5 * MiB, 1).run(whole.copy, () => {});
    expect(await objectSha(client, 'a/whole.bin')).toEqual({ sha256: whole.sha256, bytes: 10 * MiB });
    const empty = source([]);
    await new MultipartUpload(client, { Bucket: BUCKET, Key: 'a/empty.bin', ContentType: 'text/csv' }, 5 * MiB, 2).run(empty.copy, () => {});
    expect(await objectSha(client, 'a/empty.bin')).toEqual({ sha256: empty.sha256, bytes: 0 });
  });

  it('a stream that fails mid-way rejects and completes nothing: no object under the key', async () => {
    const src = source(Array.from({ length: 200 }, () => 64 * 1024), 120); // fails after 7.5 MiB: one part stored
    const up = new MultipartUpload(client, { Bucket: BUCKET, Key: 'a/failed.bin', ContentType: 'application/octet-stream' }, 5 * MiB, 2);
    await expect(up.run(src.copy, () => {})).rejects.toThrow(/COPY failed/);
    const head = await client.send(new HeadObjectCommand({ Bucket: BUCKET, Key: 'a/failed.bin' })).then(
      () => 200,
      (err: { $metadata?: { httpStatusCode?: number } }) => err.$metadata?.httpStatusCode ?? 0,
    );
    expect(head).toBe(404);
  });

  it('refuses parts below S3\'s 5 MiB minimum', () => {
    expect(() => new MultipartUpload(client, { Bucket: BUCKET, Key: 'x', ContentType: 'x' }, 1024, 2)).toThrow(/5 MiB/);
  });
});
