import crypto from 'node:crypto';
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import path from 'node:path';
import type { ObjectStore, StoredPart } from './store.js';

/**
 * The default export store: plain files under PMLAKE_STATE/exports, in this process. Nothing listens: the only
 * way to the bytes is pmlake's own signed, expiring link (./links.ts, GET /v1/exports/{id}/file), so a store
 * that verifies no signature (s3rver: tests and benches only) is never the default. Discarding an upload is
 * removing its directory, so an interrupted export never leaves its parts behind.
 *
 *   uploads/<uploadId>/upload.json   key and content type
 *   uploads/<uploadId>/<n>           part n (written as <n>.tmp, then renamed: a torn write never looks stored)
 *   objects/<key>                    finished objects (written as uploads/<id>/object.tmp, fsynced, renamed)
 */
const KEY = /^[A-Za-z0-9_-][A-Za-z0-9._/-]{0,511}$/;
const UPLOAD_ID = /^[0-9a-f]{32}$/;

export type LocalObject = { size: number; mtime: Date; etag: string; file: fsp.FileHandle };

export class LocalObjectStore implements ObjectStore {
  readonly kind = 'local';
  private readonly uploads: string;
  private readonly objects: string;

  constructor(readonly root: string) {
    this.uploads = path.join(root, 'uploads');
    this.objects = path.join(root, 'objects');
    fs.mkdirSync(this.uploads, { recursive: true, mode: 0o700 });
    fs.mkdirSync(this.objects, { recursive: true, mode: 0o700 });
  }

  async createUpload(key: string, contentType: string): Promise<string> {
    this.objectPath(key);
    const id = crypto.randomBytes(16).toString('hex');
    await fsp.mkdir(path.join(this.uploads, id), { mode: 0o700 });
    await fsp.writeFile(path.join(this.uploads, id, 'upload.json'), JSON.stringify({ key, contentType, created: new Date().toISOString() }));
    return id;
  }

  async uploadPart(key: string, uploadId: string, partNumber: number, body: Buffer): Promise<string> {
    const dir = await this.uploadDir(key, uploadId);
    if (!Number.isInteger(partNumber) || partNumber < 1 || partNumber > 10_000) throw new Error(`bad part number ${partNumber}`);
    const file = path.join(dir, String(partNumber));
    // No mkdir here: a part arriving after a discard must fail, not resurrect the upload's directory.
    await fsp.writeFile(`${file}.tmp`, body);
    await fsp.rename(`${file}.tmp`, file);
    return `"${partNumber}-${body.length}"`;
  }

  async completeUpload(key: string, uploadId: string, parts: StoredPart[]): Promise<void> {
    const dir = await this.uploadDir(key, uploadId);
    const target = this.objectPath(key);
    const tmp = path.join(dir, 'object.tmp');
    const ordered = [...parts].sort((a, b) => a.PartNumber - b.PartNumber);
    for (const p of ordered) {
      const size = (await fsp.stat(path.join(dir, String(p.PartNumber)))).size;
      if (p.ETag !== `"${p.PartNumber}-${size}"`) throw new Error(`part ${p.PartNumber} does not match its ETag`);
    }
    // The first part becomes the object file (a one-part export is a rename, no copy); the rest are appended.
    if (ordered.length === 0) await fsp.writeFile(tmp, '');
    else await fsp.rename(path.join(dir, String(ordered[0]!.PartNumber)), tmp);
    const out = await fsp.open(tmp, 'a');
    try {
      const buf = Buffer.allocUnsafe(1 << 20);
      for (const p of ordered.slice(1)) {
        const src = await fsp.open(path.join(dir, String(p.PartNumber)), 'r');
        try {
          for (;;) {
            const { bytesRead } = await src.read(buf, 0, buf.length, null);
            if (bytesRead === 0) break;
            await out.write(buf, 0, bytesRead);
          }
        } finally {
          await src.close();
        }
      }
      await out.sync();
    } finally {
      await out.close();
    }
    await fsp.mkdir(path.dirname(target), { recursive: true, mode: 0o700 });
    await fsp.rename(tmp, target);
    await fsp.rm(dir, { recursive: true, force: true, maxRetries: 3 });
  }

  async discardUpload(key: string, uploadId: string): Promise<void> {
    if (!UPLOAD_ID.test(uploadId)) throw new Error('not an upload id of this store');
    void key;
    await fsp.rm(path.join(this.uploads, uploadId), { recursive: true, force: true, maxRetries: 3 });
  }

  /** Upload directories untouched (no part added) since `before`; the directory's mtime moves with each part. */
  async sweepUploads(prefix: string, before: Date, keep: ReadonlySet<string>): Promise<number> {
    let removed = 0;
    for (const id of await fsp.readdir(this.uploads)) {
      if (keep.has(id)) continue;
      const dir = path.join(this.uploads, id);
      const stat = await fsp.stat(dir).catch(() => null);
      if (!stat || stat.mtimeMs >= before.getTime()) continue;
      const meta = await fsp.readFile(path.join(dir, 'upload.json'), 'utf8').then(
        (s) => JSON.parse(s) as { key?: string },
        () => null,
      );
      // An upload without readable metadata is debris of a crash inside createUpload: old enough, it goes too.
      if (meta?.key !== undefined && !meta.key.startsWith(prefix)) continue;
      await fsp.rm(dir, { recursive: true, force: true, maxRetries: 3 });
      removed += 1;
    }
    return removed;
  }

  async deleteObject(key: string): Promise<void> {
    const file = this.objectPath(key);
    await fsp.rm(file, { force: true });
    // Drop the now empty per-job directories (rmdir refuses a non-empty one, which ends the walk).
    for (let dir = path.dirname(file); dir.startsWith(this.objects + path.sep); dir = path.dirname(dir)) {
      if (
        !(await fsp.rmdir(dir).then(
          () => true,
          () => false,
        ))
      )
        break;
    }
  }

  async deleteUnder(prefix: string): Promise<void> {
    if (!prefix.endsWith('/')) throw new Error('a prefix names a directory');
    await fsp.rm(this.objectPath(prefix.slice(0, -1)), { recursive: true, force: true, maxRetries: 3 });
    // Uploads are by id: each one's upload.json names its key.
    for (const id of await fsp.readdir(this.uploads)) {
      const key = await fsp.readFile(path.join(this.uploads, id, 'upload.json'), 'utf8').then(
        (s) => (JSON.parse(s) as { key?: string }).key,
        () => undefined,
      );
      if (key?.startsWith(prefix)) await fsp.rm(path.join(this.uploads, id), { recursive: true, force: true, maxRetries: 3 });
    }
  }

  /** Opens a finished object for reading, or null when there is none. The caller closes `file`. */
  async open(key: string): Promise<LocalObject | null> {
    const file = await fsp.open(this.objectPath(key), 'r').catch((err: NodeJS.ErrnoException) => {
      if (err.code === 'ENOENT') return null;
      throw err;
    });
    if (!file) return null;
    const st = await file.stat();
    // Objects never change once renamed into place (each attempt has its own key): size and mtime identify one.
    return { size: st.size, mtime: st.mtime, etag: `"${st.size.toString(16)}-${Math.floor(st.mtimeMs).toString(16)}"`, file };
  }

  async close(): Promise<void> {}

  private objectPath(key: string): string {
    if (!KEY.test(key) || key.split('/').some((s) => s === '' || s === '.' || s === '..')) throw new Error('invalid object key');
    return path.join(this.objects, key);
  }

  private async uploadDir(key: string, uploadId: string): Promise<string> {
    if (!UPLOAD_ID.test(uploadId)) throw new Error('NoSuchUpload');
    const dir = path.join(this.uploads, uploadId);
    const meta = await fsp.readFile(path.join(dir, 'upload.json'), 'utf8').then(
      (s) => JSON.parse(s) as { key: string },
      () => null,
    );
    if (!meta || meta.key !== key) throw new Error('NoSuchUpload');
    return dir;
  }
}
