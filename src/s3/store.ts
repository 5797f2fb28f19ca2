import {
  AbortMultipartUploadCommand,
  CompleteMultipartUploadCommand,
  CreateMultipartUploadCommand,
  DeleteObjectCommand,
  ListMultipartUploadsCommand,
  ListObjectsV2Command,
  UploadPartCommand,
  type S3Client,
} from '@aws-sdk/client-s3';
import type { Logger } from '../log.js';
import { s3ErrorOf, type ObjectStore, type StoredPart } from './object-store.js';
import { ensureBucket, makeS3Client, presignGet, type S3Settings } from './client.js';

/**
 * Exports in an S3-compatible store (PMLAKE_S3_ENDPOINT). Links are the store's own presigned GETs, so the
 * store must verify signatures — real S3, MinIO, Ceph RGW do; s3rver does not and is for tests and benches only.
 *
 * Discarding an upload is AbortMultipartUpload. Some S3-compatible stores refuse it: s3rver 3.7 answers 405
 * (MethodNotAllowed), which would leave every interrupted export's parts behind. What s3rver does
 * allow (node_modules/s3rver/lib/stores/filesystem.js): CompleteMultipartUpload concatenates the named parts
 * into the object and then removes the upload's whole directory, whichever parts were named. So the fallback
 * overwrites part 1 with an empty part (completing with a part that is missing would crash s3rver: its
 * concatenation has no error handler), completes with just that part — a zero-byte object, and every part
 * file gone — and deletes the object. Each attempt has its own key, so this never replaces a real export.
 * Gaps that remain with s3rver: it answers 501 to ListMultipartUploads, so the age sweep cannot find
 * uploads pmlake lost track of (it records each upload id on its job as soon as the store returns it, so
 * only a crash inside CreateMultipartUpload itself can lose one); and UploadPart on an upload that is
 * already gone recreates its directory with that one empty part (32 bytes of debris, only when a retried
 * discard follows a discard that worked but whose result was not recorded).
 */
export class S3ObjectStore implements ObjectStore {
  readonly kind = 's3';

  private constructor(
    private readonly client: S3Client,
    readonly bucket: string,
    private readonly log: Logger,
  ) {}

  static async open(settings: S3Settings, log: Logger): Promise<S3ObjectStore> {
    const client = makeS3Client(settings);
    await ensureBucket(client, settings.bucket);
    return new S3ObjectStore(client, settings.bucket, log);
  }

  async createUpload(key: string, contentType: string): Promise<string> {
    const r = await this.client.send(new CreateMultipartUploadCommand({ Bucket: this.bucket, Key: key, ContentType: contentType }));
    if (!r.UploadId) throw new Error('CreateMultipartUpload returned no upload id');
    return r.UploadId;
  }

  async uploadPart(key: string, uploadId: string, partNumber: number, body: Buffer): Promise<string> {
    const r = await this.client.send(
      new UploadPartCommand({ Bucket: this.bucket, Key: key, UploadId: uploadId, PartNumber: partNumber, Body: body, ContentLength: body.length }),
    );
    if (!r.ETag) throw new Error(`part ${partNumber} stored without an ETag`);
    return r.ETag;
  }

  async completeUpload(key: string, uploadId: string, parts: StoredPart[]): Promise<void> {
    await this.client.send(new CompleteMultipartUploadCommand({ Bucket: this.bucket, Key: key, UploadId: uploadId, MultipartUpload: { Parts: parts } }));
  }

  async discardUpload(key: string, uploadId: string): Promise<void> {
    try {
      await this.client.send(new AbortMultipartUploadCommand({ Bucket: this.bucket, Key: key, UploadId: uploadId }));
    } catch (err) {
      const { status, name } = s3ErrorOf(err);
      if (name === 'NoSuchUpload' || status === 404) return; // already gone
      if (status !== 405 && status !== 501) throw err;
      this.log.debug({ upload_id: uploadId, status }, 'store refuses AbortMultipartUpload; discarding by complete-then-delete');
      const etag = await this.uploadPart(key, uploadId, 1, Buffer.alloc(0));
      await this.completeUpload(key, uploadId, [{ ETag: etag, PartNumber: 1 }]);
      await this.deleteObject(key);
    }
  }

  async sweepUploads(prefix: string, before: Date, keep: ReadonlySet<string>): Promise<number | null> {
    let removed = 0;
    let keyMarker: string | undefined;
    let uploadIdMarker: string | undefined;
    for (;;) {
      let page;
      try {
        page = await this.client.send(
          new ListMultipartUploadsCommand({ Bucket: this.bucket, Prefix: prefix, KeyMarker: keyMarker, UploadIdMarker: uploadIdMarker }),
        );
      } catch (err) {
        const { status } = s3ErrorOf(err);
        if (status === 501 || status === 405) return null; // s3rver: cannot list uploads
        throw err;
      }
      for (const u of page.Uploads ?? []) {
        if (!u.Key || !u.UploadId || keep.has(u.UploadId)) continue;
        if (!u.Initiated || u.Initiated.getTime() >= before.getTime()) continue;
        await this.discardUpload(u.Key, u.UploadId);
        removed += 1;
      }
      if (!page.IsTruncated) return removed;
      keyMarker = page.NextKeyMarker;
      uploadIdMarker = page.NextUploadIdMarker;
    }
  }

  async deleteObject(key: string): Promise<void> {
    await this.client.send(new DeleteObjectCommand({ Bucket: this.bucket, Key: key }));
  }

  async deleteUnder(prefix: string): Promise<void> {
    let token: string | undefined;
    do {
      const page = await this.client.send(new ListObjectsV2Command({ Bucket: this.bucket, Prefix: prefix, ContinuationToken: token }));
      for (const o of page.Contents ?? []) if (o.Key) await this.deleteObject(o.Key);
      token = page.IsTruncated ? page.NextContinuationToken : undefined;
    } while (token);
    // Every unfinished upload, whenever it began (the latest date there is).
    await this.sweepUploads(prefix, new Date(8.64e15), new Set());
  }

  /** A presigned GET whose answer carries `disposition` as its Content-Disposition. */
  presign(key: string, ttlSeconds: number, disposition: string): Promise<string> {
    return presignGet(this.client, this.bucket, key, ttlSeconds, disposition);
  }

  async close(): Promise<void> {
    this.client.destroy();
  }
}
