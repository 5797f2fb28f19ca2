import fs from 'node:fs';
import path from 'node:path';
import zlib from 'node:zlib';
import type { SourceHandler } from './types.js';

/**
 * Documentation that sits next to data (fixture folders carry SOURCES.md, generator output a manifest.json and,
 * with faults, faults.json — the list of what it broke, not venue data):
 * skipped when walking a directory; named explicitly, such a file is still tried.
 */
const DOCS = /\.(md|txt|rst|pdf|html)$|^(LICENSE|COPYING|NOTICE)|^(manifest|faults)\.json$/i;

/** Every regular file under the given paths (directories walked recursively, sorted for a stable order). */
export function expandInputs(paths: string[]): { files: string[]; missing: string[] } {
  const files: string[] = [];
  const missing: string[] = [];
  const walk = (p: string): void => {
    const st = fs.statSync(p, { throwIfNoEntry: false });
    if (!st) {
      missing.push(p);
      return;
    }
    if (st.isDirectory()) {
      for (const name of fs.readdirSync(p).sort()) {
        if (name.startsWith('.') || DOCS.test(name)) continue;
        walk(path.join(p, name));
      }
    } else if (st.isFile()) files.push(path.resolve(p));
  };
  for (const p of paths) walk(p);
  return { files: [...new Set(files)], missing };
}

export function isGzip(file: string): boolean {
  const fd = fs.openSync(file, 'r');
  try {
    const b = Buffer.alloc(2);
    const n = fs.readSync(fd, b, 0, 2, 0);
    return n === 2 && b[0] === 0x1f && b[1] === 0x8b;
  } finally {
    fs.closeSync(fd);
  }
}

/** The first `bytes` bytes of a file as text, gunzipped when it is gzip. */
export async function readHead(file: string, bytes = 65536): Promise<string> {
  if (!isGzip(file)) {
    const fd = fs.openSync(file, 'r');
    try {
      const b = Buffer.alloc(bytes);
      const n = fs.readSync(fd, b, 0, bytes, 0);
      return b.subarray(0, n).toString('utf8');
    } finally {
      fs.closeSync(fd);
    }
  }
  const chunks: Buffer[] = [];
  let total = 0;
  const stream = fs.createReadStream(file).pipe(zlib.createGunzip());
  try {
    for await (const c of stream) {
      chunks.push(c as Buffer);
      total += (c as Buffer).length;
      if (total >= bytes) break;
    }
  } catch {
    // A truncated gzip still yields its first bytes for detection; staging reports the error.
  } finally {
    stream.destroy();
  }
  return Buffer.concat(chunks).subarray(0, bytes).toString('utf8');
}

/** Streams a gzip file to `out` (handlers then read plain files; DuckDB and JS alike). */
export async function gunzipTo(file: string, out: string): Promise<void> {
  await new Promise<void>((resolve, reject) => {
    const src = fs.createReadStream(file);
    const dst = fs.createWriteStream(out);
    src.on('error', reject);
    dst.on('error', reject);
    dst.on('finish', () => resolve());
    src.pipe(zlib.createGunzip()).on('error', reject).pipe(dst);
  });
}

/** The first line of the service's own formats is a short header; a longer first line is not one of them. */
export const MAX_HEADER_LINE = 16 * 1024;

/**
 * The first line of `head` (after any leading blank lines, as the detectors always allowed) as a JSON object, or
 * null: no line end within MAX_HEADER_LINE characters (unless the head is that short), not JSON, or not an object.
 * The service's own formats (capture, catalogue poll and chain files) name themselves in that line; read as JSON
 * rather than matched as text, it is recognised however its writer spaced it, as staging, which parses it, takes
 * it. Cheap whatever the file: one bounded parse of one line.
 */
export function headerLine(head: string): Record<string, unknown> | null {
  const text = head.trimStart();
  const end = text.indexOf('\n');
  const line = end === -1 ? text : text.slice(0, end);
  if (line.length > MAX_HEADER_LINE || line[0] !== '{') return null;
  try {
    const v: unknown = JSON.parse(line);
    return v !== null && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : null;
  } catch {
    return null;
  }
}

/** The first handler (in the given priority order) that recognises the file. */
export function pickHandler(handlers: readonly SourceHandler[], file: string, head: string): SourceHandler | undefined {
  return handlers.find((h) => {
    try {
      return h.detect(file, head);
    } catch {
      return false;
    }
  });
}
