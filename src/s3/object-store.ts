/**
 * The narrow object-store interface exports need: a multipart upload (create → parts → complete, or discard),
 * deleting a finished object, and sweeping uploads nobody finished. Declared here, below src/exports/, so the S3
 * store implements it without importing the layer that uses it. Two implementations:
 *  - ../exports/local-store.ts: files under PMLAKE_STATE/exports (the default; nothing listens on a port, pmlake
 *    serves the bytes itself behind its own signed links, ../exports/links.ts);
 *  - ./store.ts: any S3-compatible store at PMLAKE_S3_ENDPOINT (links are S3 presigned GETs).
 */
export type StoredPart = { ETag: string; PartNumber: number };

export interface ObjectStore {
  readonly kind: 'local' | 's3';
  /** Starts a multipart upload for `key`; resolves with the store's upload id. */
  createUpload(key: string, contentType: string): Promise<string>;
  /** Stores one part; `body` may be reused by the caller as soon as this resolves. Resolves with its ETag. */
  uploadPart(key: string, uploadId: string, partNumber: number, body: Buffer): Promise<string>;
  /** Makes the object from the parts (in order); until then nothing is visible under `key`. */
  completeUpload(key: string, uploadId: string, parts: StoredPart[]): Promise<void>;
  /**
   * Removes an unfinished upload's parts by whatever means the store allows; resolves once they are gone
   * (or were already gone), rejects when that could not be done (store unreachable), so the caller can retry.
   */
  discardUpload(key: string, uploadId: string): Promise<void>;
  /**
   * Discards unfinished uploads under `prefix` older than `before`, except the ids in `keep` (uploads in
   * progress here). Resolves with how many were removed, or null when the store cannot list its uploads.
   */
  sweepUploads(prefix: string, before: Date, keep: ReadonlySet<string>): Promise<number | null>;
  deleteObject(key: string): Promise<void>;
  /**
   * Removes every finished object and every unfinished upload under `prefix` (a deleted account's files).
   * Resolves once they are gone; rejects when that could not be done, so the caller can retry. A store that
   * cannot list its uploads (s3rver) removes the objects only.
   */
  deleteUnder(prefix: string): Promise<void>;
  close(): Promise<void>;
}

/** Status and error name of an S3 SDK error (network errors have no status). */
export function s3ErrorOf(err: unknown): { status: number | undefined; name: string | undefined } {
  const e = err as { $metadata?: { httpStatusCode?: number }; name?: string } | null;
  return { status: e?.$metadata?.httpStatusCode, name: e?.name };
}
