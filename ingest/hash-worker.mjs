// SHA-256 of input files on a worker thread, so hashing (the ledger's idempotency key) runs beside DuckDB's
// staging of the previous file instead of before all of it: hashing a large input set is not free.
// Plain JavaScript: the worker needs no TypeScript loader.
import crypto from 'node:crypto';
import fs from 'node:fs';
import { parentPort } from 'node:worker_threads';

parentPort.on('message', async ({ id, file }) => {
  try {
    const h = crypto.createHash('sha256');
    for await (const chunk of fs.createReadStream(file, { highWaterMark: 1 << 20 })) h.update(chunk);
    parentPort.postMessage({ id, sha256: h.digest('hex') });
  } catch (err) {
    parentPort.postMessage({ id, error: err instanceof Error ? err.message : String(err) });
  }
});
