import fs from 'node:fs';
import path from 'node:path';

/**
 * Pipe-separated text the book replay (ingest/books.ts) and its integrity checks (ingest/integrity/) hand back to
 * DuckDB: JavaScript writes lines, one read_csv reads them into staging.
 */

/** 1e-6 units → decimal text (exact: integers below 2^53). */
export function dec(v: number): string {
  const i = Math.floor(v / 1e6);
  let f = v - i * 1e6;
  if (f === 0) return String(i);
  // Six fraction digits without trailing zeros, built without regex (this runs once per level update).
  let digits = 6;
  while (f % 10 === 0) {
    f /= 10;
    digits -= 1;
  }
  const fs = String(f);
  return `${i}.${fs.length < digits ? '0'.repeat(digits - fs.length) + fs : fs}`;
}

/** Pipe-separated lines into a file through one reused buffer (the text is ASCII: latin1 is exact and cheap). */
export class OutFile {
  readonly path: string;
  private fd: number;
  private buf = Buffer.allocUnsafe(1 << 22);
  private used = 0;
  rows = 0;
  constructor(dir: string, name: string) {
    this.path = path.join(dir, name);
    this.fd = fs.openSync(this.path, 'w');
  }
  /** One line: `line` then `tail` (written as they are, no concatenated string). */
  push(line: string, tail = ''): void {
    this.rows += 1;
    const n = line.length + tail.length + 1;
    if (this.used + n > this.buf.length) {
      this.flush();
      if (n > this.buf.length) this.buf = Buffer.allocUnsafe(n);
    }
    this.used += this.buf.write(line, this.used, 'latin1');
    if (tail) this.used += this.buf.write(tail, this.used, 'latin1');
    this.buf[this.used] = 10;
    this.used += 1;
  }
  flush(): void {
    if (this.used) fs.writeSync(this.fd, this.buf, 0, this.used);
    this.used = 0;
  }
  close(): void {
    this.flush();
    fs.closeSync(this.fd);
  }
}
