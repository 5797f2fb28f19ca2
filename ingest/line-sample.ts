import fs from 'node:fs';
import zlib from 'node:zlib';
import { isGzip } from './detect.js';

/**
 * Windows of a file's complete lines, read without parsing the whole file (what `--dry-run` surveys from): the
 * first window holds the file's first lines, the last its last lines, the others are spread evenly between.
 * `bytes` is the file's size (uncompressed for gzip), `windowBytes[i]` the bytes window i's lines take (each with
 * its newline). `whole`: the one window holds every line of the file.
 */
export type LineSample = { windows: string[][]; windowBytes: number[]; bytes: number; whole: boolean };

const WINDOWS = 32;
const WINDOW_BYTES = 64 * 1024;

export async function sampleLines(file: string, windows = WINDOWS, windowBytes = WINDOW_BYTES): Promise<LineSample> {
  if (isGzip(file)) return sampleGzip(file, gzipSize(file), windows, windowBytes);
  const size = fs.statSync(file).size;
  if (size <= windows * windowBytes) return wholeSample(fs.readFileSync(file));
  const fd = fs.openSync(file, 'r');
  try {
    const buf = Buffer.alloc(windowBytes);
    const bufs = offsets(size, windows, windowBytes).map((at) => {
      const n = fs.readSync(fd, buf, 0, windowBytes, at);
      return completeLines(buf.subarray(0, n), at > 0, at + n < size);
    });
    return { windows: bufs.map((b) => b.lines), windowBytes: bufs.map((b) => b.bytes), bytes: size, whole: false };
  } finally {
    fs.closeSync(fd);
  }
}

/**
 * Rows of the whole file from what was counted in each window, scaled by bytes. The density comes from the middle
 * windows: a file's first and last lines are unlike the rest (a day of tape opens with every token's book and closes
 * with every book moving to the next day's), so they would weigh as much as a whole stretch of the file. All
 * windows count when the middle ones hold no complete line. Null when no window holds one.
 */
export function scaleToFile(sample: LineSample, perWindow: number[]): number | null {
  if (sample.whole) return perWindow.reduce((a, b) => a + b, 0);
  const pick = (from: number, to: number): [number, number] => {
    let rows = 0;
    let bytes = 0;
    for (let i = from; i < to; i += 1) {
      rows += perWindow[i] ?? 0;
      bytes += sample.windowBytes[i] ?? 0;
    }
    return [rows, bytes];
  };
  let [rows, bytes] = pick(1, sample.windows.length - 1);
  if (bytes === 0) [rows, bytes] = pick(0, sample.windows.length);
  return bytes === 0 ? null : Math.round((rows * sample.bytes) / bytes);
}

function offsets(size: number, windows: number, windowBytes: number): number[] {
  return Array.from({ length: windows }, (_, i) => Math.round((i * (size - windowBytes)) / (windows - 1)));
}

function wholeSample(buf: Buffer): LineSample {
  const { lines } = completeLines(buf, false, false);
  return { windows: [lines], windowBytes: [buf.length], bytes: buf.length, whole: true };
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

/** A gzip file's uncompressed size from its trailer (ISIZE: modulo 4 GiB, and of the last member only). */
function gzipSize(file: string): number {
  const fd = fs.openSync(file, 'r');
  try {
    const size = fs.fstatSync(fd).size;
    const b = Buffer.alloc(4);
    fs.readSync(fd, b, 0, 4, Math.max(size - 4, 0));
    return b.readUInt32LE(0);
  } finally {
    fs.closeSync(fd);
  }
}

/**
 * A gzip file cannot be read at an offset: it is streamed once (no copy written), the windows taken at the offsets
 * its trailer's size implies as the bytes pass. A trailer that understates the size (past 4 GiB, several members)
 * only places the windows earlier; the last window is the stream's true end, kept as it goes.
 */
async function sampleGzip(file: string, isize: number, windows: number, windowBytes: number): Promise<LineSample> {
  const starts = isize > windows * windowBytes ? offsets(isize, windows, windowBytes).slice(0, -1) : [0];
  const keep = isize > windows * windowBytes ? windowBytes : windows * windowBytes;
  const got = starts.map(() => [] as Buffer[]);
  let tail: Buffer[] = [];
  let tailBytes = 0;
  let pos = 0;
  for await (const chunk of fs.createReadStream(file).pipe(zlib.createGunzip())) {
    const c = chunk as Buffer;
    starts.forEach((s, i) => {
      const from = Math.max(s, pos);
      const to = Math.min(s + keep, pos + c.length);
      if (from < to) got[i]!.push(c.subarray(from - pos, to - pos));
    });
    pos += c.length;
    tail.push(c);
    tailBytes += c.length;
    while (tail.length > 1 && tailBytes - tail[0]!.length >= windowBytes) {
      tailBytes -= tail[0]!.length;
      tail = tail.slice(1);
    }
  }
  if (pos <= windows * windowBytes) return wholeSample(Buffer.concat(got[0]!));
  const parts = got.map((g, i) => completeLines(Buffer.concat(g), starts[i]! > 0, true));
  const last = Buffer.concat(tail);
  parts.push(completeLines(last.subarray(Math.max(last.length - windowBytes, 0)), true, false));
  return { windows: parts.map((p) => p.lines), windowBytes: parts.map((p) => p.bytes), bytes: pos, whole: false };
}
