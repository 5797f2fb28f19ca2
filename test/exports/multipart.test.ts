import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LocalObjectStore } from '../../src/exports/local-store.js';
import { MultipartUpload } from '../../src/exports/multipart.js';
import type { ObjectStore } from '../../src/exports/store.js';
import { createLogger } from '../../src/log.js';
import { startLocalS3, type LocalS3 } from '../../src/s3/local.js';
import { S3ObjectStore } from '../../src/s3/store.js';

/**
 * MultipartUpload against both real stores: a real S3-compatible server (s3rver on loopback, the path of a
 * configured PMLAKE_S3_ENDPOINT) and the default local store (files under a temp dir). The stored object is
 * byte for byte what the stream produced (checked by SHA-256 computed here over the same chunks), whatever the
 * chunk sizes and however they straddle part boundaries; every chunk goes back to its owner; a failing stream
 * leaves no object and no parts on disk — on s3rver too, which answers 405 to AbortMultipartUpload.
 */
const MiB = 1024 * 1024;
const BUCKET = 'mp-test';

/** A stream of `sizes`-byte random chunks, recording which chunks were released, and their SHA-256. */
function source(
  sizes: number[],
  failAfter?: number,
): { copy: { stream: Readable; release(b: Buffer): void }; sha256: string; total: number; released: Buffer[]; chunks: Buffer[] } {
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

type Target = { store: ObjectStore; dir: string; read(key: string): Promise<Buffer | null>; partsOnDisk(): string[]; close(): Promise<void> };

/** Every file under `dir` (recursively), relative: what an upload left on disk. */
function filesUnder(dir: string): string[] {
  if (!fs.existsSync(dir)) return [];
  return (fs.readdirSync(dir, { recursive: true }) as string[]).filter((f) => fs.statSync(path.join(dir, f)).isFile());
}

const targets: Record<string, () => Promise<Target>> = {
  async s3rver() {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pmlake-mp-'));
    const s3: LocalS3 = await startLocalS3({ directory: dir, buckets: [BUCKET] });
    const store = await S3ObjectStore.open(
      { endpoint: s3.endpoint, bucket: BUCKET, region: 'us-east-1', accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' },
      createLogger('silent'),
    );
    return {
      store,
      dir,
      async read(key) {
        const r = await fetch(`${s3.endpoint}/${BUCKET}/${key}`); // s3rver serves unsigned GETs (test only)
        return r.status === 200 ? Buffer.from(await r.arrayBuffer()) : null;
      },
      // s3rver's on-disk layout: <bucket>/._S3rver_uploads/<uploadId>/{key, metadata, 1, 1.md5, …}
      partsOnDisk: () => filesUnder(path.join(dir, BUCKET, '._S3rver_uploads')),
      async close() {
        await store.close();
        await s3.close();
        fs.rmSync(dir, { recursive: true, force: true });
      },
    };
  },
  async local() {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pmlake-mp-'));
    const store = new LocalObjectStore(dir);
    return {
      store,
      dir,
      async read(key) {
        const o = await store.open(key);
        if (!o) return null;
        const b = await o.file.readFile();
        await o.file.close();
        return b;
      },
      partsOnDisk: () => filesUnder(path.join(dir, 'uploads')),
      async close() {
        fs.rmSync(dir, { recursive: true, force: true });
      },
    };
  },
};

const sha = (b: Buffer) => crypto.createHash('sha256').update(b).digest('hex');

describe.each(Object.keys(targets))('MultipartUpload into %s', (name) => {
  let t: Target;
  beforeAll(async () => {
    t = await targets[name]!();
  });
  afterAll(async () => {
    await t?.close();
  });
  const upload = (key: string, partSize = 5 * MiB, queue = 2) =>
    new MultipartUpload(t.store, { key, contentType: 'application/octet-stream' }, partSize, queue);

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
    const created: string[] = [];
    const up = upload('a/multi.bin');
    await up.run(
      src.copy,
      (b) => seen.push(b.length),
      (id) => {
        created.push(id);
      },
    );
    expect(up.uploadId).toBeTruthy();
    expect(created).toEqual([up.uploadId]);
    expect(seen).toEqual(sizes);
    // Each chunk handed back exactly once (a second release would put one pooled buffer in two places).
    expect(src.released.length).toBe(src.chunks.length);
    expect(new Set(src.released).size).toBe(src.chunks.length);
    for (const c of src.chunks) expect(src.released.includes(c)).toBe(true);
    const got = (await t.read('a/multi.bin'))!;
    expect(got.length).toBe(src.total);
    expect(sha(got)).toBe(src.sha256);
    expect(t.partsOnDisk()).toEqual([]);
  });

  it('a stream of exactly whole parts, and an empty stream (a zero-byte object)', async () => {
    const whole = source(Array.from({ length: 160 }, () => 64 * 1024)); // 10 MiB = two full 5 MiB parts
    await upload('a/whole.bin', 5 * MiB, 1).run(whole.copy, () => {});
    const got = (await t.read('a/whole.bin'))!;
    expect({ sha256: sha(got), bytes: got.length }).toEqual({ sha256: whole.sha256, bytes: 10 * MiB });
    const empty = source([]);
    await upload('a/empty.bin').run(empty.copy, () => {});
    expect((await t.read('a/empty.bin'))!.length).toBe(0);
  });

  it('a stream that fails mid-way rejects, completes nothing and leaves no parts on disk', async () => {
    const src = source(
      Array.from({ length: 200 }, () => 64 * 1024),
      120,
    ); // fails after 7.5 MiB: one part stored
    const up = upload('a/failed.bin');
    const stored: number[] = [];
    const uploadPart = t.store.uploadPart.bind(t.store);
    // Watch the parts reach the store, so this test cannot pass by failing before any part was stored.
    t.store.uploadPart = async (k, id, n, body) => {
      const etag = await uploadPart(k, id, n, body);
      stored.push(n);
      return etag;
    };
    try {
      await expect(up.run(src.copy, () => {})).rejects.toThrow(/COPY failed/);
    } finally {
      t.store.uploadPart = uploadPart;
    }
    expect(stored).toContain(1);
    expect(await t.read('a/failed.bin')).toBeNull();
    // The upload's parts are gone (s3rver: 405 to AbortMultipartUpload, so discarded by complete-then-delete).
    expect(t.partsOnDisk()).toEqual([]);
    expect(await up.abort()).toBe(true);
  });

  it("refuses parts below S3's 5 MiB minimum", () => {
    expect(() => upload('x', 1024)).toThrow(/5 MiB/);
  });
});
