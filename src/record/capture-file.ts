import fs from 'node:fs';
import path from 'node:path';
import type { Logger } from 'pino';
import { closedFileName, openFileName, periodStart, startLine } from './capture-lines.js';
import { AtomicFile, type FileSink, type FileStep } from '../atomic-file.js';

/** What the writer needs of an open file (a FileHandle); a test's slow disk wraps one. */
export type CaptureSink = FileSink;

export type CaptureFileOptions = {
  dir: string;
  recorderId: string;
  session: string;
  url: string;
  rotateSeconds: number;
  /** The lines that follow `start` at the top of every file (the `assets` lines), at the given time. */
  header: (recvMs: number) => string[];
  /** Queued bytes above which the sockets are paused (`onPressure(true)`); they resume below a quarter of it. */
  maxQueueBytes?: number;
  onPressure?: (paused: boolean) => void;
  /** Opens the open file for writing (exclusive create); the plain file system unless given. */
  openSink?: (file: string) => Promise<CaptureSink>;
  log: Logger;
};

const openExclusive = (file: string): Promise<CaptureSink> => fs.promises.open(file, 'wx');

/** A cut between two files in the queue: the lines after it go to the file of the period starting at `period`. */
type Rotate = { period: number };
type Entry = string | Rotate;

const WRITE_CHUNK = 4 * 1024 * 1024;
const RETRY_MS = 1000;

/**
 * The recorder's one open capture file and the rotation behind it. Lines are appended to an in-memory queue and
 * written by one asynchronous loop, so a slow disk never blocks the sockets' event handlers; the queue is bounded
 * by pausing the sockets (`onPressure`) and, past twice the bound, by `full()` telling the caller to drop and
 * account for what it drops. At each multiple of the rotation period the open file is flushed, fsynced, closed,
 * renamed to its closed name and the directory fsynced; the next file starts with a `start` line and the header.
 */
export class CaptureFile {
  private queue: Entry[] = [];
  private bytes = 0;
  private paused = false;
  private writing: Promise<void> | null = null;
  private out: AtomicFile | null = null;
  private period = 0;
  private nextAt = 0;
  private timer: NodeJS.Timeout | null = null;
  private closed = false;
  private readonly openPath: string;
  private readonly maxBytes: number;
  filesClosed = 0;
  bytesWritten = 0;

  private constructor(private readonly opts: CaptureFileOptions) {
    this.openPath = path.join(opts.dir, openFileName(opts.recorderId, opts.session));
    this.maxBytes = opts.maxQueueBytes ?? 32 * 1024 * 1024;
  }

  static async open(opts: CaptureFileOptions): Promise<CaptureFile> {
    const file = new CaptureFile(opts);
    const now = Date.now();
    file.period = periodStart(now, opts.rotateSeconds);
    file.out = file.atomic(await (opts.openSink ?? openExclusive)(file.openPath));
    file.enqueueHeader(now);
    file.schedule();
    return file;
  }

  /** Bytes queued and not yet written. */
  get queueBytes(): number {
    return this.bytes;
  }

  /** Whether the queue is past twice its bound: the caller drops frames (and writes an outage for them) rather than grow memory. */
  full(): boolean {
    return this.bytes >= 2 * this.maxBytes;
  }

  /**
   * Queues one line (without its `\n`) stamped `atMs`. A line stamped at or past the next period boundary first
   * rotates, so each file holds exactly the lines of its period even when the rotation timer fires late.
   */
  append(line: string, atMs: number): void {
    if (this.closed) throw new Error('capture file closed');
    if (atMs >= this.nextAt) this.rotateAt(atMs);
    this.push(line);
  }

  /** Writes `lastLine` and everything queued before it, then closes and renames the file. */
  async close(lastLine: string, atMs: number): Promise<void> {
    this.append(lastLine, atMs);
    this.closed = true;
    if (this.timer) clearTimeout(this.timer);
    while (this.writing) await this.writing;
    await this.finishFile();
  }

  private push(line: string): void {
    this.queue.push(line);
    this.bytes += Buffer.byteLength(line) + 1;
    if (!this.paused && this.bytes > this.maxBytes) this.setPaused(true);
    this.kick();
  }

  private enqueueHeader(now: number): void {
    this.nextAt = periodStart(now, this.opts.rotateSeconds) + this.opts.rotateSeconds * 1000;
    for (const line of [startLine(now, this.opts.recorderId, this.opts.session, this.opts.url), ...this.opts.header(now)]) this.push(line);
  }

  private rotateAt(now: number): void {
    this.queue.push({ period: periodStart(now, this.opts.rotateSeconds) });
    this.enqueueHeader(now);
  }

  /** Rotates a quiet file on time; a busy one rotates on its first line past the boundary (append). */
  private schedule(): void {
    if (this.closed) return;
    this.timer = setTimeout(
      () => {
        const now = Date.now();
        if (!this.closed && now >= this.nextAt) this.rotateAt(now);
        this.schedule();
      },
      Math.max(1, this.nextAt - Date.now()),
    );
    this.timer.unref();
  }

  private setPaused(paused: boolean): void {
    this.paused = paused;
    this.opts.onPressure?.(paused);
  }

  private kick(): void {
    if (this.writing) return;
    this.writing = this.drain().finally(() => {
      this.writing = null;
      if (this.queue.length > 0) this.kick();
    });
  }

  private async drain(): Promise<void> {
    while (this.queue.length > 0) {
      const batch = this.queue;
      this.queue = [];
      let parts: string[] = [];
      let size = 0;
      for (const entry of batch) {
        if (typeof entry === 'string') {
          parts.push(entry, '\n');
          size += entry.length;
          if (size < WRITE_CHUNK) continue;
        }
        await this.writeOut(parts.join(''));
        parts = [];
        size = 0;
        if (typeof entry !== 'string') await this.rotate(entry);
      }
      if (parts.length > 0) await this.writeOut(parts.join(''));
    }
  }

  /** Writes until it succeeds: a full or failing disk holds the queue (and so the sockets) rather than lose lines. */
  private async writeOut(text: string): Promise<void> {
    if (text.length === 0) return;
    const buf = Buffer.from(text, 'utf8');
    // Each partial write retried, resumed where it stopped: the file never holds a line twice.
    await this.out!.write(buf);
    this.bytesWritten += buf.length;
    this.bytes -= buf.length;
    if (this.paused && this.bytes < this.maxBytes / 4) this.setPaused(false);
  }

  private async rotate(next: Rotate): Promise<void> {
    await this.finishFile();
    // A clock stepped back must not name a file after a period already closed (a closed file is never rewritten).
    this.period = Math.max(next.period, this.period + this.opts.rotateSeconds * 1000);
    this.out = this.atomic(await this.retrying('open', () => (this.opts.openSink ?? openExclusive)(this.openPath)));
  }

  private async finishFile(): Promise<void> {
    const out = this.out;
    if (!out) return;
    this.out = null;
    await out.close(closedFileName(this.period, this.opts.recorderId, this.opts.session), (err) =>
      this.opts.log.error({ err, file: this.openPath }, 'capture file close failed'),
    );
    this.filesClosed++;
  }

  /** The open file, each of its steps (write, fsync, rename, fsync dir) retried until it succeeds. */
  private atomic(sink: CaptureSink): AtomicFile {
    return new AtomicFile(sink, this.opts.dir, openFileName(this.opts.recorderId, this.opts.session), (step, fn) => this.retrying(step, fn));
  }

  /**
   * A file-system step retried until it succeeds: the recorder must not crash on a full or failing disk, and a
   * step skipped would leave a file half put into place. Meanwhile the queue fills and pauses the sockets.
   */
  private async retrying<T>(step: FileStep | 'open', fn: () => Promise<T>): Promise<T> {
    for (;;) {
      try {
        return await fn();
      } catch (err) {
        this.opts.log.error({ err, step, file: this.openPath }, 'capture file step failed; retrying');
        await new Promise((r) => setTimeout(r, RETRY_MS));
      }
    }
  }
}
