import fs from 'node:fs';
import S3rver from 's3rver';

/**
 * An S3-compatible server for the tests, the bench and `scripts/s3-local.ts`: s3rver (pure JavaScript, from
 * npm) on loopback, objects under a directory. It is a real HTTP S3 endpoint — multipart uploads, presigned
 * GET with expiry, Range — with known gaps (stack-notes.md): it does not verify SigV4 signatures (anyone who
 * can reach its port reads, lists and rewrites everything), answers 405 to AbortMultipartUpload (see
 * src/s3/store.ts for how parts are discarded anyway) and 501 to ListMultipartUploads. It is no longer the
 * service's default store (src/exports/local-store.ts is); never point PMLAKE_S3_ENDPOINT at it in production.
 */
export type LocalS3 = { endpoint: string; port: number; directory: string; close(): Promise<void> };

export async function startLocalS3(opts: { directory: string; port?: number; buckets?: string[] }): Promise<LocalS3> {
  fs.mkdirSync(opts.directory, { recursive: true });
  const server = new S3rver({
    address: '127.0.0.1',
    port: opts.port ?? 0,
    directory: opts.directory,
    silent: true,
    configureBuckets: (opts.buckets ?? []).map((name) => ({ name })),
  });
  const addr = await server.run();
  let closed = false;
  return {
    endpoint: `http://127.0.0.1:${addr.port}`,
    port: addr.port,
    directory: opts.directory,
    async close() {
      if (closed) return;
      closed = true;
      // Drop keep-alive sockets too, or close() waits for idle clients.
      server.httpServer?.closeAllConnections?.();
      await server.close();
    },
  };
}
