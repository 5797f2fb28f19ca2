import { z } from 'zod';
import type { Hex } from 'viem';
import { decodeExchangeLog, exchangeOf } from './abi.js';

/** A block as the chain file keeps it. */
export type Header = { number: number; hash: Hex; parentHash: Hex; timestamp: number };

const hash = z.string().regex(/^0x[0-9a-fA-F]{64}$/, 'a 32-byte hex hash');
const quantity = z.string().regex(/^0x[0-9a-fA-F]{1,16}$/, 'a hex quantity');
const hexData = z.string().regex(/^0x(?:[0-9a-fA-F]{2})*$/, 'hex bytes');

/** One entry of an eth_getLogs answer, as the node must send it. */
export const RawLogSchema = z.object({
  address: z.string().regex(/^0x[0-9a-fA-F]{40}$/, 'an address'),
  topics: z.array(hash).max(4),
  data: hexData,
  blockNumber: quantity,
  blockHash: hash,
  transactionHash: hash,
  transactionIndex: quantity,
  logIndex: quantity,
  removed: z.boolean().optional(),
});
export type RawLog = z.infer<typeof RawLogSchema>;

const RawHeaderSchema = z.object({ number: quantity, hash, parentHash: hash, timestamp: quantity });

/** A block header of eth_getBlockByNumber, or why it cannot be used (null: the node denies the block). */
export function parseHeader(v: unknown): Header | string {
  if (v === null || v === undefined) return 'the node has no such block';
  const r = RawHeaderSchema.safeParse(v);
  if (!r.success) return `malformed block: ${r.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}`;
  return {
    number: Number(r.data.number),
    hash: r.data.hash.toLowerCase() as Hex,
    parentHash: r.data.parentHash.toLowerCase() as Hex,
    timestamp: Number(r.data.timestamp),
  };
}

export function blockLine(h: Header): string {
  return JSON.stringify({ kind: 'block', number: h.number, hash: h.hash, parent_hash: h.parentHash, timestamp: h.timestamp });
}

/** Keeps the node's answer as given (truncated only past 64 KiB, which no single log or block reaches). */
export function errorLine(blockNumber: number, message: string, raw: unknown): string {
  const text = typeof raw === 'string' ? raw : JSON.stringify(raw);
  return JSON.stringify({ kind: 'error', block_number: blockNumber, message, raw: text.length > 65_536 ? text.slice(0, 65_536) : text });
}

/** A log's line, decoded with its exchange's ABI, and an error line beside it when a known topic did not decode. */
export function logLines(log: RawLog): { line: string; error: string | null } | null {
  const ex = exchangeOf(log.address);
  if (!ex) return null;
  const topics = log.topics.map((t) => t.toLowerCase() as Hex);
  const data = log.data.toLowerCase() as Hex;
  const decoded = decodeExchangeLog(ex.version, topics, data);
  const blockNumber = Number(log.blockNumber);
  const line = JSON.stringify({
    kind: 'log',
    block_number: blockNumber,
    block_hash: log.blockHash.toLowerCase(),
    transaction_hash: log.transactionHash.toLowerCase(),
    transaction_index: Number(log.transactionIndex),
    log_index: Number(log.logIndex),
    address: ex.address,
    exchange: ex.exchange,
    event: decoded.event,
    args: decoded.args,
    topics,
    data,
  });
  const error = decoded.event === null && decoded.error ? errorLine(blockNumber, `log ${Number(log.logIndex)} does not decode: ${decoded.error}`, log) : null;
  return { line, error };
}
