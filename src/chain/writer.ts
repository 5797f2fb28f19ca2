import { ChainFile } from './chain-file.js';
import { rangeLines, timestampCheck, type FetchedRange } from './fetch-range.js';
import { blockLine, type Header } from './lines.js';

export type WrittenFile = { name: string; from: number; to: number; blocks: number; logs: number; head: number };
type Stamp = { number: number; timestamp: number };

/**
 * Writes confirmed ranges, in order, into the directory's open chain file and puts it into place on `close`. It
 * knows the last block written (where the next range must chain on) and the last block line's time (a block going
 * back in time gets an error line). A file that fails to close, or is abandoned after a failed write, takes its
 * blocks back: `written` returns to where the file began, so they are fetched and written again.
 */
export class RangeWriter {
  /** The last block written; a placeholder without hash (`0x`) before the first, when no file precedes it. */
  written: Header = { number: -1, hash: '0x', parentHash: '0x', timestamp: 0 };
  private file: ChainFile | null = null;
  /** The file's last block when no log of it was written: its block line goes in at close. */
  private tail: Header | null = null;
  private lastTime: Stamp | null = null;
  private atOpen: { written: Header; lastTime: Stamp | null } = { written: this.written, lastTime: null };

  constructor(
    private readonly dir: string,
    private readonly chainId: number,
    private readonly confirmations: number,
    private readonly onFile: (f: WrittenFile) => void,
  ) {}

  /** Starts a new stretch at `next`, chained onto `prev` (the block before it in a closed file) when known. */
  restart(next: number, prev: Header | null): void {
    this.written = prev ?? { number: next - 1, hash: '0x', parentHash: '0x', timestamp: 0 };
    this.lastTime = prev;
    this.tail = null;
  }

  get open(): { openedAt: number; bytes: number; blocks: number } | null {
    return this.file;
  }

  async write(r: FetchedRange): Promise<void> {
    if (!this.file) {
      this.atOpen = { written: this.written, lastTime: this.lastTime };
      this.file = await ChainFile.open(this.dir, r.from, this.chainId, this.confirmations);
    }
    const { lines, last } = rangeLines(r, this.lastTime);
    await this.file.append(lines, r.to, r.logs);
    this.lastTime = last;
    this.written = r.last;
    this.tail = r.blocks.at(-1)?.header.number === r.to ? null : r.last;
  }

  /** Lines about no block of the file (a deep reorg's error), kept when the open file holds a block. */
  async note(lines: string[]): Promise<void> {
    if (this.file && this.file.blocks > 0) await this.file.note(lines);
  }

  /** Drops the open file (a write may have failed half-way); its blocks are to be written again. */
  async abandon(): Promise<void> {
    const file = this.file;
    if (!file) return;
    this.file = null;
    this.tail = null;
    ({ written: this.written, lastTime: this.lastTime } = this.atOpen);
    await file.discard();
  }

  /** Puts the open file into place (its `end` line, fsync, rename, directory fsync). */
  async close(head: number): Promise<void> {
    const file = this.file;
    if (!file) return;
    const tail = this.tail ? [...timestampCheck(this.tail, this.lastTime), blockLine(this.tail)] : [];
    let name: string | null;
    try {
      if (tail.length > 1) await file.note(tail.slice(0, -1));
      name = await file.close(tail.at(-1) ?? null);
    } catch (err) {
      await this.abandon();
      throw err;
    }
    this.file = null;
    if (this.tail) this.lastTime = this.tail;
    this.tail = null;
    if (name) this.onFile({ name, from: file.from, to: file.to, blocks: file.blocks, logs: file.logs, head });
  }
}
