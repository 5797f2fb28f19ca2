import zlib from 'node:zlib';
import type { Writable } from 'node:stream';
import { OutputClosed, writeCopyTo, type CopyStream, type WriteGate } from '../lake/stream.js';

/**
 * A minimal streaming ZIP writer for the bulk download: stored (uncompressed) entries, written straight to the
 * response as their bytes arrive, then the central directory. Each FIFO chunk costs one native `zlib.crc32`
 * (Node ≥ 20.15) and one `write`: no JavaScript CRC and no stream stages between the FIFO and the socket,
 * which a general archive library would put on every chunk of a multi-GB bundle.
 *
 * Format (APPNOTE 6.3.x): a streamed entry has general-purpose flag bit 3 — zero CRC and sizes in its local
 * header, the real ones in a data descriptor after the data and in the central directory. Names are UTF-8
 * (bit 11). ZIP64 fields are written only where a value does not fit 32 bits (an entry ≥ 4 GiB, or data past
 * 4 GiB in the archive): such an entry's data descriptor carries 8-byte sizes and its central record a ZIP64
 * extra field, and the archive ends with a ZIP64 end record and locator.
 */

const SIG_LOCAL = 0x04034b50;
const SIG_DESCRIPTOR = 0x08074b50;
const SIG_CENTRAL = 0x02014b50;
const SIG_END = 0x06054b50;
const SIG_END64 = 0x06064b50;
const SIG_LOCATOR64 = 0x07064b50;
const FLAG_DESCRIPTOR = 0x0008;
const FLAG_UTF8 = 0x0800;
const MAX32 = 0xffffffff;
/** Version made by: UNIX (3) in the high byte, so the external attributes below are read as a mode. */
const MADE_BY = (3 << 8) | 45;
/** -rw-r--r-- regular file. */
const EXTERNAL_ATTRS = (0o100644 << 16) >>> 0;

type Entry = { name: Buffer; flags: number; crc: number; size: number; offset: number; time: number; date: number };

export type EntryResult = { bytes: number; crc32: number };

function dosDateTime(d: Date): { time: number; date: number } {
  // DOS dates start in 1980; UTC, as everything in pmlake.
  const y = Math.max(1980, d.getUTCFullYear());
  return {
    time: (d.getUTCHours() << 11) | (d.getUTCMinutes() << 5) | (d.getUTCSeconds() >> 1),
    date: ((y - 1980) << 9) | ((d.getUTCMonth() + 1) << 5) | d.getUTCDate(),
  };
}

export class ZipWriter {
  private readonly entries: Entry[] = [];
  private offset = 0;
  private finished = false;

  constructor(
    private readonly out: Writable,
    /** Asked before each chunk of a streamed entry (the user's fair use): a refusal fails addStream with GateClosed. */
    private readonly gate?: WriteGate,
  ) {}

  /** Bytes handed to the output so far. */
  get bytesWritten(): number {
    return this.offset;
  }

  /** Adds an entry whose bytes are known now (manifest.json, an EMPTY.txt note). */
  async addBuffer(name: string, data: Buffer | string, mtime = new Date()): Promise<EntryResult> {
    const buf = typeof data === 'string' ? Buffer.from(data, 'utf8') : data;
    if (buf.length >= MAX32) throw new Error('addBuffer is for small entries');
    const crc = zlib.crc32(buf);
    const e = this.entry(name, FLAG_UTF8, mtime);
    e.crc = crc;
    e.size = buf.length;
    await this.write(this.localHeader(e));
    await this.write(buf);
    this.entries.push(e);
    return { bytes: buf.length, crc32: crc };
  }

  /**
   * Adds an entry from a COPY: `head` (bytes the preflight already read), then, when `rest`, the remainder of
   * `copy.stream`, written as they arrive with the stream paused while the output is full
   * (lake/stream.ts writeCopyTo). `onChunk` sees every chunk (the bulk manifest's SHA-256). If the source
   * fails or the output closes, the promise rejects and the archive is left unfinished: the caller must not
   * call finish().
   */
  async addStream(
    name: string,
    copy: Pick<CopyStream, 'stream' | 'release'>,
    head: readonly Buffer[],
    rest: boolean,
    onChunk?: (b: Buffer) => void,
    mtime = new Date(),
  ): Promise<EntryResult> {
    const e = this.entry(name, FLAG_UTF8 | FLAG_DESCRIPTOR, mtime);
    await this.write(this.localHeader(e));
    let crc = 0;
    let size = 0;
    await writeCopyTo(copy, this.out, {
      head,
      rest,
      gate: this.gate,
      onChunk: (chunk) => {
        crc = zlib.crc32(chunk, crc);
        size += chunk.length;
        this.offset += chunk.length;
        onChunk?.(chunk);
      },
    });
    e.crc = crc;
    e.size = size;
    // The data descriptor, with its optional signature (every common reader expects it). 8-byte sizes only when
    // the entry needs ZIP64, as Go's archive/zip does: readers take sizes from the central directory anyway.
    const zip64 = size >= MAX32;
    const d = Buffer.alloc(zip64 ? 24 : 16);
    d.writeUInt32LE(SIG_DESCRIPTOR, 0);
    d.writeUInt32LE(crc >>> 0, 4);
    if (zip64) {
      d.writeBigUInt64LE(BigInt(size), 8);
      d.writeBigUInt64LE(BigInt(size), 16);
    } else {
      d.writeUInt32LE(size, 8);
      d.writeUInt32LE(size, 12);
    }
    await this.write(d);
    this.entries.push(e);
    return { bytes: size, crc32: crc >>> 0 };
  }

  /** Writes the central directory and the end records, then ends the output. */
  async finish(): Promise<void> {
    if (this.finished) throw new Error('zip already finished');
    this.finished = true;
    const cdStart = this.offset;
    for (const e of this.entries) await this.write(this.centralHeader(e));
    const cdSize = this.offset - cdStart;
    const n = this.entries.length;
    const zip64 = cdStart >= MAX32 || cdSize >= MAX32 || n >= 0xffff;
    if (zip64) {
      const end64At = this.offset;
      const r = Buffer.alloc(56);
      r.writeUInt32LE(SIG_END64, 0);
      r.writeBigUInt64LE(44n, 4); // size of the rest of this record
      r.writeUInt16LE(MADE_BY, 12);
      r.writeUInt16LE(45, 14);
      r.writeUInt32LE(0, 16); // this disk
      r.writeUInt32LE(0, 20); // disk with the central directory
      r.writeBigUInt64LE(BigInt(n), 24);
      r.writeBigUInt64LE(BigInt(n), 32);
      r.writeBigUInt64LE(BigInt(cdSize), 40);
      r.writeBigUInt64LE(BigInt(cdStart), 48);
      const loc = Buffer.alloc(20);
      loc.writeUInt32LE(SIG_LOCATOR64, 0);
      loc.writeUInt32LE(0, 4);
      loc.writeBigUInt64LE(BigInt(end64At), 8);
      loc.writeUInt32LE(1, 16); // total disks
      await this.write(Buffer.concat([r, loc]));
    }
    const end = Buffer.alloc(22);
    end.writeUInt32LE(SIG_END, 0);
    end.writeUInt16LE(0, 4);
    end.writeUInt16LE(0, 6);
    end.writeUInt16LE(Math.min(n, 0xffff), 8);
    end.writeUInt16LE(Math.min(n, 0xffff), 10);
    end.writeUInt32LE(Math.min(cdSize, MAX32), 12);
    end.writeUInt32LE(Math.min(cdStart, MAX32), 16);
    end.writeUInt16LE(0, 20);
    await this.write(end);
    const out = this.out;
    await new Promise<void>((resolve, reject) => {
      // end()'s callback runs on 'finish'; a connection lost before that shows up as 'close' alone.
      const onClose = (): void => {
        if (!out.writableFinished) reject(new OutputClosed());
      };
      out.once('close', onClose);
      out.end(() => {
        out.off('close', onClose);
        resolve();
      });
    });
  }

  private entry(name: string, flags: number, mtime: Date): Entry {
    if (this.finished) throw new Error('zip already finished');
    const { time, date } = dosDateTime(mtime);
    const nameBuf = Buffer.from(name, 'utf8');
    if (nameBuf.length > 0xffff) throw new Error('zip entry name too long');
    return { name: nameBuf, flags, crc: 0, size: 0, offset: this.offset, time, date };
  }

  private localHeader(e: Entry): Buffer {
    const h = Buffer.alloc(30 + e.name.length);
    h.writeUInt32LE(SIG_LOCAL, 0);
    h.writeUInt16LE(20, 4); // version needed: 2.0 (a later ZIP64 need is declared in the central directory)
    h.writeUInt16LE(e.flags, 6);
    h.writeUInt16LE(0, 8); // stored
    h.writeUInt16LE(e.time, 10);
    h.writeUInt16LE(e.date, 12);
    // Streamed entries: CRC and sizes are zero here and follow in the data descriptor (flag bit 3).
    h.writeUInt32LE(e.flags & FLAG_DESCRIPTOR ? 0 : e.crc >>> 0, 14);
    h.writeUInt32LE(e.flags & FLAG_DESCRIPTOR ? 0 : e.size, 18);
    h.writeUInt32LE(e.flags & FLAG_DESCRIPTOR ? 0 : e.size, 22);
    h.writeUInt16LE(e.name.length, 26);
    h.writeUInt16LE(0, 28);
    e.name.copy(h, 30);
    return h;
  }

  private centralHeader(e: Entry): Buffer {
    const bigSize = e.size >= MAX32;
    const bigOffset = e.offset >= MAX32;
    // ZIP64 extra field (0x0001): only the values that overflowed, in this order: sizes, then offset.
    const extra: bigint[] = [];
    if (bigSize) extra.push(BigInt(e.size), BigInt(e.size));
    if (bigOffset) extra.push(BigInt(e.offset));
    const extraLen = extra.length ? 4 + 8 * extra.length : 0;
    const h = Buffer.alloc(46 + e.name.length + extraLen);
    h.writeUInt32LE(SIG_CENTRAL, 0);
    h.writeUInt16LE(MADE_BY, 4);
    h.writeUInt16LE(extra.length ? 45 : 20, 6);
    h.writeUInt16LE(e.flags, 8);
    h.writeUInt16LE(0, 10);
    h.writeUInt16LE(e.time, 12);
    h.writeUInt16LE(e.date, 14);
    h.writeUInt32LE(e.crc >>> 0, 16);
    h.writeUInt32LE(bigSize ? MAX32 : e.size, 20);
    h.writeUInt32LE(bigSize ? MAX32 : e.size, 24);
    h.writeUInt16LE(e.name.length, 28);
    h.writeUInt16LE(extraLen, 30);
    h.writeUInt16LE(0, 32); // comment
    h.writeUInt16LE(0, 34); // disk
    h.writeUInt16LE(0, 36); // internal attributes
    h.writeUInt32LE(EXTERNAL_ATTRS, 38);
    h.writeUInt32LE(bigOffset ? MAX32 : e.offset, 42);
    e.name.copy(h, 46);
    if (extraLen) {
      let p = 46 + e.name.length;
      h.writeUInt16LE(0x0001, p);
      h.writeUInt16LE(8 * extra.length, p + 2);
      p += 4;
      for (const v of extra) {
        h.writeBigUInt64LE(v, p);
        p += 8;
      }
    }
    return h;
  }

  /** One write; when the output asks us to wait, resolve on 'drain' — or fail if it closes first. */
  private write(b: Buffer): Promise<void> | void {
    if (this.out.destroyed || this.out.writableEnded) throw new OutputClosed();
    this.offset += b.length;
    if (this.out.write(b)) return;
    return this.drained();
  }

  private drained(): Promise<void> {
    const out = this.out;
    return new Promise<void>((resolve, reject) => {
      const done = (): void => {
        out.off('drain', onDrain);
        out.off('close', onClose);
        out.off('error', onClose);
      };
      const onDrain = (): void => {
        done();
        resolve();
      };
      const onClose = (): void => {
        done();
        reject(new OutputClosed());
      };
      out.on('drain', onDrain);
      out.on('close', onClose);
      out.on('error', onClose);
    });
  }
}
