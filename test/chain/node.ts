import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { encodeAbiParameters, encodeEventTopics, parseAbiItem, type AbiEvent, type Hex } from 'viem';
import { SimulatedChain, type SimLog, type SimulatedChainOptions } from '../../sim/simulate/chain.js';

/**
 * The tests' own event ABIs, written here from the contract sources and not taken from src/chain/abi.ts, so what the
 * indexer decodes is checked against an encoding it had no part in.
 */
export const ABI = {
  v1OrderFilled: parseAbiItem(
    'event OrderFilled(bytes32 indexed orderHash, address indexed maker, address indexed taker, uint256 makerAssetId, uint256 takerAssetId, uint256 makerAmountFilled, uint256 takerAmountFilled, uint256 fee)',
  ),
  v1OrdersMatched: parseAbiItem(
    'event OrdersMatched(bytes32 indexed takerOrderHash, address indexed takerOrderMaker, uint256 makerAssetId, uint256 takerAssetId, uint256 makerAmountFilled, uint256 takerAmountFilled)',
  ),
  v1FeeCharged: parseAbiItem('event FeeCharged(address indexed receiver, uint256 tokenId, uint256 amount)'),
  v2OrderFilled: parseAbiItem(
    'event OrderFilled(bytes32 indexed orderHash, address indexed maker, address indexed taker, uint8 side, uint256 tokenId, uint256 makerAmountFilled, uint256 takerAmountFilled, uint256 fee, bytes32 builder, bytes32 metadata)',
  ),
  v2OrdersMatched: parseAbiItem(
    'event OrdersMatched(bytes32 indexed takerOrderHash, address indexed takerOrderMaker, uint8 side, uint256 tokenId, uint256 makerAmountFilled, uint256 takerAmountFilled)',
  ),
  v2FeeCharged: parseAbiItem('event FeeCharged(address indexed receiver, uint256 amount)'),
} as const;

export const ADDR = {
  ctf_v1: '0x4bfb41d5b3570defd03c39a9a4d8de6bd8b8982e',
  negrisk_v1: '0xc5d563a36ae78145c45a50134d48a1215220f80a',
  ctf_v2: '0xe111180000d2663c0091e4f400237545b87b996b',
  negrisk_v2: '0xe2222d279d744050d28e00520010520000310f59',
} as const satisfies Record<string, Hex>;

/** A log the test built, and what the indexer must write for it: its event and arguments as decimal/hex strings. */
export type Expected = { log: SimLog; exchange: keyof typeof ADDR; event: string | null; args: Record<string, string> | null };

let counter = 0;
const h32 = (): Hex => `0x${(++counter).toString(16).padStart(8, '0')}${'ab'.repeat(28)}`;
const addr = (): Hex => `0x${(++counter).toString(16).padStart(8, '0')}${'cd'.repeat(16)}`;
export const txHash = (tag: number): Hex => `0x${tag.toString(16).padStart(16, '0')}${'ef'.repeat(24)}`;

/** Encodes one event: indexed arguments into topics, the rest into data, as the EVM's LOGn would carry them. */
function encode(item: AbiEvent, args: Record<string, bigint | number | Hex>, address: Hex, tx: Hex): SimLog {
  const indexed = Object.fromEntries(item.inputs.filter((i) => i.indexed).map((i) => [i.name!, args[i.name!]]));
  const topics = encodeEventTopics({ abi: [item], eventName: item.name, args: indexed } as Parameters<typeof encodeEventTopics>[0]) as Hex[];
  const rest = item.inputs.filter((i) => !i.indexed);
  const data = encodeAbiParameters(
    rest,
    rest.map((i) => args[i.name!]),
  );
  return { address, topics, data, transactionHash: tx };
}

const str = (args: Record<string, bigint | number | Hex>): Record<string, string> =>
  Object.fromEntries(Object.entries(args).map(([k, v]) => [k, typeof v === 'string' ? v.toLowerCase() : String(v)]));

/** A random event of the kinds the fills ingest needs, V1 or V2, on one of the four exchanges. */
export function randomEvent(rand: () => number, tx: Hex): Expected {
  const v2 = rand() < 0.5;
  const exchange = (v2 ? (rand() < 0.5 ? 'ctf_v2' : 'negrisk_v2') : rand() < 0.5 ? 'ctf_v1' : 'negrisk_v1') as keyof typeof ADDR;
  const big = (): bigint => BigInt(Math.floor(rand() * 1e12)) * 10n ** BigInt(Math.floor(rand() * 60));
  const kind = Math.floor(rand() * 3);
  let item: AbiEvent;
  let args: Record<string, bigint | number | Hex>;
  if (kind === 0 && !v2) {
    item = ABI.v1OrderFilled;
    args = {
      orderHash: h32(),
      maker: addr(),
      taker: addr(),
      makerAssetId: big(),
      takerAssetId: 0n,
      makerAmountFilled: big(),
      takerAmountFilled: big(),
      fee: big(),
    };
  } else if (kind === 0) {
    item = ABI.v2OrderFilled;
    const side = Math.floor(rand() * 2);
    args = {
      orderHash: h32(),
      maker: addr(),
      taker: addr(),
      side,
      tokenId: big(),
      makerAmountFilled: big(),
      takerAmountFilled: big(),
      fee: big(),
      builder: h32(),
      metadata: h32(),
    };
  } else if (kind === 1 && !v2) {
    item = ABI.v1OrdersMatched;
    args = { takerOrderHash: h32(), takerOrderMaker: addr(), makerAssetId: 0n, takerAssetId: big(), makerAmountFilled: big(), takerAmountFilled: big() };
  } else if (kind === 1) {
    item = ABI.v2OrdersMatched;
    args = { takerOrderHash: h32(), takerOrderMaker: addr(), side: Math.floor(rand() * 2), tokenId: big(), makerAmountFilled: big(), takerAmountFilled: big() };
  } else if (!v2) {
    item = ABI.v1FeeCharged;
    args = { receiver: addr(), tokenId: big(), amount: big() };
  } else {
    item = ABI.v2FeeCharged;
    args = { receiver: addr(), amount: big() };
  }
  return { log: encode(item, args, ADDR[exchange], tx), exchange, event: item.name, args: str(args) };
}

/** A log of the exchange whose topic no ABI of the venue's knows: kept, `event` and `args` null. */
export function unknownEvent(tx: Hex): Expected {
  const log: SimLog = { address: ADDR.ctf_v2, topics: [`0x${'12'.repeat(32)}`], data: '0x', transactionHash: tx };
  return { log, exchange: 'ctf_v2', event: null, args: null };
}

/** A seeded generator, so a failing case can be replayed. */
export function mulberry(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** The SimulatedChain as a JSON-RPC node on a loopback port; `delayMs` slows each answer (a remote node). */
export async function startNode(
  opts: SimulatedChainOptions & { delayMs?: number } = {},
): Promise<{ chain: SimulatedChain; url: string; close: () => Promise<void> }> {
  const chain = new SimulatedChain(opts);
  const server = http.createServer((req, res) => {
    const go = (): void => {
      void Promise.resolve(chain.route(req, res, new URL(req.url ?? '/', 'http://node'))).then((took) => {
        if (!took) res.writeHead(404).end();
      });
    };
    if (opts.delayMs) setTimeout(go, opts.delayMs);
    else go();
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const port = (server.address() as { port: number }).port;
  return {
    chain,
    url: `http://127.0.0.1:${port}/rpc`,
    close: async () => {
      chain.stop();
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}

export type Line = { kind: string; [k: string]: unknown };
export type ChainFileRead = { name: string; from: number; to: number; lines: Line[] };

/** Every closed chain file of `dir`, parsed; asserts nothing (the tests do). */
export function readChainFiles(dir: string): ChainFileRead[] {
  return fs
    .readdirSync(dir)
    .filter((n) => /^chain-\d{10}-\d{10}\.jsonl$/.test(n))
    .sort()
    .map((name) => {
      const lines = fs
        .readFileSync(path.join(dir, name), 'utf8')
        .split('\n')
        .filter((l) => l.length > 0)
        .map((l) => JSON.parse(l) as Line);
      return { name, from: Number(name.slice(6, 16)), to: Number(name.slice(17, 27)), lines };
    });
}

export const tempDir = (tag: string): string => fs.mkdtempSync(path.join(os.tmpdir(), `pmlake-${tag}-`));

export async function waitFor(what: string, cond: () => boolean, ms = 30_000): Promise<void> {
  const until = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}
