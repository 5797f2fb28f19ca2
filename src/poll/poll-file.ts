import fs from 'node:fs';
import path from 'node:path';
import type { EndpointName } from './endpoints.js';
import { AtomicFile } from '../atomic-file.js';
import { syncDir } from '../sync-dir.js';

/**
 * A catalogue poll file (docs/catalogue-format.md): written as the dot file `.open-catalogue-<poller>.jsonl`, then
 * fsynced, renamed to `catalogue-<UTC start>Z-<poller>.jsonl` and the directory fsynced, so a reader sees a poll
 * whole or not at all. Each builder returns one line without its `\n`.
 */
export const POLL_FORMAT = 1;

export const openPollName = (poller: string): string => `.open-catalogue-${poller}.jsonl`;

/** `catalogue-<YYYYMMDDTHHMMSS>Z-<poller>.jsonl`, the UTC second the poll started. */
export function closedPollName(startedMs: number, poller: string): string {
  const stamp = new Date(startedMs).toISOString().slice(0, 19).replace(/[-:]/g, '');
  return `catalogue-${stamp}Z-${poller}.jsonl`;
}

const iso = (ms: number): string => new Date(ms).toISOString();

export function pollStartLine(poller: string, startedMs: number, endpoints: Record<EndpointName, string>): string {
  return JSON.stringify({ kind: 'catalogue_poll', format: POLL_FORMAT, poller, started_at: iso(startedMs), endpoints });
}

/** `body` is the answer's text as a JSON string: JSON.parse of the line gives it back byte for byte. */
export function pageLine(endpoint: EndpointName, url: string, receivedMs: number, status: number, body: string): string {
  return JSON.stringify({ kind: 'page', endpoint, url, received_at: iso(receivedMs), status, body });
}

export function errorLine(endpoint: EndpointName, url: string, receivedMs: number, status: number | null, message: string, body?: string): string {
  return JSON.stringify({ kind: 'error', endpoint, url, received_at: iso(receivedMs), status, message, ...(body !== undefined ? { body } : {}) });
}

export function endLine(finishedMs: number, complete: Record<EndpointName, boolean>, pages: number): string {
  return JSON.stringify({ kind: 'end', finished_at: iso(finishedMs), complete, pages });
}

/**
 * Removes the open file a killed poller of this id left in `dir` (a partial poll is worth nothing: the next poll
 * starts at once). Only this poller's own name: another poller id sharing the directory may be polling now.
 */
export async function removeAbandonedPoll(dir: string, poller: string): Promise<boolean> {
  const file = path.join(dir, openPollName(poller));
  try {
    await fs.promises.rm(file);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return false;
    throw err;
  }
  await syncDir(dir);
  return true;
}

/** One poll's open file: lines are written in order as they come; `close` puts it in place, `discard` drops it. */
export class PollFile {
  private constructor(
    private readonly file: AtomicFile,
    readonly closedName: string,
  ) {}

  get dir(): string {
    return this.file.dir;
  }

  get openPath(): string {
    return this.file.openPath;
  }

  /** Fails if the open file exists (another process with this poller id is polling this directory). */
  static async open(dir: string, poller: string, startedMs: number): Promise<PollFile> {
    const fh = await fs.promises.open(path.join(dir, openPollName(poller)), 'wx');
    return new PollFile(new AtomicFile(fh, dir, openPollName(poller)), closedPollName(startedMs, poller));
  }

  async write(line: string): Promise<void> {
    await this.file.write(Buffer.from(`${line}\n`, 'utf8'));
  }

  /** fsync, close, rename to the closed name, fsync the directory; returns the closed file's path. */
  async close(): Promise<string> {
    return this.file.close(this.closedName);
  }

  async discard(): Promise<void> {
    await this.file.discard();
    await syncDir(this.dir).catch(() => {});
  }
}
