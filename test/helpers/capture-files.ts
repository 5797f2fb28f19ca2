import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pino } from 'pino';

/** One capture line, as the format documents it (fields absent on lines that do not carry them). */
export type CaptureLine = {
  recv_ms: number;
  event?: string;
  conn?: number;
  frame?: string;
  assets?: string[];
  from_ms?: number;
  to_ms?: number;
  reason?: string;
  code?: number;
  session?: string;
  recorder?: string;
};
export type CaptureFileRead = { name: string; text: string; lines: CaptureLine[] };

export const CLOSED_NAME = /^market-(\d{8}T\d{6})Z-(.+)-([0-9a-f]{8})\.capture\.jsonl$/;

/** The closed capture files of `dir` in name order, every line parsed (a line that is not JSON throws). */
export function readCaptures(dir: string): CaptureFileRead[] {
  return fs
    .readdirSync(dir)
    .filter((n) => n.startsWith('market-'))
    .sort()
    .map((name) => {
      const text = fs.readFileSync(path.join(dir, name), 'utf8');
      if (!text.endsWith('\n')) throw new Error(`${name}: does not end with a newline`);
      const lines = text
        .slice(0, -1)
        .split('\n')
        .map((l, i) => {
          try {
            return JSON.parse(l) as CaptureLine;
          } catch {
            throw new Error(`${name}:${i + 1}: not JSON: ${l.slice(0, 80)}`);
          }
        });
      return { name, text, lines };
    });
}

/** The UTC instant a closed file's name gives for its period. */
export function periodOfName(name: string): number {
  const m = CLOSED_NAME.exec(name);
  if (!m) throw new Error(`not a closed capture name: ${name}`);
  const s = m[1]!;
  return Date.UTC(+s.slice(0, 4), +s.slice(4, 6) - 1, +s.slice(6, 8), +s.slice(9, 11), +s.slice(11, 13), +s.slice(13, 15));
}

export function allLines(files: CaptureFileRead[]): CaptureLine[] {
  return files.flatMap((f) => f.lines);
}

export async function waitFor(what: string, cond: () => boolean, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

export function tempDir(prefix: string): string {
  return fs.mkdtempSync(path.join(os.tmpdir(), `pmlake-${prefix}-`));
}

export const quietLog = pino({ level: 'silent' });
