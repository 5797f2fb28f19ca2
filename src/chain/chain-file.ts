import fs from 'node:fs';
import path from 'node:path';
import type { Hex } from 'viem';
import type { Header } from './lines.js';
import { AtomicFile } from '../atomic-file.js';

/** The file being written; never read by the ingest (a dot file), removed by the next start after a kill. */
export const OPEN_NAME = '.open-chain.jsonl';
export const CLOSED_NAME = /^chain-(\d{10})-(\d{10})\.jsonl$/;
export const closedName = (from: number, to: number): string => `chain-${String(from).padStart(10, '0')}-${String(to).padStart(10, '0')}.jsonl`;

/** Width kept for `to_block` in the first line: written when the file opens, rewritten in place when it closes. */
const TO_WIDTH = 12;
const headerLine = (from: number, to: number, chainId: number, confirmations: number): string =>
  `{"kind":"chain_range","format":1,"chain_id":${chainId},"from_block":${from},"to_block":${String(to).padEnd(TO_WIDTH)},"confirmations":${confirmations}}`;

/**
 * One chain file being written: the first line opens it (its `to_block` padded with JSON whitespace, so the final
 * value is written over it in place: the lines stream to disk and the range is known only at the end), then whole
 * ranges of blocks; `close` adds the range's last block line if it holds no log, the `end` line, fsyncs, renames to
 * `chain-<from>-<to>.jsonl` and fsyncs the directory. Until then the blocks are not written as far as any reader or
 * a restarted indexer is concerned.
 */
export class ChainFile {
  to: number;
  logs = 0;
  bytes = 0;
  readonly openedAt = Date.now();
  private constructor(
    private readonly file: AtomicFile,
    readonly from: number,
    private readonly chainId: number,
    private readonly confirmations: number,
  ) {
    this.to = from - 1;
  }

  static async open(dir: string, from: number, chainId: number, confirmations: number): Promise<ChainFile> {
    // 'w' truncates what a killed indexer left: its blocks were never put into place.
    const fh = await fs.promises.open(path.join(dir, OPEN_NAME), 'w');
    const file = new ChainFile(new AtomicFile(fh, dir, OPEN_NAME), from, chainId, confirmations);
    await file.write([headerLine(from, from, chainId, confirmations)]);
    return file;
  }

  get blocks(): number {
    return this.to - this.from + 1;
  }

  /** Appends the lines of blocks up to `to` (contiguous with what the file holds). */
  async append(lines: string[], to: number, logs: number): Promise<void> {
    await this.write(lines);
    this.to = to;
    this.logs += logs;
  }

  /** Lines that belong to no block range (an error about the node); kept in the file if it holds any block. */
  async note(lines: string[]): Promise<void> {
    await this.write(lines);
  }

  private async write(lines: string[]): Promise<void> {
    if (lines.length === 0) return;
    const buf = Buffer.from(`${lines.join('\n')}\n`, 'utf8');
    await this.file.write(buf);
    this.bytes += buf.length;
  }

  /** Puts the file into place; `tail` is the block line of `to` when no log of that block was written. Null when it holds no block. */
  async close(tail: string | null): Promise<string | null> {
    if (this.blocks <= 0) {
      await this.discard();
      return null;
    }
    await this.write([...(tail ? [tail] : []), JSON.stringify({ kind: 'end', logs: this.logs })]);
    const header = Buffer.from(headerLine(this.from, this.to, this.chainId, this.confirmations), 'utf8');
    await this.file.write(header, 0);
    const name = closedName(this.from, this.to);
    await this.file.close(name);
    return name;
  }

  async discard(): Promise<void> {
    await this.file.discard();
  }
}

export type ClosedFile = { name: string; from: number; to: number };

/** The directory's closed files by block range; the open file a killed indexer left is removed. */
export async function scanChainDir(dir: string): Promise<ClosedFile[]> {
  await fs.promises.mkdir(dir, { recursive: true });
  await fs.promises.rm(path.join(dir, OPEN_NAME), { force: true });
  const files: ClosedFile[] = [];
  for (const name of await fs.promises.readdir(dir)) {
    const m = CLOSED_NAME.exec(name);
    if (m) files.push({ name, from: Number(m[1]), to: Number(m[2]) });
  }
  return files.sort((a, b) => a.from - b.from);
}

/** The block ranges a start must fill: before the first file (from `fromBlock`) and between files. */
export function holes(files: ClosedFile[], fromBlock: number | undefined): [number, number][] {
  const out: [number, number][] = [];
  if (files.length && fromBlock !== undefined && fromBlock < files[0]!.from) out.push([fromBlock, files[0]!.from - 1]);
  for (let i = 1; i < files.length; i++) if (files[i]!.from > files[i - 1]!.to + 1) out.push([files[i - 1]!.to + 1, files[i]!.from - 1]);
  return out;
}

/** The last `block` line of a closed file (always its `to` block): where the next range must chain on. */
export async function lastBlockOf(file: string): Promise<Header | null> {
  const fh = await fs.promises.open(file, 'r');
  try {
    const { size } = await fh.stat();
    let tail = Buffer.alloc(0);
    for (let pos = size; pos > 0;) {
      const n = Math.min(1 << 16, pos);
      pos -= n;
      const chunk = Buffer.alloc(n);
      await fh.read(chunk, 0, n, pos);
      tail = Buffer.concat([chunk, tail]);
      const text = tail.toString('latin1');
      const i = text.lastIndexOf('\n{"kind":"block"');
      if (i < 0 && pos > 0) continue;
      const at = i < 0 ? text.indexOf('{"kind":"block"') : i + 1;
      if (at < 0) return null;
      const line = JSON.parse(text.slice(at, text.indexOf('\n', at))) as { number: number; hash: Hex; parent_hash: Hex; timestamp: number };
      return { number: line.number, hash: line.hash, parentHash: line.parent_hash, timestamp: line.timestamp };
    }
    return null;
  } finally {
    await fh.close();
  }
}
