import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { parseChainArgs } from '../../src/commands/chain.js';
import { mulberry, randomEvent, readChainFiles, startNode, tempDir, txHash, waitFor, type ChainFileRead } from './node.js';

const REPO = path.resolve(import.meta.dirname, '../..');
const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

type Run = { child: ChildProcess; exited: Promise<number | null>; stdout: () => string; stderr: () => string };

function runChain(args: string[], env: Record<string, string>): Run {
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/cli.ts', 'chain', ...args], {
    cwd: REPO,
    env: { ...process.env, PMLAKE_CHAIN_CONFIRMATIONS: '2', PMLAKE_CHAIN_MAX_RANGE: '4', PMLAKE_RECORD_ROTATE_SECONDS: '1', LOG_LEVEL: 'warn', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (err += d.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  cleanups.push(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  });
  return { child, exited, stdout: () => out, stderr: () => err };
}

/** The closed files hold each block of [from, last file's to] exactly once. */
function expectContiguous(files: ChainFileRead[], from: number): void {
  let next = from;
  for (const f of files) {
    expect(f.from, f.name).toBe(next);
    next = f.to + 1;
  }
}

describe('pmlake chain', () => {
  it('killed with SIGKILL at random points (then stopped by SIGTERM), then run to --to-block: every block once, no gap, no duplicate log', async () => {
    // A slow node (a few ms an answer) and 4-block ranges, so each run is cut somewhere in the middle of its work.
    const node = await startNode({ startBlock: 1000, delayMs: 15 });
    cleanups.push(node.close);
    const rand = mulberry(42);
    for (let b = 0; b < 800; b++) {
      const n = Math.floor(rand() * 4);
      node.chain.mine(Array.from({ length: n }, (_, i) => randomEvent(rand, txHash(b * 10 + i)).log));
    }
    const dir = tempDir('chain-kill');
    const env = { PMLAKE_POLYGON_RPC_URL: node.url };
    const toBlock = 1790;
    let killedWithOpenFile = 0;
    let resumedAt = 1000;
    for (let k = 0; k < 4; k++) {
      const run = runChain(['--out', dir, '--from-block', '1000'], env);
      await waitFor('the readiness line', () => run.stdout().includes('pmlake chain:'));
      expect(run.stdout()).toBe(`pmlake chain: ${node.url} from block ${resumedAt} into ${dir}\n`);
      const before = readChainFiles(dir).length;
      await waitFor('a file written by this run', () => readChainFiles(dir).length > before, 30_000);
      await new Promise((r) => setTimeout(r, Math.floor(rand() * 700)));
      // The last stop is a clean one: SIGTERM puts the open file into place and exits 0.
      run.child.kill(k === 3 ? 'SIGTERM' : 'SIGKILL');
      const code = await run.exited;
      if (k === 3) {
        expect(code).toBe(0);
        expect(fs.existsSync(path.join(dir, '.open-chain.jsonl'))).toBe(false);
      }
      if (fs.existsSync(path.join(dir, '.open-chain.jsonl'))) killedWithOpenFile++;
      const files = readChainFiles(dir);
      expectContiguous(files, 1000);
      resumedAt = files.at(-1)!.to + 1;
      expect(resumedAt).toBeLessThan(toBlock);
    }
    expect(killedWithOpenFile).toBeGreaterThan(0);

    const last = runChain(['--out', dir, '--from-block', '1000', '--to-block', String(toBlock)], env);
    expect(await last.exited).toBe(0);
    expect(fs.existsSync(path.join(dir, '.open-chain.jsonl'))).toBe(false);
    const files = readChainFiles(dir);
    expectContiguous(files, 1000);
    expect(files.at(-1)!.to).toBe(toBlock);
    for (const f of files) expect(f.lines.at(-1)).toEqual({ kind: 'end', logs: f.lines.filter((l) => l.kind === 'log').length });
    const written = files.flatMap((f) =>
      f.lines.filter((l) => l.kind === 'log').map((l) => `${String(l.block_number)}:${String(l.log_index)}:${String(l.transaction_hash)}`),
    );
    const onChain = node.chain.blocks.filter((b) => b.number <= toBlock).flatMap((b) => b.logs.map((l, i) => `${b.number}:${i}:${l.transactionHash}`));
    expect(onChain.length).toBeGreaterThan(800);
    expect(written).toEqual(onChain);
  });

  it('exits 2 with a clear message without PMLAKE_POLYGON_RPC_URL or with bad arguments', async () => {
    const env = { ...process.env };
    delete env.PMLAKE_POLYGON_RPC_URL;
    const child = spawn(process.execPath, ['--import', 'tsx', 'src/cli.ts', 'chain', '--out', tempDir('chain-nourl')], {
      cwd: REPO,
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let err = '';
    child.stderr.on('data', (d: Buffer) => (err += d.toString()));
    const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
    expect(code).toBe(2);
    expect(err).toContain('PMLAKE_POLYGON_RPC_URL is not set');
    expect(parseChainArgs([])).toBe('--out: --out DIR is required');
    expect(parseChainArgs(['--out', 'd', '--from-block', '-3'])).toContain('--from-block');
    expect(parseChainArgs(['--out', 'd', '--from-block', '9', '--to-block', '3'])).toBe('--from-block is after --to-block');
    expect(parseChainArgs(['--out', 'd', '--from-block', '9', '--to-block', '30'])).toEqual({ out: 'd', fromBlock: 9, toBlock: 30 });
  });
});
