import fs from 'node:fs';
import path from 'node:path';
import { syncDir } from './sync-dir.js';

/**
 * A file written under an open name (a dot file no reader takes) and put into place whole: fsync the file, close
 * it, rename it to its closed name, fsync the directory. A reader, or a process started after a crash of the
 * machine, sees the closed file complete or not at all. The recorder's capture files, the catalogue poller's poll
 * files and the chain indexer's chain files are all written so; each opens its own file (its flags, its names).
 */

/** What the writer needs of an open file (a FileHandle; a test's slow disk wraps one). */
export type FileSink = Pick<fs.promises.FileHandle, 'write' | 'sync' | 'close'>;

export type FileStep = 'write' | 'fsync' | 'rename' | 'fsync dir';

/**
 * How each step runs: once, a failure thrown, unless the writer says otherwise (the recorder retries each step
 * until it succeeds rather than lose lines or leave a file half put into place).
 */
export type StepRunner = <T>(step: FileStep, fn: () => Promise<T>) => Promise<T>;

const once: StepRunner = (_step, fn) => fn();

export class AtomicFile {
  /** `sink` is open on `path.join(dir, openName)`. */
  constructor(
    private readonly sink: FileSink,
    readonly dir: string,
    readonly openName: string,
    private readonly run: StepRunner = once,
  ) {}

  get openPath(): string {
    return path.join(this.dir, this.openName);
  }

  /**
   * Writes all of `buf` (at `position`, or where the file stands); a partial write (a full disk) resumes where it
   * stopped, so no byte is written twice.
   */
  async write(buf: Buffer, position?: number): Promise<void> {
    for (let done = 0; done < buf.length;) {
      const write = (): Promise<{ bytesWritten: number }> =>
        position === undefined ? this.sink.write(buf, done, buf.length - done) : this.sink.write(buf, done, buf.length - done, position + done);
      done += (await this.run('write', write)).bytesWritten;
    }
  }

  /**
   * fsync, close, rename to `closedName`, fsync the directory; returns the closed file's path. The close is not a
   * step to run again (the descriptor is gone whether or not it reports an error): `onCloseError` makes a failed
   * close reported and the file put into place all the same, else it is thrown.
   */
  async close(closedName: string, onCloseError?: (err: unknown) => void): Promise<string> {
    await this.run('fsync', () => this.sink.sync());
    await (onCloseError ? this.sink.close().catch(onCloseError) : this.sink.close());
    const closed = path.join(this.dir, closedName);
    await this.run('rename', () => fs.promises.rename(this.openPath, closed));
    await this.run('fsync dir', () => syncDir(this.dir));
    return closed;
  }

  /** Closes and removes the open file, whatever state it is in (nothing of it is worth keeping). */
  async discard(): Promise<void> {
    await this.sink.close().catch(() => {});
    await fs.promises.rm(this.openPath, { force: true });
  }
}
