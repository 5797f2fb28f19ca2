import fs from 'node:fs';
import S3rver from 's3rver';

/**
 * The embedded S3-compatible store for `make demo` and the tests: s3rver (pure JavaScript, from npm) on
 * loopback, objects under a directory of PMLAKE_STATE. It is a real HTTP S3 endpoint — multipart uploads,
 * presigned GET with expiry, Range — with known gaps (stack-notes.md): it does not verify SigV4 signatures,
 * answers 405 to AbortMultipartUpload, and listing with truncation needs --openssl-legacy-provider.
 * Production sets PMLAKE_S3_ENDPOINT to a real store instead.
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
