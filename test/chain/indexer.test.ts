import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { ChainIndexer, type ChainIndexerOptions } from '../../src/chain/indexer.js';
import {
  ADDR,
  mulberry,
  randomEvent,
  readChainFiles,
  startNode,
  tempDir,
  txHash,
  unknownEvent,
  waitFor,
  type ChainFileRead,
  type Expected,
  type Line,
} from './node.js';

const log = pino({ level: process.env.CHAIN_TEST_LOG ?? 'silent' });
const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

type Node = Awaited<ReturnType<typeof startNode>>;

/** Mines `blocks` blocks of 0–4 test-encoded logs each; what each log must become, in chain order. */
function mineEvents(node: Node, blocks: number, seed: number): Expected[] {
  const rand = mulberry(seed);
  const out: Expected[] = [];
  for (let b = 0; b < blocks; b++) {
    const evs: Expected[] = [];
    const n = Math.floor(rand() * 5);
    for (let i = 0; i < n; i++) evs.push(rand() < 0.05 ? unknownEvent(txHash(seed * 1e6 + b * 10 + i)) : randomEvent(rand, txHash(seed * 1e6 + b * 10 + i)));
    node.chain.mine(evs.map((e) => e.log));
    out.push(...evs);
  }
  return out;
}

async function index(node: Node, dir: string, opts: Partial<ChainIndexerOptions>): Promise<ChainIndexer> {
  const { indexer } = await ChainIndexer.start({
    rpcUrl: node.url,
    outDir: dir,
    confirmations: 3,
    maxRange: 1000,
    rotateSeconds: 3600,
    fromBlock: node.chain.blocks[0]!.number,
    pollMs: 20,
    rpc: { baseDelayMs: 20, maxDelayMs: 200 },
    log,
    ...opts,
  });
  cleanups.push(() => indexer.stop());
  return indexer;
}

const logsOf = (files: ChainFileRead[]): Line[] => files.flatMap((f) => f.lines.filter((l) => l.kind === 'log'));

/** The files of a directory cover [from, to] exactly: contiguous, no overlap, each well formed. */
function expectCoverage(files: ChainFileRead[], from: number, to: number): void {
  let next = from;
  for (const f of files) {
    expect(f.from).toBe(next);
    expect(f.lines[0]).toMatchObject({ kind: 'chain_range', format: 1, chain_id: 137, from_block: f.from, to_block: f.to });
    expect(f.lines.at(-1)).toEqual({ kind: 'end', logs: f.lines.filter((l) => l.kind === 'log').length });
    const blocks = f.lines.filter((l) => l.kind === 'block');
    expect(blocks.at(-1)?.number).toBe(f.to);
    next = f.to + 1;
  }
  expect(next - 1).toBe(to);
}

/** Every expected log once, at its block, with the arguments the test encoded. */
function expectLogs(written: Line[], expected: Expected[], node: Node, upTo: number): void {
  const key = (l: Line): string => `${String(l.block_number)}:${String(l.log_index)}`;
  expect(new Set(written.map(key)).size).toBe(written.length);
  const want = node.chain.blocks
    .filter((b) => b.number <= upTo)
    .flatMap((b) =>
      b.logs.map((l, i) => {
        const e = expected.find((x) => x.log === l)!;
        return {
          block_number: b.number,
          block_hash: b.hash,
          log_index: i,
          transaction_hash: l.transactionHash,
          exchange: e.exchange,
          address: ADDR[e.exchange],
          event: e.event,
          args: e.args,
          topics: l.topics,
          data: l.data,
        };
      }),
    );
  expect(
    written.map((l) => ({
      block_number: l.block_number,
      block_hash: l.block_hash,
      log_index: l.log_index,
      transaction_hash: l.transaction_hash,
      exchange: l.exchange,
      address: l.address,
      event: l.event,
      args: l.args,
      topics: l.topics,
      data: l.data,
    })),
  ).toEqual(want);
}

describe('ChainIndexer against a JSON-RPC node serving test-encoded logs', () => {
  it('writes every event of the range once, decoded as the test encoded it (V1 and V2 OrderFilled, OrdersMatched, FeeCharged)', async () => {
    const node = await startNode({ startBlock: 1000 });
    cleanups.push(node.close);
    const expected = mineEvents(node, 120, 1);
    expect(new Set(expected.map((e) => `${e.exchange}:${e.event}`)).size).toBeGreaterThanOrEqual(10);
    const dir = tempDir('chain-all');
    const ix = await index(node, dir, { toBlock: node.chain.head - 3, rotateSeconds: 1 });
    expect(await ix.done).toBe('complete');
    const files = readChainFiles(dir);
    expectCoverage(files, 1000, node.chain.head - 3);
    expectLogs(logsOf(files), expected, node, node.chain.head - 3);
    // A block line precedes its logs and carries the node's timestamp.
    const blocks = new Map(node.chain.blocks.map((b) => [b.number, b]));
    for (const f of files) {
      let current: Line | null = null;
      for (const l of f.lines) {
        if (l.kind === 'block') {
          current = l;
          expect(l).toEqual({
            kind: 'block',
            number: l.number,
            hash: blocks.get(l.number as number)!.hash,
            parent_hash: blocks.get(l.number as number)!.parentHash,
            timestamp: blocks.get(l.number as number)!.timestamp,
          });
        }
        if (l.kind === 'log') expect(current?.number).toBe(l.block_number);
      }
    }
  });

  it('a reorg inside the confirmation window: the orphaned logs never appear, the replacement logs do', async () => {
    const node = await startNode({ startBlock: 5000 });
    cleanups.push(node.close);
    const rand = mulberry(7);
    const expected: Expected[] = [];
    const mine = (tag: number): void => {
      const e = randomEvent(rand, txHash(tag));
      expected.push(e);
      node.chain.mine([e.log]);
    };
    for (let i = 0; i < 10; i++) mine(i);
    const dir = tempDir('chain-reorg');
    const ix = await index(node, dir, { confirmations: 6, rotateSeconds: 1 });
    let tag = 100;
    for (let round = 0; round < 3; round++) {
      const caughtUp = (): boolean => ix.stats().head === node.chain.head && ix.stats().written === node.chain.head - 6 && ix.stats().held === 6;
      await waitFor('the window held', caughtUp);
      // Replace the newest 4 blocks (inside the 6-block window) with blocks holding other transactions.
      const replacement = [0, 1, 2, 3].map(() => {
        const e = randomEvent(rand, txHash(1000 + tag++));
        expected.push(e);
        return [e.log];
      });
      node.chain.reorg(4, replacement);
      for (let i = 0; i < 3; i++) mine(tag++);
    }
    for (let i = 0; i < 8; i++) mine(tag++);
    const last = node.chain.head - 6;
    await waitFor('the chain written up to the confirmed head', () => ix.stats().written === last);
    await ix.stop();
    expect(ix.reorgs).toBeGreaterThanOrEqual(1);
    const files = readChainFiles(dir);
    expectCoverage(files, 5000, last);
    const written = logsOf(files);
    const orphanedTx = new Set(node.chain.orphaned.flatMap((b) => b.logs.map((l) => l.transactionHash)));
    expect(orphanedTx.size).toBe(12);
    expect(written.filter((l) => orphanedTx.has(l.transaction_hash as `0x${string}`))).toEqual([]);
    const orphanedHashes = new Set(node.chain.orphaned.map((b) => b.hash));
    expect(files.flatMap((f) => f.lines).filter((l) => orphanedHashes.has((l.hash ?? l.block_hash) as `0x${string}`))).toEqual([]);
    expectLogs(written, expected, node, last);
  });

  it('walks a node that refuses ranges wider than 5 blocks in smaller ones, and backs off 429 and 503 answers', async () => {
    const node = await startNode({ startBlock: 200, maxRange: 5 });
    cleanups.push(node.close);
    const expected = mineEvents(node, 80, 3);
    node.chain.failNext(3, 429, 0);
    node.chain.failNext(2, 503);
    const dir = tempDir('chain-narrow');
    const ix = await index(node, dir, { maxRange: 64, toBlock: node.chain.head - 3 });
    expect(await ix.done).toBe('complete');
    expect(node.chain.served.refusals).toBeGreaterThan(0);
    expect(node.chain.served.faults).toBe(5);
    expect(ix.stats().retries).toBeGreaterThanOrEqual(5);
    expect(ix.stats().rangeRefusals).toBeGreaterThan(0);
    const files = readChainFiles(dir);
    expectCoverage(files, 200, node.chain.head - 3);
    const last = node.chain.head - 3;
    expectLogs(logsOf(files), expected, node, last);
  });

  it('a block timestamp going backwards, a malformed log and a denied block: error lines kept, the role goes on', async () => {
    const node = await startNode({ startBlock: 300 });
    cleanups.push(node.close);
    const rand = mulberry(11);
    const expected: Expected[] = [];
    for (let i = 0; i < 30; i++) {
      const e = randomEvent(rand, txHash(i));
      expected.push(e);
      // Block 310 is stamped 100 s before its parent.
      node.chain.mine([e.log], i === 10 ? node.chain.blocks.at(-1)!.timestamp - 100 : undefined);
    }
    node.chain.malformNextLogs();
    node.chain.denyBlock(320);
    const dir = tempDir('chain-bad');
    const ix = await index(node, dir, { maxRange: 8, toBlock: node.chain.head - 3 });
    expect(await ix.done).toBe('complete');
    const files = readChainFiles(dir);
    expectCoverage(files, 300, node.chain.head - 3);
    const errors = files.flatMap((f) => f.lines).filter((l) => l.kind === 'error');
    expect(node.chain.served.faults).toBe(2);
    expect(errors).toHaveLength(2);
    const back = errors.find((l) => String(l.message).includes('goes back'));
    expect(back).toMatchObject({ block_number: 311 });
    const malformed = errors.find((l) => String(l.message).startsWith('malformed log'))!;
    expect(malformed.raw).toContain('0xnot-hex');
    // The malformed entry is the only log missing; every other log is there once, the timestamp written as given.
    const written = logsOf(files);
    const badBlock = malformed.block_number as number;
    const all = node.chain.blocks.filter((b) => b.number <= node.chain.head - 3).flatMap((b) => b.logs.map(() => b.number));
    expect(written).toHaveLength(all.length - 1);
    expect(written.some((l) => l.block_number === badBlock)).toBe(false);
    const b311 = files.flatMap((f) => f.lines).find((l) => l.kind === 'block' && l.number === 311);
    expect(b311?.timestamp).toBe(node.chain.blocks.find((b) => b.number === 311)!.timestamp);
  });

  it('a reorg deeper than the window: an error line, and nothing more is written', async () => {
    const node = await startNode({ startBlock: 700 });
    cleanups.push(node.close);
    mineEvents(node, 20, 5);
    const dir = tempDir('chain-deep');
    const ix = await index(node, dir, { confirmations: 2, rotateSeconds: 3600 });
    await waitFor('written up to the confirmed head', () => ix.stats().written === node.chain.head - 2);
    const written = ix.stats().written!;
    node.chain.reorg(6);
    node.chain.mine();
    node.chain.mine();
    expect(await ix.done).toBe('halted');
    const files = readChainFiles(dir);
    expect(files.at(-1)!.to).toBe(written);
    const error = files.flatMap((f) => f.lines).find((l) => l.kind === 'error');
    expect(String(error?.message)).toContain('deeper than 2 confirmations');
  });
});
