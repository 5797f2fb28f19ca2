import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { DuckDBInstance } from '@duckdb/node-api';
import { sqlString } from '../../src/lake/duckdb.js';

/**
 * Writes websocket captures (the generator's `ws/*.jsonl`, or any JSON / JSON lines capture of frames, messages
 * or `{timestamp, asset_id, message}` wrappers) as one file of the public archive's v2 layout
 * (docs/archive-format.md): one row per level change of a price_change, one per book (depth as JSON text
 * `[["price","size"],…]`), trade or tick change, sorted by market, asset, receive time. The receive time of a
 * frame is what the tape ingest would give it (the wrapper's time, else the newest venue time in the frame,
 * made non-decreasing in file order), so both paths land the same tape. For tests and the bench.
 */
export type ArchiveRow = {
  timestamp_received: number;
  timestamp: number;
  market: string;
  event_type: string;
  asset_id: string | null;
  bids?: string | null;
  asks?: string | null;
  price?: string | null;
  size?: string | null;
  side?: string | null;
  best_bid?: string | null;
  best_ask?: string | null;
  fee_rate_bps?: number | null;
  transaction_hash?: string | null;
  old_tick_size?: string | null;
  new_tick_size?: string | null;
};

type Msg = Record<string, unknown>;
type Level = { price: string; size: string };

function elementsOf(file: string): Iterable<unknown> {
  const text = fs.readFileSync(file, 'utf8');
  if (/\.(jsonl|ndjson)$/i.test(file)) {
    return (function* () {
      let start = 0;
      while (start < text.length) {
        let end = text.indexOf('\n', start);
        if (end < 0) end = text.length;
        const line = text.slice(start, end).trim();
        start = end + 1;
        if (line) yield JSON.parse(line) as unknown;
      }
    })();
  }
  const doc = JSON.parse(text) as unknown;
  return Array.isArray(doc) ? doc : [doc];
}

/** The archive rows of one venue message received at recvMs. */
export function messageRows(m: Msg, recvMs: number): ArchiveRow[] {
  const base = { timestamp_received: recvMs, timestamp: Number(m.timestamp), market: String(m.market), event_type: String(m.event_type) };
  const str = (v: unknown): string | null => (v === undefined || v === null ? null : String(v));
  switch (m.event_type) {
    case 'book': {
      const depth = (l: unknown): string => JSON.stringify(((l as Level[] | undefined) ?? []).map((x) => [x.price, x.size]));
      return [{ ...base, asset_id: str(m.asset_id), bids: depth(m.bids), asks: depth(m.asks) }];
    }
    case 'price_change': {
      if (Array.isArray(m.price_changes)) {
        return (m.price_changes as Msg[]).map((c) => ({
          ...base,
          asset_id: str(c.asset_id),
          price: str(c.price),
          size: str(c.size),
          side: str(c.side),
          best_bid: str(c.best_bid),
          best_ask: str(c.best_ask),
        }));
      }
      return ((m.changes as Msg[] | undefined) ?? []).map((c) => ({
        ...base,
        asset_id: str(m.asset_id),
        price: str(c.price),
        size: str(c.size),
        side: str(c.side),
      }));
    }
    case 'last_trade_price':
      return [
        {
          ...base,
          asset_id: str(m.asset_id),
          price: str(m.price),
          size: str(m.size),
          side: str(m.side),
          fee_rate_bps: m.fee_rate_bps === undefined ? null : Number(m.fee_rate_bps),
          transaction_hash: str(m.transaction_hash),
        },
      ];
    case 'tick_size_change':
      return [{ ...base, asset_id: str(m.asset_id), old_tick_size: str(m.old_tick_size), new_tick_size: str(m.new_tick_size) }];
    default:
      // The archive keeps the four event types of the market channel only.
      return [];
  }
}

/** Every archive row of the captures, in file order, with the tape ingest's receive time. */
export function* captureRows(files: readonly string[]): Generator<ArchiveRow> {
  for (const file of files) {
    let running = -Infinity;
    for (const el of elementsOf(file)) {
      const o = el as Msg;
      const wrapped = !Array.isArray(el) && o.message !== undefined && o.timestamp !== undefined;
      const msgs: Msg[] = Array.isArray(el) ? (el as Msg[]) : wrapped ? [o.message as Msg] : [o];
      const basis = wrapped ? Number(o.timestamp) : Math.max(...msgs.map((m) => Number(m.timestamp)).filter((t) => Number.isFinite(t)));
      if (Number.isFinite(basis)) running = Math.max(running, basis);
      if (!Number.isFinite(running)) continue;
      for (const m of msgs) yield* messageRows(m, running);
    }
  }
}

export type ArchiveWriteOptions = {
  /** Columns left out of the file (tests of a damaged file). */
  drop?: readonly string[];
  /** `market` as binary (the archive's fixed_size_binary, BLOB here) or as text. */
  market?: 'blob' | 'varchar';
  rowGroupSize?: number;
};

const SELECT: Record<string, string> = {
  // timestamp[ms, UTC] in the archive: UTC-adjusted (DuckDB writes it in microseconds; the values are whole ms).
  timestamp_received: 'CAST(make_timestamp(timestamp_received * 1000) AS TIMESTAMPTZ)',
  timestamp: 'CAST(make_timestamp("timestamp" * 1000) AS TIMESTAMPTZ)',
  market: 'CAST(market AS BLOB)',
  event_type: 'event_type',
  asset_id: 'asset_id',
  bids: 'bids',
  asks: 'asks',
  price: 'CAST(price AS DECIMAL(9,4))',
  size: 'CAST(size AS DECIMAL(18,6))',
  side: 'side',
  best_bid: 'CAST(best_bid AS DECIMAL(9,4))',
  best_ask: 'CAST(best_ask AS DECIMAL(9,4))',
  fee_rate_bps: 'CAST(fee_rate_bps AS USMALLINT)',
  transaction_hash: 'transaction_hash',
  old_tick_size: 'CAST(old_tick_size AS DECIMAL(9,4))',
  new_tick_size: 'CAST(new_tick_size AS DECIMAL(9,4))',
};

/** Writes rows as one archive-layout Parquet file; returns the number of rows. */
export async function writeArchiveFile(rows: Iterable<ArchiveRow>, out: string, opts: ArchiveWriteOptions = {}): Promise<number> {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'pmlake-archive-'));
  const jsonl = path.join(tmp, 'rows.jsonl');
  const fd = fs.openSync(jsonl, 'w');
  let n = 0;
  let buf: string[] = [];
  const flush = (): void => {
    if (buf.length) fs.writeSync(fd, buf.join(''));
    buf = [];
  };
  for (const r of rows) {
    buf.push(JSON.stringify({ ord: n, ...r }) + '\n');
    n += 1;
    if (buf.length >= 10_000) flush();
  }
  flush();
  fs.closeSync(fd);
  const db = await DuckDBInstance.create(':memory:', { threads: '2', memory_limit: '1GB' });
  const conn = await db.connect();
  try {
    await conn.run(`SET TimeZone = 'UTC'`);
    const cols = Object.entries(SELECT)
      .filter(([c]) => !(opts.drop ?? []).includes(c))
      .map(([c, e]) => `${c === 'market' && opts.market === 'varchar' ? 'market' : e} AS "${c}"`);
    const types: Record<string, string> = { ord: 'BIGINT', timestamp_received: 'BIGINT', timestamp: 'BIGINT', fee_rate_bps: 'INTEGER' };
    const columns = ['ord', ...Object.keys(SELECT)].map((c) => `'${c}': '${types[c] ?? 'VARCHAR'}'`).join(', ');
    if (n > 0) {
      await conn.run(
        `COPY (SELECT ${cols.join(', ')} FROM read_json(${sqlString(jsonl)}, format = 'newline_delimited', columns = {${columns}})
               ORDER BY market, asset_id, timestamp_received, ord)
         TO ${sqlString(out)} (FORMAT parquet, COMPRESSION zstd, ROW_GROUP_SIZE ${opts.rowGroupSize ?? 1_048_576})`,
      );
    }
    return n;
  } finally {
    conn.closeSync();
    db.closeSync();
    fs.rmSync(tmp, { recursive: true, force: true });
  }
}
