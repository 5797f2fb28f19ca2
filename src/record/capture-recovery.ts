import fs from 'node:fs';
import path from 'node:path';
import type { Logger } from 'pino';
import { CAPTURE_SUFFIX, CLOSED_PREFIX, OPEN_PREFIX, closedFileName, periodStart } from './capture-lines.js';
import { syncDir } from '../sync-dir.js';

const CHUNK = 64 * 1024;
const NL = 0x0a;

/** The offset just past the last `\n` in the first `size` bytes (0 when there is none), read from the end. */
async function endOfLastLine(fh: fs.promises.FileHandle, size: number): Promise<number> {
  const buf = Buffer.alloc(CHUNK);
  for (let end = size; end > 0;) {
    const start = Math.max(0, end - CHUNK);
    const { bytesRead } = await fh.read(buf, 0, end - start, start);
    const i = buf.subarray(0, bytesRead).lastIndexOf(NL);
    if (i >= 0) return start + i + 1;
    end = start;
  }
  return 0;
}

/** The complete line ending at `end` (the offset just past its `\n`), without the `\n`. */
async function lineBefore(fh: fs.promises.FileHandle, end: number): Promise<string> {
  const lineStart = await endOfLastLine(fh, end - 1);
  const buf = Buffer.alloc(end - 1 - lineStart);
  await fh.read(buf, 0, buf.length, lineStart);
  return buf.toString('utf8');
}

async function firstLine(fh: fs.promises.FileHandle): Promise<string> {
  const buf = Buffer.alloc(CHUNK);
  const { bytesRead } = await fh.read(buf, 0, CHUNK, 0);
  const i = buf.subarray(0, bytesRead).indexOf(NL);
  return i < 0 ? '' : buf.subarray(0, i).toString('utf8');
}

function recvMsOf(line: string): number | null {
  try {
    const v: unknown = JSON.parse(line);
    if (v && typeof v === 'object' && 'recv_ms' in v && typeof v.recv_ms === 'number') return v.recv_ms;
  } catch {
    // a line that is not JSON has no time
  }
  return null;
}

/**
 * Puts the open files a killed recorder left in `dir` into place: each is cut at its last complete line (a line
 * half written when the process died is not data), fsynced and renamed to the closed name of the period its first
 * line was written in, then the directory is fsynced. A file holding no complete line is removed. Runs before this
 * recorder opens its own file, so every `.open-` file found belongs to a recorder that is gone.
 */
export async function recoverOpenFiles(dir: string, rotateSeconds: number, log: Logger): Promise<string[]> {
  const recovered: string[] = [];
  const names = (await fs.promises.readdir(dir)).filter((n) => n.startsWith(OPEN_PREFIX) && n.endsWith(CAPTURE_SUFFIX));
  for (const name of names) {
    const file = path.join(dir, name);
    // `.open-<recorder>-<uuid>.capture.jsonl`: the session is the fixed-length uuid at the end.
    const core = name.slice(OPEN_PREFIX.length, -CAPTURE_SUFFIX.length);
    const session = core.slice(-36);
    const recorder = core.slice(0, -37);
    const fh = await fs.promises.open(file, 'r+');
    let target: string | null = null;
    try {
      const { size, mtimeMs } = await fh.stat();
      const cut = await endOfLastLine(fh, size);
      if (cut > 0) {
        await fh.truncate(cut);
        await fh.sync();
        const started = recvMsOf(await firstLine(fh)) ?? mtimeMs;
        target = closedFileName(periodStart(started, rotateSeconds), recorder, session);
      }
      log.warn({ file: name, bytes: size, kept: cut }, 'recovering the open capture file of a recorder that did not stop');
    } finally {
      await fh.close();
    }
    if (target === null) await fs.promises.rm(file);
    else {
      await fs.promises.rename(file, path.join(dir, target));
      recovered.push(target);
    }
  }
  if (names.length > 0) await syncDir(dir);
  return recovered;
}

/** The receive time of the last line of the newest closed capture file in `dir` (null when there is none). */
export async function lastCapturedMs(dir: string): Promise<number | null> {
  const names = (await fs.promises.readdir(dir)).filter((n) => n.startsWith(CLOSED_PREFIX) && n.endsWith(CAPTURE_SUFFIX));
  // The name's period stamp sorts as text; several files may share the newest period (a restart within it).
  names.sort((a, b) => (a.slice(0, 23) < b.slice(0, 23) ? 1 : a.slice(0, 23) > b.slice(0, 23) ? -1 : 0));
  let best: number | null = null;
  for (const name of names) {
    if (best !== null && name.slice(0, 23) !== names[0]!.slice(0, 23)) break;
    const fh = await fs.promises.open(path.join(dir, name), 'r');
    try {
      const { size } = await fh.stat();
      const end = await endOfLastLine(fh, size);
      const ms = end > 0 ? recvMsOf(await lineBefore(fh, end)) : null;
      if (ms !== null && (best === null || ms > best)) best = ms;
    } finally {
      await fh.close();
    }
  }
  return best;
}
