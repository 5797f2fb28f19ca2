import type { Logger } from 'pino';
import { EXCHANGE_ADDRESSES } from './abi.js';
import { blockLine, errorLine, logLines, parseHeader, RawLogSchema, type Header, type RawLog } from './lines.js';
import { hexBlock, RangeRefused, RpcError, type RpcClient } from './rpc.js';

/** A block of a fetched range that holds logs: its header and its lines (decoded logs, error lines beside them). */
export type HeldBlock = { header: Header; lines: string[]; logs: number };

/** Every log of the four contracts in [from, to], checked against the node's headers, ready to be written. */
export type FetchedRange = {
  from: number;
  to: number;
  first: Header;
  last: Header;
  blocks: HeldBlock[];
  /** Error lines about the node's answer (malformed entries), written ahead of the range's blocks. */
  errors: string[];
  logs: number;
};

/** The node's answers disagree with each other (a reorg under way): nothing of the range may be written. */
export type Unsettled = { unsettled: string };

/**
 * The width of eth_getLogs ranges: halved while the node refuses one, doubled back after a run of successes, never
 * above the configured maximum (providers differ, and one provider's limit moves with its load).
 */
export class RangeSizer {
  size: number;
  private wins = 0;
  refusals = 0;
  constructor(readonly max: number) {
    this.size = max;
  }
  refused(): boolean {
    this.refusals++;
    this.wins = 0;
    if (this.size === 1) return false;
    this.size = Math.max(1, Math.floor(this.size / 2));
    return true;
  }
  succeeded(): void {
    if (++this.wins >= 4 && this.size < this.max) {
      this.size = Math.min(this.max, this.size * 2);
      this.wins = 0;
    }
  }
}

/** eth_getLogs over [from, ≤ maxTo], narrowed until the node answers; the range actually covered and the answer. */
async function getLogs(rpc: RpcClient, sizer: RangeSizer, from: number, maxTo: number, log: Logger): Promise<{ to: number; answer: unknown }> {
  for (;;) {
    const to = Math.min(maxTo, from + sizer.size - 1);
    try {
      const answer = await rpc.request('eth_getLogs', [{ address: EXCHANGE_ADDRESSES, fromBlock: hexBlock(from), toBlock: hexBlock(to) }], true);
      sizer.succeeded();
      return { to, answer };
    } catch (err) {
      if (!(err instanceof RangeRefused)) throw err;
      // A one-block range refused cannot be narrowed: wait like any transient failure and ask again.
      if (!sizer.refused()) {
        log.error({ from, err: err.message }, 'the node refuses even a one-block log range; retrying');
        await new Promise((r) => setTimeout(r, 5_000));
      } else log.warn({ from, to, nextSize: sizer.size, why: err.message }, 'log range refused; narrowing');
    }
  }
}

/**
 * Fetches [from, ≤ maxTo]: the logs, then in one batch the headers of the range's first and last blocks and of every
 * block holding a log. A log whose block the node then denies (no block, another hash) means the node's view moved
 * between the two calls: the range is unsettled and asked again later, never written. Malformed entries become error
 * lines with the node's text and the rest of the range is kept.
 */
export async function fetchRange(rpc: RpcClient, sizer: RangeSizer, from: number, maxTo: number, log: Logger): Promise<FetchedRange | Unsettled> {
  const { to, answer } = await getLogs(rpc, sizer, from, maxTo, log);
  if (!Array.isArray(answer)) return { unsettled: `eth_getLogs answered ${JSON.stringify(answer)?.slice(0, 200)}` };
  const errors: string[] = [];
  const good: RawLog[] = [];
  for (const entry of answer as unknown[]) {
    const r = RawLogSchema.safeParse(entry);
    if (!r.success) {
      const n = Number((entry as { blockNumber?: unknown } | null)?.blockNumber);
      const why = r.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ');
      errors.push(errorLine(Number.isSafeInteger(n) && n >= from && n <= to ? n : from, `malformed log: ${why}`, entry));
      continue;
    }
    if (r.data.removed === true) return { unsettled: `the node sent a removed log in block ${Number(r.data.blockNumber)}` };
    const n = Number(r.data.blockNumber);
    if (n < from || n > to) errors.push(errorLine(from, `a log of block ${n}, outside the asked range ${from}–${to}`, entry));
    else good.push(r.data);
  }
  const numbers = [...new Set([from, to, ...good.map((l) => Number(l.blockNumber))])].sort((a, b) => a - b);
  const results = await rpc.batch(numbers.map((n) => ({ method: 'eth_getBlockByNumber', params: [hexBlock(n), false] })));
  const headers = new Map<number, Header>();
  for (const [i, n] of numbers.entries()) {
    const res = results[i];
    if (res instanceof RpcError) return { unsettled: `block ${n}: ${res.message}` };
    const h = parseHeader(res);
    if (typeof h === 'string') return { unsettled: `block ${n}: ${h}` };
    if (h.number !== n) return { unsettled: `asked block ${n}, the node answered block ${h.number}` };
    headers.set(n, h);
  }
  good.sort((a, b) => Number(a.blockNumber) - Number(b.blockNumber) || Number(a.logIndex) - Number(b.logIndex));
  const blocks: HeldBlock[] = [];
  let logs = 0;
  for (const l of good) {
    const h = headers.get(Number(l.blockNumber))!;
    if (l.blockHash.toLowerCase() !== h.hash) return { unsettled: `a log of block ${h.number} names hash ${l.blockHash}, the node's block is ${h.hash}` };
    const out = logLines(l);
    if (!out) {
      errors.push(errorLine(h.number, `a log of ${l.address}, not one of the exchanges asked for`, l));
      continue;
    }
    let b = blocks.at(-1);
    if (b?.header.number !== h.number) blocks.push((b = { header: h, lines: [], logs: 0 }));
    if (out.error) b.lines.push(out.error);
    b.lines.push(out.line);
    b.logs++;
    logs++;
  }
  return { from, to, first: headers.get(from)!, last: headers.get(to)!, blocks, errors, logs };
}

/** The lines a range adds to a file, given the previous block's timestamp: a block going back in time gets an error line. */
export function rangeLines(
  r: FetchedRange,
  prevTimestamp: { number: number; timestamp: number } | null,
): { lines: string[]; last: { number: number; timestamp: number } | null } {
  const lines = [...r.errors];
  let prev = prevTimestamp;
  for (const b of r.blocks) {
    lines.push(...timestampCheck(b.header, prev), blockLine(b.header), ...b.lines);
    prev = b.header;
  }
  return { lines, last: prev };
}

export function timestampCheck(h: Header, prev: { number: number; timestamp: number } | null): string[] {
  if (!prev || h.timestamp >= prev.timestamp || h.number <= prev.number) return [];
  return [errorLine(h.number, `block timestamp ${h.timestamp} goes back from ${prev.timestamp} of block ${prev.number}`, h)];
}
