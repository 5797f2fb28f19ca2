import type { CopyFormat } from '../lake/stream.js';

/**
 * An export's progress while its COPY streams: bytes, and rows for the text formats, counted from the bytes
 * as they pass (the COPY's own row count comes only at its end, and becomes the job's `record_count`).
 *  - CSV: one row per line after the header. A quoted field holding a line break would count each of its
 *    lines until the end corrects it; finding quotes byte by byte would hold the event loop on every chunk.
 *  - JSON (`ARRAY true`): DuckDB writes `[`, then each record on a line of its own that starts with a tab and
 *    its `{`, then `]`. A record is counted by its start, `\n\t{`: the `[` and `]` lines, and the `\t` line an
 *    empty array has, are not rows. JSON escapes line breaks inside strings, so the pattern occurs nowhere else.
 *  - Parquet has no lines: 0 until the end.
 */
const RECORD_START = Buffer.from('\n\t{');

export class Progress {
  bytes = 0;
  private lines = 0;
  private records = 0;
  /** The last bytes of the previous chunk: a record start may straddle two chunks. */
  private tail = Buffer.alloc(0);

  constructor(private readonly format: CopyFormat) {}

  add(chunk: Buffer): void {
    this.bytes += chunk.length;
    if (this.format === 'csv') {
      for (let i = chunk.indexOf(10); i !== -1; i = chunk.indexOf(10, i + 1)) this.lines += 1;
    } else if (this.format === 'json') {
      const keep = RECORD_START.length - 1;
      // A start beginning in the tail ends in this chunk: the joint holds no start lying wholly in either side.
      if (this.tail.length > 0 && Buffer.concat([this.tail, chunk.subarray(0, keep)]).includes(RECORD_START)) this.records += 1;
      for (let i = chunk.indexOf(RECORD_START); i !== -1; i = chunk.indexOf(RECORD_START, i + 1)) this.records += 1;
      this.tail = Buffer.from(Buffer.concat([this.tail, chunk.subarray(-keep)]).subarray(-keep));
    }
  }

  /** Rows written so far. */
  rows(): number {
    if (this.format === 'csv') return Math.max(0, this.lines - 1);
    return this.records;
  }
}
