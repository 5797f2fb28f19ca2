import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { DuckDBInstance } from '@duckdb/node-api';

/**
 * An independent reading of OrderFilled fixtures in plain TypeScript (BigInt arithmetic), and the candles
 * those trades make — the oracle the fills and candles tests compare the lake against.
 */

export const EXCHANGES = new Set(['0x4bfb41d5b3570defd03c39a9a4d8de6bd8b8982e', '0xc5d563a36ae78145c45a50134d48a1215220f80a']);

export type Trade = {
  id: string;
  token_id: string;
  ts: number; // epoch seconds
  block_number: number | null;
  log_index: number;
  side: 'buy' | 'sell';
  price: bigint; // micro-units
  size: bigint;
  usd_value: bigint;
  fee: bigint;
  maker: string;
  taker: string;
};

type Raw = Record<string, string | number | undefined>;

function field(r: Raw, ...names: string[]): string | undefined {
  for (const n of names) if (r[n] !== undefined && r[n] !== null && r[n] !== '') return String(r[n]);
  return undefined;
}

/** Naive CSV for the fixtures (no quoted commas in them). */
function parseCsv(text: string): Raw[] {
  const [head, ...lines] = text.trim().split(/\r?\n/);
  const cols = head!.split(',');
  return lines.map((l) => Object.fromEntries(l.split(',').map((v, i) => [cols[i]!, v])));
}

export function readFillRecords(file: string): Raw[] {
  const text = fs.readFileSync(file, 'utf8');
  if (file.endsWith('.csv')) return parseCsv(text);
  const t = text.trim();
  return t.startsWith('[') ? (JSON.parse(t) as Raw[]) : t.split('\n').map((l) => JSON.parse(l) as Raw);
}

const md5 = (s: string): string => crypto.createHash('md5').update(s).digest('hex');

/** Expected trades of a fills file: the rules of SOURCES.md, written independently of the SQL. */
export function expectedTrades(file: string): Trade[] {
  const out: Trade[] = [];
  for (const r of readFillRecords(file)) {
    const event = field(r, 'event');
    if (event && event !== 'OrderFilled') continue;
    const taker = field(r, 'taker')!.toLowerCase();
    if (EXCHANGES.has(taker)) continue;
    const makerAsset = field(r, 'maker_asset_id', 'makerAssetId')!;
    const takerAsset = field(r, 'taker_asset_id', 'takerAssetId')!;
    const makerAmt = BigInt(field(r, 'maker_amount_filled', 'makerAmountFilled')!);
    const takerAmt = BigInt(field(r, 'taker_amount_filled', 'takerAmountFilled')!);
    if (makerAmt >= 10n ** 18n || takerAmt >= 10n ** 18n) continue; // beyond the lake's DECIMAL(18,6): rejected
    const makerBuys = makerAsset === '0';
    const usdc = makerBuys ? makerAmt : takerAmt;
    const shares = makerBuys ? takerAmt : makerAmt;
    const tx = field(r, 'transaction_hash', 'transactionHash')!.toLowerCase();
    const li = field(r, 'log_index', 'logIndex');
    const logIndex = li !== undefined ? Number(li) : 1_000_000_000 + Number(BigInt(`0x${md5(field(r, 'id')!).slice(0, 15)}`) % 1_000_000_000n);
    const bn = field(r, 'block_number', 'blockNumber');
    out.push({
      id: `${tx}-${logIndex}`,
      token_id: makerBuys ? takerAsset : makerAsset,
      ts: Number(field(r, 'block_timestamp', 'timestamp')),
      block_number: bn === undefined ? null : Number(bn),
      log_index: logIndex,
      side: makerBuys ? 'sell' : 'buy',
      // Half-up rounding to 6 decimals.
      price: (usdc * 2_000_000n + shares) / (2n * shares),
      size: shares,
      usd_value: usdc,
      fee: BigInt(field(r, 'fee') ?? '0'),
      maker: field(r, 'maker')!.toLowerCase(),
      taker,
    });
  }
  return out;
}

/** Micro-units → the text DuckDB prints for a DECIMAL(_,6). */
export function d6(micro: bigint): string {
  const neg = micro < 0n;
  const a = neg ? -micro : micro;
  return `${neg ? '-' : ''}${a / 1_000_000n}.${(a % 1_000_000n).toString().padStart(6, '0')}`;
}

export type Candle = {
  token_id: string;
  bucket: string;
  open: string;
  high: string;
  low: string;
  close: string;
  volume: string;
  usd_volume: string;
  trade_count: number;
};

/** Candles of `seconds` (60: candles_1m, 3600: candles_1h) straight from the trades. */
export function expectedCandles(trades: Trade[], seconds = 60): Candle[] {
  const byKey = new Map<string, Trade[]>();
  for (const t of trades) {
    const minute = Math.floor(t.ts / seconds) * seconds;
    const k = `${t.token_id}|${minute}`;
    byKey.set(k, [...(byKey.get(k) ?? []), t]);
  }
  const out: Candle[] = [];
  for (const [k, ts] of byKey) {
    const [token, minute] = k.split('|');
    // Chain order: block time, block number, log index.
    ts.sort((a, b) => a.ts - b.ts || (a.block_number ?? -1) - (b.block_number ?? -1) || a.log_index - b.log_index);
    const prices = ts.map((t) => t.price);
    out.push({
      token_id: token!,
      bucket: new Date(Number(minute) * 1000).toISOString().replace('T', ' ').replace('.000Z', ''),
      open: d6(prices[0]!),
      high: d6(prices.reduce((a, b) => (b > a ? b : a))),
      low: d6(prices.reduce((a, b) => (b < a ? b : a))),
      close: d6(prices[prices.length - 1]!),
      volume: d6(ts.reduce((a, t) => a + t.size, 0n)),
      usd_volume: d6(ts.reduce((a, t) => a + t.usd_value, 0n)),
      trade_count: ts.length,
    });
  }
  return out.sort((a, b) => (a.token_id + a.bucket).localeCompare(b.token_id + b.bucket));
}

/** Rows of a query over lake files, values as DuckDB's JSON rendering (decimals and timestamps as text). */
export async function query(sql: string): Promise<Record<string, unknown>[]> {
  const db = await DuckDBInstance.create(':memory:', { threads: '1' });
  const conn = await db.connect();
  try {
    await conn.run(`SET TimeZone = 'UTC'`);
    return (await conn.runAndReadAll(sql)).getRowObjectsJson() as Record<string, unknown>[];
  } finally {
    conn.closeSync();
    db.closeSync();
  }
}

export function tempDir(prefix: string): { dir: string; cleanup: () => void } {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
  return { dir, cleanup: () => fs.rmSync(dir, { recursive: true, force: true }) };
}

export const md5Hex = md5;
