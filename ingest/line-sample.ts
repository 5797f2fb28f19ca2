import fs from 'node:fs';
import zlib from 'node:zlib';
import { isGzip } from './detect.js';

/**
 * Windows of a file's complete lines, read without parsing the whole file (what `--dry-run` surveys from): the
 * first window holds the file's first lines, the last its last lines, the others are spread evenly between.
 * `bytes` is the file's size (uncompressed for gzip), `sampledBytes` the bytes of the lines in the windows (each
 * with its newline), so `bytes / sampledBytes` extrapolates anything counted in them. `whole`: the windows hold
 * every line of the file.
 */
export type LineSample = { windows: string[][]; bytes: number; sampledBytes: number; whole: boolean };

const WINDOWS = 8;
const WINDOW_BYTES = 256 * 1024;

export async function sampleLines(file: string, windows = WINDOWS, windowBytes = WINDOW_BYTES): Promise<LineSample> {
  if (isGzip(file)) return sampleGzip(file, windows * windowBytes);
  const size = fs.statSync(file).size;
  if (size <= windows * windowBytes) return wholeSample(fs.readFileSync(file));
  const fd = fs.openSync(file, 'r');
  try {
    const out: string[][] = [];
    let sampledBytes = 0;
    const buf = Buffer.alloc(windowBytes);
    for (let i = 0; i < windows; i += 1) {
      const at = Math.round((i * (size - windowBytes)) / (windows - 1));
      const n = fs.readSync(fd, buf, 0, windowBytes, at);
      const { lines, bytes } = completeLines(buf.subarray(0, n), at > 0, at + n < size);
      out.push(lines);
      sampledBytes += bytes;
    }
    return { windows: out, bytes: size, sampledBytes, whole: false };
  } finally {
    fs.closeSync(fd);
  }
}

function wholeSample(buf: Buffer): LineSample {
  const { lines } = completeLines(buf, false, false);
  return { windows: [lines], bytes: buf.length, sampledBytes: buf.length, whole: true };
}

/**
 * The lines of a window: a partial line at its start (the window begins mid-line) or at its end is dropped.
 * Returns the bytes those complete lines take in the file.
 */
function completeLines(buf: Buffer, cutStart: boolean, cutEnd: boolean): { lines: string[]; bytes: number } {
  let start = 0;
  if (cutStart) {
    const nl = buf.indexOf(10);
    if (nl === -1) return { lines: [], bytes: 0 };
    start = nl + 1;
  }
  let end = buf.length;
  if (cutEnd) {
    const nl = buf.lastIndexOf(10);
    if (nl < start) return { lines: [], bytes: 0 };
    end = nl + 1;
  }
  const text = buf.subarray(start, end).toString('utf8');
  const lines = text.split('\n').filter((l) => l.trim() !== '');
  return { lines, bytes: end - start };
}

/**
 * A gzip file cannot be read at an offset: it is streamed once (no copy written), keeping its first `keep` bytes
 * and the last `keep` bytes seen; the two windows are the first and last lines.
 */
async function sampleGzip(file: string, keep: number): Promise<LineSample> {
  let head = Buffer.alloc(0);
  let tail: Buffer[] = [];
  let tailBytes = 0;
  let total = 0;
  for await (const chunk of fs.createReadStream(file).pipe(zlib.createGunzip())) {
    const c = chunk as Buffer;
    total += c.length;
    if (head.length < keep) head = Buffer.concat([head, c.subarray(0, keep - head.length)]);
    tail.push(c);
    tailBytes += c.length;
    while (tail.length > 1 && tailBytes - tail[0]!.length >= keep) {
      tailBytes -= tail[0]!.length;
      tail = tail.slice(1);
    }
  }
  if (total <= keep) return wholeSample(head);
  const last = Buffer.concat(tail);
  const a = completeLines(head, false, true);
  const b = completeLines(last.subarray(Math.max(last.length - keep, 0)), true, false);
  return { windows: [a.lines, b.lines], bytes: total, sampledBytes: a.bytes + b.bytes, whole: false };
}
