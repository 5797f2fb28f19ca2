import { spawn } from 'node:child_process';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { WebSocket } from 'ws';
import { syntheticMarkets } from '../../sim/simulate/venue.js';

const ROOT = path.resolve(import.meta.dirname, '../..');

describe('pmlake simulate', () => {
  it('serves the market channel, the catalogue pages and a JSON-RPC node on the port it was given until SIGTERM, then exits 0', async () => {
    const child = spawn(process.execPath, ['--import', 'tsx', 'src/cli.ts', 'simulate', '--port', '0', '--markets', '3', '--rate', '500', '--seed', '4'], {
      cwd: ROOT,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
    try {
      let out = '';
      const url = await new Promise<string>((resolve, reject) => {
        child.stdout.on('data', (d: Buffer) => {
          out += d.toString();
          const m = /ws:\/\/127\.0\.0\.1:\d+\/ws\/market/.exec(out);
          if (m) resolve(m[0]);
        });
        child.on('exit', () => reject(new Error(`simulate exited early: ${out}`)));
      });
      const ws = new WebSocket(url);
      const frames: string[] = [];
      ws.on('message', (d) => frames.push(d.toString()));
      await new Promise((resolve) => ws.once('open', resolve));
      // The command trades the markets the generator plans for its seed.
      const markets = syntheticMarkets(3, 4);
      ws.send(JSON.stringify({ assets_ids: markets[2]!.tokens, type: 'market' }));
      const deadline = Date.now() + 20_000;
      while (frames.length < 5 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
      const books = JSON.parse(frames[0]!) as { asset_id: string }[];
      expect(books.map((b) => b.asset_id).sort()).toEqual([...markets[2]!.tokens].sort());
      expect(frames.length).toBeGreaterThanOrEqual(5);
      ws.terminate();

      // The second readiness line names the catalogue and the node; both answer as the venue's would.
      while (!/PMLAKE_POLYGON_RPC_URL=\S+\n/.test(out) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
      const env = Object.fromEntries([...out.matchAll(/(PMLAKE_[A-Z_]+)=(\S+)/g)].map((m) => [m[1]!, m[2]!]));
      const page = (await (await fetch(`${env.PMLAKE_GAMMA_URL}/markets/keyset?limit=100`)).json()) as { markets: { conditionId: string }[] };
      expect(page.markets.map((m) => m.conditionId).sort()).toEqual(markets.map((m) => m.conditionId).sort());
      const clob = (await (await fetch(`${env.PMLAKE_CLOB_URL}/markets`)).json()) as { data: { condition_id: string }[] };
      expect(clob.data).toHaveLength(3);
      const rpc = async (method: string, params: unknown[]) =>
        (
          (await (
            await fetch(env.PMLAKE_POLYGON_RPC_URL!, {
              method: 'POST',
              headers: { 'content-type': 'application/json' },
              body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }),
            })
          ).json()) as { result: string }
        ).result;
      expect(await rpc('eth_chainId', [])).toBe('0x89');
      expect(Number(await rpc('eth_blockNumber', []))).toBeGreaterThan(65_000_000);
    } finally {
      child.kill('SIGTERM');
    }
    expect(await exited).toBe(0);
  });

  it('rejects a bad option with a usage line and exit code 2', async () => {
    const child = spawn(process.execPath, ['--import', 'tsx', 'src/cli.ts', 'simulate', '--port', 'x'], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
    let err = '';
    child.stderr.on('data', (d: Buffer) => (err += d.toString()));
    const code = await new Promise<number | null>((resolve) => child.on('exit', (c) => resolve(c)));
    expect(code).toBe(2);
    expect(err).toContain('--port');
    expect(err).toContain('usage: pmlake simulate');
  });
});
