import crypto from 'node:crypto';
import fs from 'node:fs';
import type { Trade } from './fills-oracle.js';

/**
 * Chain files written by the tests exactly as docs/chain-format.md says `pmlake chain` writes them, and the
 * trades they must give, computed here in plain TypeScript (BigInt) from the same inputs.
 */

export const V1_CTF = '0x4bfb41d5b3570defd03c39a9a4d8de6bd8b8982e';
export const V1_NEGRISK = '0xc5d563a36ae78145c45a50134d48a1215220f80a';
export const V2_CTF = '0xe111180000d2663c0091e4f400237545b87b996b';
export const V2_NEGRISK = '0xe2222d279d744050d28e00520010520000310f59';
const EXCHANGES = new Set([V1_CTF, V1_NEGRISK, V2_CTF, V2_NEGRISK]);
const V2 = new Set([V2_CTF, V2_NEGRISK]);
const NAMES: Record<string, string> = { [V1_CTF]: 'ctf_v1', [V1_NEGRISK]: 'negrisk_v1', [V2_CTF]: 'ctf_v2', [V2_NEGRISK]: 'negrisk_v2' };

/** Deterministic hex of `bytes` bytes from a label. */
export function hex(label: string, bytes = 32): string {
  let out = '';
  for (let i = 0; out.length < bytes * 2; i++) out += crypto.createHash('sha256').update(`${label}:${i}`).digest('hex');
  return `0x${out.slice(0, bytes * 2)}`;
}

export type Block = { kind: 'block'; number: number; hash: string; parent_hash: string; timestamp: number };
export type Log = {
  kind: 'log';
  block_number: number;
  block_hash: string;
  transaction_hash: string;
  transaction_index: number;
  log_index: number;
  address: string;
  exchange: string;
  event: string | null;
  args: Record<string, string> | null;
  topics: string[];
  data: string;
};
export type Line = Record<string, unknown>;

export function block(number: number, timestamp: number): Block {
  return { kind: 'block', number, hash: hex(`block${number}`), parent_hash: hex(`block${number - 1}`), timestamp };
}

/** A log of `b`; `args` null with `event` null is a topic no ABI knows. */
export function log(b: Block, logIndex: number, tx: string, address: string, event: string | null, args: Record<string, string> | null): Log {
  return {
    kind: 'log',
    block_number: b.number,
    block_hash: b.hash,
    transaction_hash: tx,
    transaction_index: 3,
    log_index: logIndex,
    address,
    exchange: NAMES[address]!,
    event,
    args,
    topics: [hex(`topic:${event ?? 'unknown'}`), hex(`t1:${tx}:${logIndex}`)],
    data: hex(`data:${tx}:${logIndex}`, 64),
  };
}

export type MakerFill = { maker: string; makerAmount: bigint; takerAmount: bigint; fee?: bigint };

/**
 * One match's logs, in the contracts' order: each maker order's OrderFilled (taker = the taker order's maker),
 * the taker order's own OrderFilled (taker = the exchange: the echo), then OrdersMatched, then (V2) FeeCharged.
 * V1: `makerBuys` → makerAssetId 0. V2: `side` 0 BUY / 1 SELL of the maker orders, with `tokenId`.
 */
export function match(
  b: Block,
  firstLogIndex: number,
  tx: string,
  exchange: string,
  token: string,
  makerBuys: boolean,
  taker: string,
  makers: MakerFill[],
  echoTaker = exchange,
): Log[] {
  const v2 = V2.has(exchange);
  const assets = (buys: boolean): Record<string, string> =>
    v2 ? { side: buys ? '0' : '1', tokenId: token } : { makerAssetId: buys ? '0' : token, takerAssetId: buys ? token : '0' };
  const extra: Record<string, string> = v2 ? { builder: hex('builder'), metadata: hex('meta') } : {};
  const out: Log[] = [];
  let li = firstLogIndex;
  let totalMaker = 0n;
  let totalTaker = 0n;
  for (const m of makers) {
    out.push(
      log(b, li++, tx, exchange, 'OrderFilled', {
        orderHash: hex(`order:${tx}:${m.maker}`),
        maker: m.maker,
        taker,
        ...assets(makerBuys),
        makerAmountFilled: String(m.makerAmount),
        takerAmountFilled: String(m.takerAmount),
        fee: String(m.fee ?? 0n),
        ...extra,
      }),
    );
    totalMaker += m.makerAmount;
    totalTaker += m.takerAmount;
  }
  // The taker order's fill mirrors the makers': it gives what they took.
  const echoArgs: Record<string, string> = {
    orderHash: hex(`order:${tx}:${taker}`),
    maker: taker,
    taker: echoTaker,
    ...assets(!makerBuys),
    makerAmountFilled: String(totalTaker),
    takerAmountFilled: String(totalMaker),
    fee: '0',
    ...extra,
  };
  out.push(log(b, li++, tx, exchange, 'OrderFilled', echoArgs));
  // OrdersMatched names the taker order's assets and amounts (V1: asset ids, V2: side and token).
  const matched = {
    takerOrderHash: echoArgs.orderHash!,
    takerOrderMaker: taker,
    ...assets(!makerBuys),
    makerAmountFilled: String(totalTaker),
    takerAmountFilled: String(totalMaker),
  };
  out.push(log(b, li++, tx, exchange, 'OrdersMatched', matched));
  if (v2) out.push(log(b, li++, tx, exchange, 'FeeCharged', { receiver: hex('fees', 20), amount: '1000' }));
  return out;
}

/** A whole chain file: header, the lines given, and the end line counting the logs. */
export function chainFile(from: number, to: number, lines: Line[], opts: { end?: boolean } = {}): string {
  const head = { kind: 'chain_range', format: 1, chain_id: 137, from_block: from, to_block: to, confirmations: 32 };
  const logs = lines.filter((l) => l.kind === 'log').length;
  const all = [head, ...lines, ...(opts.end === false ? [] : [{ kind: 'end', logs }])];
  return all.map((l) => JSON.stringify(l)).join('\n') + '\n';
}

export function writeChainFile(file: string, from: number, to: number, lines: Line[], opts: { end?: boolean } = {}): void {
  fs.writeFileSync(file, chainFile(from, to, lines, opts));
}

/** The trades a set of landed logs must give: maker fills only, V2 assets from side × tokenId. */
export function expectedChainTrades(lines: Line[]): (Trade & { collateral: string })[] {
  const ts = new Map<number, number>();
  for (const l of lines) if (l.kind === 'block') ts.set(l.number as number, l.timestamp as number);
  const out: (Trade & { collateral: string })[] = [];
  for (const l of lines as Log[]) {
    if (l.kind !== 'log' || l.event !== 'OrderFilled' || !l.args) continue;
    const a = l.args;
    if (EXCHANGES.has(a.taker!.toLowerCase())) continue;
    let makerAsset: bigint;
    let takerAsset: bigint;
    if (a.side !== undefined) {
      makerAsset = BigInt(a.side) * BigInt(a.tokenId!);
      takerAsset = BigInt(a.tokenId!) - makerAsset;
    } else {
      makerAsset = BigInt(a.makerAssetId!);
      takerAsset = BigInt(a.takerAssetId!);
    }
    const makerBuys = makerAsset === 0n;
    const makerAmt = BigInt(a.makerAmountFilled!);
    const takerAmt = BigInt(a.takerAmountFilled!);
    const usdc = makerBuys ? makerAmt : takerAmt;
    const shares = makerBuys ? takerAmt : makerAmt;
    out.push({
      id: `${l.transaction_hash.toLowerCase()}-${l.log_index}`,
      token_id: String(makerBuys ? takerAsset : makerAsset),
      ts: ts.get(l.block_number)!,
      block_number: l.block_number,
      log_index: l.log_index,
      side: makerBuys ? 'sell' : 'buy',
      price: (usdc * 2_000_000n + shares) / (2n * shares),
      size: shares,
      usd_value: usdc,
      fee: BigInt(a.fee ?? '0'),
      maker: a.maker!.toLowerCase(),
      taker: a.taker!.toLowerCase(),
      collateral: V2.has(l.address.toLowerCase()) ? 'PMCT' : 'USDC',
    });
  }
  return out.sort((x, y) => x.id.localeCompare(y.id));
}
