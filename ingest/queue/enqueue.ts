import fs from 'node:fs';
import path from 'node:path';
import type { Db } from '../../src/state/db.js';
import { expandInputs, pickHandler, readHead } from '../detect.js';
import { FileHasher, lakeIdentity, readLedger } from '../ledger.js';
import { defaultHandlers, KIND_ORDER } from '../run.js';
import type { IngestIssue, SourceHandler } from '../types.js';
import { enqueueItems, queuedHashes, type NewItem } from './store.js';

/**
 * `pmlake ingest --queue`: puts inputs in the lake's queue (./store.ts) for `--worker` processes. Each file is one
 * item (an archive hour or a generated day is one file; a directory stands for its files), in the order a single
 * `pmlake ingest` of the same inputs stages them: by kind (catalogue before fills before tape), then as listed.
 * That order is the order the workers publish in (./worker.ts). Files are hashed here: an input whose content is
 * already queued (any status) or in the lake's ledger is not queued again. Paths are stored absolute, so every
 * worker must see the inputs at the same path (a shared file system).
 */

export type EnqueueReport = {
  files: number;
  queued: number;
  already_queued: number;
  already_landed: number;
  not_recognised: number;
  issues: IngestIssue[];
};

export async function enqueueInputs(db: Db, paths: string[], opts: { lakeDir: string; handlers?: readonly SourceHandler[] }): Promise<EnqueueReport> {
  const lakeDir = path.resolve(opts.lakeDir);
  fs.mkdirSync(lakeDir, { recursive: true });
  const lake = lakeIdentity(lakeDir);
  const { files, missing } = expandInputs(paths);
  const report: EnqueueReport = { files: files.length, queued: 0, already_queued: 0, already_landed: 0, not_recognised: 0, issues: [] };
  for (const m of missing) report.issues.push({ file: m, message: 'no such file or directory' });
  const found: { file: string; handler: SourceHandler; bytes: number }[] = [];
  for (const file of files) {
    const handler = pickHandler(opts.handlers ?? defaultHandlers, file, await readHead(file));
    if (!handler) {
      report.not_recognised += 1;
      report.issues.push({ file, message: 'format not recognised; not queued' });
      continue;
    }
    found.push({ file: path.resolve(file), handler, bytes: fs.statSync(file).size });
  }
  // Stable: within a kind, the order expandInputs gave (names sorted within a directory).
  found.sort((a, b) => KIND_ORDER[a.handler.kind] - KIND_ORDER[b.handler.kind]);
  const hasher = new FileHasher();
  const items: NewItem[] = [];
  try {
    const ledger = readLedger(lakeDir);
    const queued = await queuedHashes(db, lake);
    const hashes = found.map((f) => hasher.hash(f.file));
    for (let i = 0; i < found.length; i += 1) {
      const sha256 = await hashes[i]!;
      const f = found[i]!;
      if (ledger.has(sha256)) report.already_landed += 1;
      else if (queued.has(sha256)) report.already_queued += 1;
      else {
        queued.add(sha256);
        items.push({ sha256, path: f.file, bytes: f.bytes, handler: f.handler.name });
      }
    }
  } finally {
    await hasher.close();
  }
  report.queued = await enqueueItems(db, lake, items);
  // Another `--queue` of the same content between our read and our insert: its row stands.
  report.already_queued += items.length - report.queued;
  return report;
}
