import { S3Client, CreateBucketCommand, HeadBucketCommand } from '@aws-sdk/client-s3';
import { GetObjectCommand } from '@aws-sdk/client-s3';
import { getSignedUrl } from '@aws-sdk/s3-request-presigner';

/** Where exports go: any S3-compatible store (endpoint, bucket, credentials from PMLAKE_S3_*). */
export type S3Settings = {
  endpoint: string;
  bucket: string;
  region: string;
  accessKeyId: string;
  secretAccessKey: string;
};

/**
 * forcePathStyle: local and most self-hosted stores have no per-bucket DNS names.
 * Checksums 'WHEN_REQUIRED': the SDK's default (CRC32 on every upload, sent as aws-chunked trailers) is not
 * understood by s3rver and several other S3-compatible stores, which then store the chunk framing as data.
 */
export function makeS3Client(s: S3Settings): S3Client {
  return new S3Client({
    endpoint: s.endpoint,
    region: s.region,
    forcePathStyle: true,
    credentials: { accessKeyId: s.accessKeyId, secretAccessKey: s.secretAccessKey },
    requestChecksumCalculation: 'WHEN_REQUIRED',
    responseChecksumValidation: 'WHEN_REQUIRED',
    maxAttempts: 2,
  });
}

/** Creates the bucket when it does not exist yet (the embedded server starts empty). */
export async function ensureBucket(client: S3Client, bucket: string): Promise<void> {
  try {
    await client.send(new HeadBucketCommand({ Bucket: bucket }));
  } catch {
    await client.send(new CreateBucketCommand({ Bucket: bucket }));
  }
}

/**
 * A presigned GET: anyone holding the link may fetch the object until it expires, without an API key, as
 * often as they like (it is not single-use). `disposition` is the Content-Disposition the store answers with
 * (the caller's: src/downloads/disposition.ts, the same header pmlake sends itself).
 */
export async function presignGet(client: S3Client, bucket: string, key: string, ttlSeconds: number, disposition?: string): Promise<string> {
  const cmd = new GetObjectCommand({
    Bucket: bucket,
    Key: key,
    ...(disposition ? { ResponseContentDisposition: disposition } : {}),
  });
  return getSignedUrl(client, cmd, { expiresIn: ttlSeconds });
}
