import path from 'node:path';
import type { Logger } from 'pino';
import { holes, lastBlockOf, scanChainDir } from './chain-file.js';
import { fetchRange, RangeSizer, type FetchedRange } from './fetch-range.js';
import { errorLine, parseHeader, type Header } from './lines.js';
import { hexBlock, quantity, RpcClient, RpcStopped, type RpcClientOptions } from './rpc.js';
import { RangeWriter, type WrittenFile } from './writer.js';

export type { WrittenFile } from './writer.js';

export type ChainIndexerOptions = {
  rpcUrl: string;
  outDir: string;
  confirmations: number;
  maxRange: number;
  rotateSeconds: number;
  /** Where to start when the directory holds no file; before the first file, the blocks to fill. */
  fromBlock?: number;
  /** Stop once this block is written (`done` resolves). */
  toBlock?: number;
  /** How often the head is asked once caught up (default 2000 ms). */
  pollMs?: number;
  /** A file is also cut past this many bytes (default 128 MiB), so a backfill does not make one huge file. */
  maxFileBytes?: number;
  rpc?: Pick<RpcClientOptions, 'baseDelayMs' | 'maxDelayMs' | 'timeoutMs'>;
  log: Logger;
};

export type IndexerEnd = 'complete' | 'halted' | 'stopped';
type Segment = { next: number; end: number | undefined; prev: Header | null };

/**
 * Follows the chain's head and writes every log of the four exchanges into chain files (docs/chain-format.md),
 * a block only once it has `confirmations` blocks on top. Blocks above that are held in memory as fetched ranges;
 * each poll re-reads the newest held block's hash, and when it moved (a reorg) the held ranges from the changed one
 * on are dropped and fetched again. A range whose first block does not chain onto the last written block is a reorg
 * deeper than the window: an `error` line, and the indexer stops advancing rather than write a fork.
 */
export class ChainIndexer {
  readonly done: Promise<IndexerEnd>;
  private resolveDone!: (e: IndexerEnd) => void;
  private readonly abort = new AbortController();
  private readonly rpc: RpcClient;
  private readonly sizer: RangeSizer;
  private writer!: RangeWriter;
  private held: FetchedRange[] = [];
  private head = 0;
  private chainId = 137;
  private running: Promise<void> | null = null;
  reorgs = 0;
  files: WrittenFile[] = [];
  onFile: ((f: WrittenFile) => void) | null = null;

  private constructor(private readonly opts: ChainIndexerOptions) {
    this.done = new Promise((r) => (this.resolveDone = r));
    this.rpc = new RpcClient({ url: opts.rpcUrl, log: opts.log, signal: this.abort.signal, ...opts.rpc });
    this.sizer = new RangeSizer(opts.maxRange);
  }

  /** Reads the directory (the cursor), asks the node its chain and head, then runs until stopped. */
  static async start(opts: ChainIndexerOptions, onFile?: (f: WrittenFile) => void): Promise<{ indexer: ChainIndexer; startBlock: number }> {
    const ix = new ChainIndexer(opts);
    if (onFile) ix.onFile = onFile;
    const files = await scanChainDir(opts.outDir);
    ix.chainId = quantity(await ix.rpc.request('eth_chainId', []), 'eth_chainId');
    ix.head = quantity(await ix.rpc.request('eth_blockNumber', []), 'eth_blockNumber');
    ix.writer = new RangeWriter(opts.outDir, ix.chainId, opts.confirmations, (f) => {
      ix.files.push(f);
      ix.onFile?.(f);
    });
    const plan: Segment[] = [];
    for (const [from, to] of holes(files, opts.fromBlock)) {
      const before = files.find((f) => f.to === from - 1);
      plan.push({ next: from, end: to, prev: before ? await lastBlockOf(path.join(opts.outDir, before.name)) : null });
    }
    const last = files.at(-1);
    const tailFrom = last ? last.to + 1 : (opts.fromBlock ?? Math.max(0, ix.head - opts.confirmations));
    plan.push({ next: tailFrom, end: undefined, prev: last ? await lastBlockOf(path.join(opts.outDir, last.name)) : null });
    ix.running = ix.run(plan);
    return { indexer: ix, startBlock: plan[0]!.next };
  }

  /** Stops asking, puts the open file into place (its whole ranges), and resolves once it is. */
  async stop(): Promise<void> {
    this.abort.abort();
    await this.running;
  }

  private async run(plan: Segment[]): Promise<void> {
    let end: IndexerEnd = 'stopped';
    try {
      for (const seg of plan) {
        const r = await this.segment(seg);
        if (r !== 'complete') {
          end = r;
          break;
        }
        end = 'complete';
      }
    } catch (err) {
      if (!(err instanceof RpcStopped)) this.opts.log.error({ err }, 'chain indexer failed');
    }
    await this.writer.close(this.head).catch((err: unknown) => this.opts.log.error({ err }, 'chain file could not be put into place'));
    this.resolveDone(end);
  }

  /** Writes one contiguous stretch of blocks: a hole before or between files, or the tail that follows the head. */
  private async segment(seg: Segment): Promise<IndexerEnd> {
    await this.writer.close(this.head);
    this.writer.restart(seg.next, seg.prev);
    this.held = [];
    const end = seg.end ?? this.opts.toBlock;
    while (!this.abort.signal.aborted) {
      if (end !== undefined && this.writer.written.number >= end) return 'complete';
      let progressed: boolean | 'halted';
      try {
        progressed = await this.step(end);
        const f = this.writer.open;
        if (f && (Date.now() - f.openedAt >= this.opts.rotateSeconds * 1000 || f.bytes >= (this.opts.maxFileBytes ?? 128 << 20)))
          await this.writer.close(this.head);
      } catch (err) {
        if (err instanceof RpcStopped || this.abort.signal.aborted) return 'stopped';
        // Anything unexpected (a disk error, an answer that breaks an assumption): what is held is dropped and
        // fetched again, the open file is put into place up to its last whole range.
        this.opts.log.error({ err }, 'chain indexer step failed; retrying');
        this.held = [];
        await this.writer.abandon();
        progressed = false;
      }
      if (progressed === 'halted') return 'halted';
      if (!progressed) await this.sleep(this.opts.pollMs ?? 2000);
    }
    return 'stopped';
  }

  private async step(end: number | undefined): Promise<boolean | 'halted'> {
    this.head = quantity(await this.rpc.request('eth_blockNumber', []), 'eth_blockNumber');
    const safe = this.head - this.opts.confirmations;
    if (this.held.length > 0) await this.checkHeld();
    await this.commit(safe);
    const from = (this.held.at(-1)?.last.number ?? this.writer.written.number) + 1;
    // Behind the window, ranges stop at the confirmed block so they are written at once; inside it, one block per
    // range, so each block is written as soon as it is confirmed and a reorg drops exactly the blocks it replaced.
    // Never past the head: a node may answer an empty log list for a block it is about to have.
    let maxTo = from <= safe ? safe : Math.min(from, this.head);
    if (end !== undefined) maxTo = Math.min(maxTo, end);
    if (from > maxTo) return false;
    const r = await fetchRange(this.rpc, this.sizer, from, maxTo, this.opts.log);
    if ('unsettled' in r) {
      this.opts.log.warn({ from, why: r.unsettled }, 'the node answers disagree (a reorg under way?); asking again');
      return false;
    }
    const prev = this.held.at(-1)?.last ?? this.writer.written;
    if (prev.hash !== '0x' && r.first.parentHash !== prev.hash) {
      if (this.held.length > 0) {
        await this.checkHeld(true);
        return true;
      }
      // The written block itself must be gone from the node's chain, not merely one answer out of step with it.
      const now = parseHeader(await this.rpc.request('eth_getBlockByNumber', [hexBlock(prev.number), false]));
      if (typeof now !== 'string' && now.hash === prev.hash) {
        this.opts.log.warn({ block: r.first.number }, 'a range does not chain onto the written block the node still has; asking again');
        return false;
      }
      return this.deepReorg(r, prev);
    }
    this.held.push(r);
    await this.commit(safe);
    return true;
  }

  /** Whether the newest held block is still the node's; if not (or `force`), drops the held ranges from the first changed one. */
  private async checkHeld(force = false): Promise<void> {
    const top = this.held.at(-1)!.last;
    if (!force) {
      const now = parseHeader(await this.rpc.request('eth_getBlockByNumber', [hexBlock(top.number), false]));
      if (typeof now !== 'string' && now.hash === top.hash) return;
    }
    const answers = await this.rpc.batch(this.held.map((r) => ({ method: 'eth_getBlockByNumber', params: [hexBlock(r.last.number), false] })));
    const changed = this.held.findIndex((r, i) => {
      const h = parseHeader(answers[i]);
      return typeof h === 'string' || h.hash !== r.last.hash;
    });
    const at = changed < 0 ? this.held.length - 1 : changed;
    this.reorgs++;
    this.opts.log.warn(
      { fromBlock: this.held[at]!.from, heldTo: top.number, dropped: this.held.length - at },
      'reorg inside the confirmation window; fetching again',
    );
    this.held = this.held.slice(0, at);
  }

  private async deepReorg(r: FetchedRange, prev: Header): Promise<'halted'> {
    const message = `block ${r.first.number} has parent ${r.first.parentHash}, the written block ${prev.number} is ${prev.hash}: a reorg deeper than ${this.opts.confirmations} confirmations; not advancing`;
    this.opts.log.error({ block: r.first.number, written: prev.number }, message);
    await this.writer.note([errorLine(r.first.number, message, r.first)]);
    return 'halted';
  }

  /** Writes the held ranges whose last block is confirmed. */
  private async commit(safe: number): Promise<void> {
    while (this.held.length > 0 && this.held[0]!.last.number <= safe) await this.writer.write(this.held.shift()!);
  }

  private sleep(ms: number): Promise<void> {
    const signal = this.abort.signal;
    return new Promise((resolve) => {
      const onAbort = (): void => {
        clearTimeout(t);
        resolve();
      };
      const t = setTimeout(() => {
        signal.removeEventListener('abort', onAbort);
        resolve();
      }, ms);
      signal.addEventListener('abort', onAbort, { once: true });
    });
  }

  stats(): { head: number; written: number; held: number; reorgs: number; rangeSize: number; rangeRefusals: number; retries: number } {
    return {
      head: this.head,
      written: this.writer.written.number,
      held: this.held.length,
      reorgs: this.reorgs,
      rangeSize: this.sizer.size,
      rangeRefusals: this.sizer.refusals,
      retries: this.rpc.retries,
    };
  }
}
