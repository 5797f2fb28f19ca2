import path from 'node:path';
import { startLocalS3 } from '../src/s3/local.js';

/** Runs the embedded S3-compatible server on its own: `npx tsx scripts/s3-local.ts [dir] [port]`. */
const dir = path.resolve(process.argv[2] ?? path.join(process.env.PMLAKE_STATE ?? './state', 's3'));
const port = Number(process.argv[3] ?? 0);
const s3 = await startLocalS3({ directory: dir, port, buckets: [process.env.PMLAKE_S3_BUCKET ?? 'pmlake-exports'] });
process.stdout.write(`PMLAKE_S3_ENDPOINT=${s3.endpoint}\n`);
const stop = (): void => {
  void s3.close().then(() => process.exit(0));
};
process.once('SIGINT', stop);
process.once('SIGTERM', stop);
