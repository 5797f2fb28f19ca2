import type http from 'node:http';
import { keccak256, numberToHex, toHex, type Hex } from 'viem';
import { Rng } from '../generate/prng.js';
import { tradeLogs, type SimLog } from './chain-settle.js';
import type { SimTrade } from './feed.js';
import type { SimHttpRoute } from './venue.js';

export type { SimLog } from './chain-settle.js';

export type SimulatedChainOptions = {
  /** A new block every this many ms once `start`ed (default 2000); tests `mine` by hand instead. */
  blockMs?: number;
  /** The first block's number (default 79,000,000). */
  startBlock?: number;
  /** Trades settle as V1 logs before this block and as V2 from it (default: V2 from the start). */
  v2FromBlock?: number;
  /** eth_getLogs over more blocks than this is refused, as providers do (default 2000). */
  maxRange?: number;
  seed?: number;
};

export type SimBlock = { number: number; hash: Hex; parentHash: Hex; timestamp: number; logs: SimLog[] };
type Fault = { kind: 'status'; status: number; retryAfter?: number } | { kind: 'malformed-log' };
type Req = { jsonrpc?: string; id?: unknown; method?: unknown; params?: unknown };

const rpcError = (id: unknown, code: number, message: string): object => ({ jsonrpc: '2.0', id: id ?? null, error: { code, message } });

/**
 * A Polygon JSON-RPC node for the simulated venue: its blocks (real-looking hashes chained by parent hash), the
 * exchange logs of every trade the venue prints (`trade`, the venue's `onTrade`), and the methods the chain indexer
 * calls, batches included, at `POST /rpc` on the venue's port (`route`). Test hooks: `mine`, `reorg`, `failNext`,
 * `malformNextLogs`, `denyBlock`.
 */
export class SimulatedChain {
  readonly blocks: SimBlock[] = [];
  /** Blocks a `reorg` replaced, for tests to check none of their logs was written. */
  readonly orphaned: SimBlock[] = [];
  readonly served = { requests: 0, faults: 0, refusals: 0, unsettled: 0 };
  private pending: SimLog[] = [];
  private faults: Fault[] = [];
  private readonly denied = new Set<number>();
  private timer: NodeJS.Timeout | null = null;
  private salt = 0;
  private readonly rng: Rng;
  private readonly v2From: number;
  private readonly maxRange: number;

  constructor(private readonly opts: SimulatedChainOptions = {}) {
    this.rng = new Rng(opts.seed ?? 1, 'chain');
    const start = opts.startBlock ?? 79_000_000;
    this.v2From = opts.v2FromBlock ?? start;
    this.maxRange = opts.maxRange ?? 2000;
    this.seal(start, keccak256(toHex(`parent of ${start}`)), [], Math.floor(Date.now() / 1000));
  }

  get head(): number {
    return this.blocks.at(-1)!.number;
  }

  start(): this {
    this.timer ??= setInterval(() => this.mine(), this.opts.blockMs ?? 2000);
    this.timer.unref();
    return this;
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }

  /**
   * The venue's `onTrade`: the trade's logs go into the next block. A token id that is no uint256 cannot be on
   * chain: the trade is counted in `served.unsettled` and left out (a market given with a made-up id).
   */
  readonly trade = (t: SimTrade): void => {
    if (!/^\d{1,78}$/.test(t.tokenId) || BigInt(t.tokenId) >= 2n ** 256n) {
      this.served.unsettled++;
      return;
    }
    const next = this.head + 1;
    this.pending.push(...tradeLogs(t, next >= this.v2From ? 2 : 1, parseInt(t.conditionId.slice(-2), 16) % 3 === 0, this.rng));
  };

  /** Seals the next block with what trades left pending and `logs`; `timestamp` defaults to now (never before the parent). */
  mine(logs: SimLog[] = [], timestamp?: number): SimBlock {
    const prev = this.blocks.at(-1)!;
    const all = [...this.pending, ...logs];
    this.pending = [];
    return this.seal(prev.number + 1, prev.hash, all, timestamp ?? Math.max(prev.timestamp + 1, Math.floor(Date.now() / 1000)));
  }

  /** Replaces the newest `depth` blocks by others (new hashes); their logs are `replacement[i]`, or re-included as they were. */
  reorg(depth: number, replacement?: SimLog[][]): void {
    const gone = this.blocks.splice(this.blocks.length - depth, depth);
    this.orphaned.push(...gone);
    this.salt++;
    for (const [i, b] of gone.entries()) this.seal(b.number, this.blocks.at(-1)!.hash, replacement?.[i] ?? b.logs, b.timestamp);
  }

  /** The next `n` HTTP answers are this status (429 with `Retry-After` seconds when given). */
  failNext(n: number, status: number, retryAfter?: number): void {
    for (let i = 0; i < n; i++) this.faults.push({ kind: 'status', status, ...(retryAfter !== undefined ? { retryAfter } : {}) });
  }

  /** The next eth_getLogs answer holding a log has that log's `data` not hex. */
  malformNextLogs(): void {
    this.faults.push({ kind: 'malformed-log' });
  }

  /** The next eth_getBlockByNumber of block `n` answers null, as a node that just dropped the block would. */
  denyBlock(n: number): void {
    this.denied.add(n);
  }

  private seal(number: number, parentHash: Hex, logs: SimLog[], timestamp: number): SimBlock {
    const hash = keccak256(toHex(`${this.opts.seed ?? 1}:${number}:${parentHash}:${this.salt}`));
    const b: SimBlock = { number, hash, parentHash, timestamp, logs };
    this.blocks.push(b);
    return b;
  }

  private at(n: number): SimBlock | undefined {
    return this.blocks[n - this.blocks[0]!.number];
  }

  readonly route: SimHttpRoute = async (req, res, url) => {
    if (url.pathname !== '/rpc' || req.method !== 'POST') return false;
    const body = await readBody(req);
    this.served.requests++;
    const fault = this.faults[0]?.kind === 'status' ? (this.faults.shift() as Extract<Fault, { kind: 'status' }>) : null;
    if (fault) {
      this.served.faults++;
      const headers: Record<string, string> = { 'content-type': 'application/json' };
      if (fault.retryAfter !== undefined) headers['retry-after'] = String(fault.retryAfter);
      res.writeHead(fault.status, headers).end(JSON.stringify({ error: fault.status === 429 ? 'Too Many Requests' : 'Service Unavailable' }));
      return true;
    }
    let parsed: unknown;
    try {
      parsed = JSON.parse(body);
    } catch {
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(rpcError(null, -32700, 'parse error')));
      return true;
    }
    const answer = Array.isArray(parsed) ? parsed.map((r) => this.answer(r as Req)) : this.answer(parsed as Req);
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(answer));
    return true;
  };

  private answer(r: Req): object {
    const ok = (result: unknown): object => ({ jsonrpc: '2.0', id: r.id, result });
    const params = Array.isArray(r.params) ? (r.params as unknown[]) : [];
    switch (r.method) {
      case 'eth_chainId':
        return ok('0x89');
      case 'eth_blockNumber':
        return ok(numberToHex(this.head));
      case 'eth_getBlockByNumber': {
        const n = this.blockParam(params[0]);
        if (n === null) return rpcError(r.id, -32602, 'invalid block number');
        if (this.denied.delete(n)) {
          this.served.faults++;
          return ok(null);
        }
        const b = this.at(n);
        return ok(b ? blockJson(b) : null);
      }
      case 'eth_getBlockByHash': {
        const b = this.blocks.find((x) => x.hash === String(params[0]).toLowerCase());
        return ok(b ? blockJson(b) : null);
      }
      case 'eth_getLogs':
        return this.getLogs(r, (params[0] ?? {}) as { address?: unknown; fromBlock?: unknown; toBlock?: unknown });
      default:
        return rpcError(r.id, -32601, `the method ${String(r.method)} does not exist/is not available`);
    }
  }

  private getLogs(r: Req, f: { address?: unknown; fromBlock?: unknown; toBlock?: unknown }): object {
    const from = this.blockParam(f.fromBlock ?? 'latest');
    const to = this.blockParam(f.toBlock ?? 'latest');
    if (from === null || to === null || from > to) return rpcError(r.id, -32602, 'invalid block range');
    if (to - from + 1 > this.maxRange) {
      this.served.refusals++;
      return rpcError(r.id, -32602, `Log response size exceeded. You can make eth_getLogs requests with up to a ${this.maxRange} block range.`);
    }
    const wanted = new Set((Array.isArray(f.address) ? f.address : f.address ? [f.address] : []).map((a) => String(a).toLowerCase()));
    const out: Record<string, unknown>[] = [];
    for (let n = from; n <= Math.min(to, this.head); n++) {
      const b = this.at(n);
      if (b) out.push(...logsJson(b).filter((l) => wanted.size === 0 || wanted.has(String(l.address))));
    }
    if (this.faults[0]?.kind === 'malformed-log' && out.length > 0) {
      this.faults.shift();
      this.served.faults++;
      out[0] = { ...out[0], data: '0xnot-hex' };
    }
    return { jsonrpc: '2.0', id: r.id, result: out };
  }

  private blockParam(v: unknown): number | null {
    if (v === 'latest' || v === 'safe' || v === 'finalized' || v === 'pending') return this.head;
    if (v === 'earliest') return this.blocks[0]!.number;
    return typeof v === 'string' && /^0x[0-9a-f]+$/i.test(v) ? Number(v) : null;
  }
}

function blockJson(b: SimBlock): object {
  return {
    number: numberToHex(b.number),
    hash: b.hash,
    parentHash: b.parentHash,
    timestamp: numberToHex(b.timestamp),
    transactions: [...new Set(b.logs.map((l) => l.transactionHash))],
  };
}

function logsJson(b: SimBlock): Record<string, unknown>[] {
  const txs = [...new Set(b.logs.map((l) => l.transactionHash))];
  return b.logs.map((l, i) => ({
    address: l.address,
    topics: l.topics,
    data: l.data,
    blockNumber: numberToHex(b.number),
    blockHash: b.hash,
    transactionHash: l.transactionHash,
    transactionIndex: numberToHex(txs.indexOf(l.transactionHash)),
    logIndex: numberToHex(i),
    removed: false,
  }));
}

function readBody(req: http.IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const parts: Buffer[] = [];
    req.on('data', (d: Buffer) => parts.push(d));
    req.on('end', () => resolve(Buffer.concat(parts).toString('utf8')));
    req.on('error', reject);
  });
}
