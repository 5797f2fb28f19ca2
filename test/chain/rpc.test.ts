import http from 'node:http';
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { RangeRefused, RpcClient } from '../../src/chain/rpc.js';

type Scripted = { status: number; body: string; headers?: Record<string, string>; delayMs?: number };
const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

/** A node answering from a script, one entry per HTTP request (the last one repeated); each request's id echoed. */
async function scriptedNode(script: Scripted[]): Promise<{ url: string; requests: () => number }> {
  let n = 0;
  const server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (d: Buffer) => (body += d.toString()));
    req.on('end', () => {
      const s = script[Math.min(n++, script.length - 1)]!;
      const id = (JSON.parse(body) as { id: number }).id;
      setTimeout(() => res.writeHead(s.status, { 'content-type': 'application/json', ...s.headers }).end(s.body.replace('"ID"', String(id))), s.delayMs ?? 0);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  cleanups.push(
    () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  );
  return { url: `http://127.0.0.1:${(server.address() as { port: number }).port}`, requests: () => n };
}

const client = (url: string, timeoutMs = 5000): RpcClient =>
  new RpcClient({ url, log: pino({ level: 'silent' }), signal: new AbortController().signal, baseDelayMs: 10, maxDelayMs: 50, timeoutMs });
const ok = (result: string): Scripted => ({ status: 200, body: `{"jsonrpc":"2.0","id":"ID","result":${result}}` });
const rpcErr = (code: number, message: string): Scripted => ({
  status: 200,
  body: `{"jsonrpc":"2.0","id":"ID","error":{"code":${code},"message":"${message}"}}`,
});

describe('RpcClient', () => {
  it("reads the providers' range refusals as RangeRefused: too many results, too wide, 413, a timeout", async () => {
    for (const s of [
      rpcErr(-32005, 'query returned more than 10000 results'),
      rpcErr(-32602, 'block range too large'),
      rpcErr(-32000, 'exceed maximum block range: 1000'),
      { status: 413, body: 'Request Entity Too Large' },
    ]) {
      const node = await scriptedNode([s]);
      await expect(client(node.url).request('eth_getLogs', [{}], true)).rejects.toBeInstanceOf(RangeRefused);
    }
    const slow = await scriptedNode([{ ...ok('[]'), delayMs: 2000 }]);
    await expect(client(slow.url, 200).request('eth_getLogs', [{}], true)).rejects.toBeInstanceOf(RangeRefused);
  });

  it('backs off 429, 503, network-level garbage and rate-limit answers, then returns the answer', async () => {
    const node = await scriptedNode([
      { status: 429, body: 'slow down', headers: { 'retry-after': '0' } },
      { status: 503, body: 'unavailable' },
      { status: 200, body: 'not json' },
      rpcErr(-32005, 'daily request count exceeded, request rate limited'),
      ok('"0x10"'),
    ]);
    const c = client(node.url);
    expect(await c.request('eth_blockNumber', [])).toBe('0x10');
    expect(node.requests()).toBe(5);
    expect(c.retries).toBe(4);
  });

  it('honours Retry-After: the back-off it logs is at least what the node asked', async () => {
    const node = await scriptedNode([{ status: 429, body: '', headers: { 'retry-after': '1' } }, ok('"0x1"')]);
    const lines: { waitMs?: number; why?: string }[] = [];
    const log = pino({ level: 'warn' }, { write: (l: string) => lines.push(JSON.parse(l) as { waitMs?: number }) });
    const c = new RpcClient({ url: node.url, log, signal: new AbortController().signal, baseDelayMs: 10, maxDelayMs: 50 });
    expect(await c.request('eth_chainId', [])).toBe('0x1');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({ why: 'HTTP 429' });
    expect(lines[0]!.waitMs).toBeGreaterThanOrEqual(1000);
  });
});
