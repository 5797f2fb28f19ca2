import { parseTimeframe, type Timeframe } from '../timeframe.js';
import { planKeyOf, type DatasetKey, type KindId } from '../catalogue/kinds.js';
import type { ResolvedMarket, TokenRef } from '../markets/resolver.js';

/**
 * The normalized replay's data types (`data_types` of /v1/replay/normalized) and the messages it sends. A type is
 * a fixed name (`book_change`, `trade`, `quote`, `disconnect`) or a computed one with its parameters in the name:
 * `book_snapshot_{depth}_{interval}` (`book_snapshot_10_1s`) and `trade_bar_{interval}` (`trade_bar_1m`).
 */
export type DataType =
  | { kind: 'book_change'; name: string }
  | { kind: 'trade'; name: string }
  | { kind: 'quote'; name: string }
  | { kind: 'disconnect'; name: string }
  | { kind: 'book_snapshot'; name: string; depth: number; intervalUs: bigint }
  | { kind: 'trade_bar'; name: string; timeframe: Timeframe };

export const FIXED_TYPES = ['book_change', 'trade', 'quote', 'disconnect'] as const;
export const MAX_DEPTH = 1000;
/** Book snapshots no closer than this: finer than the tape's millisecond clock would repeat the same book. */
export const MIN_SNAPSHOT_INTERVAL_US = 10_000n;
export const MAX_SNAPSHOT_INTERVAL_US = 86_400_000_000n;

/** Incident kinds that mean the tape lost something (lake/README.md "incidents"): each is one `disconnect` message. */
export const DISCONNECT_KINDS = ['gap', 'silence', 'disconnect', 'capture_disconnect'] as const;

const UNIT_US: Readonly<Record<string, bigint>> = { ms: 1_000n, s: 1_000_000n, m: 60_000_000n, h: 3_600_000_000n };

/** `100ms`, `1s`, `10s`, `1m`, `1h` → microseconds, or null. */
export function parseInterval(text: string): bigint | null {
  const m = /^([1-9][0-9]{0,6})(ms|s|m|h)$/.exec(text);
  if (!m) return null;
  return BigInt(m[1]!) * UNIT_US[m[2]!]!;
}

export type ParsedType = { ok: true; type: DataType } | { ok: false; message: string };

/** One data type name → its definition, or why it is refused. */
export function parseDataType(name: string): ParsedType {
  if ((FIXED_TYPES as readonly string[]).includes(name)) return { ok: true, type: { kind: name as (typeof FIXED_TYPES)[number], name } };
  const snap = /^book_snapshot_([0-9]{1,5})_([0-9a-z]{1,12})$/.exec(name);
  if (snap) {
    const depth = Number(snap[1]);
    if (depth < 1 || depth > MAX_DEPTH) return { ok: false, message: `${name}: depth must be 1–${MAX_DEPTH}` };
    const us = parseInterval(snap[2]!);
    if (us === null || us < MIN_SNAPSHOT_INTERVAL_US || us > MAX_SNAPSHOT_INTERVAL_US) {
      return { ok: false, message: `${name}: interval must be a whole number of ms, s, m or h between 10ms and 24h (100ms, 1s, 10s, 1m, 1h)` };
    }
    return { ok: true, type: { kind: 'book_snapshot', name, depth, intervalUs: us } };
  }
  const bar = /^trade_bar_([0-9a-z]{1,12})$/.exec(name);
  if (bar) {
    const tf = parseTimeframe(bar[1]!);
    if (!tf.ok) return { ok: false, message: `${name}: ${tf.message}` };
    return { ok: true, type: { kind: 'trade_bar', name, timeframe: tf.value } };
  }
  return {
    ok: false,
    message: `unknown data type ${JSON.stringify(name)}: one of ${FIXED_TYPES.join(', ')}, book_snapshot_{depth}_{interval} (e.g. book_snapshot_10_1s), trade_bar_{interval} (e.g. trade_bar_1m)`,
  };
}

/** One outcome token the replay covers, with what every message names. */
export type ReplayAsset = {
  asset_id: string;
  outcome: string | null;
  outcome_index: number;
  /** The numeric market id (markets.id). */
  market_id: string;
  condition_id: string | null;
  /** For the book at an instant (src/markets/book-at.ts). */
  resolved: ResolvedMarket;
  token: TokenRef;
};

type Head = {
  type: string;
  asset_id: string;
  outcome: string | null;
  outcome_index: number;
  market_id: string;
  condition_id: string | null;
  /** ISO 8601 UTC, microseconds when the lake has them. */
  ts: string;
};
type Level = { price: number; size: number };

export type BookChangeMessage = Head & { recv_ts: string; side: 'bid' | 'ask' | null; price: number | null; size: number | null; is_snapshot: boolean };
export type TradeMessage = Head & {
  source: 'venue' | 'chain';
  side: string | null;
  price: number;
  size: number;
  transaction_hash: string | null;
  recv_ts?: string;
  fee_rate_bps?: number | null;
  id?: string;
  block_number?: number | null;
  log_index?: number | null;
};
export type QuoteMessage = Head & { best_bid: number | null; best_bid_size: number | null; best_ask: number | null; best_ask_size: number | null };
export type BookSnapshotMessage = Head & { depth: number; interval: string; bids: Level[]; asks: Level[] };
export type TradeBarMessage = Head & {
  interval: string;
  open_ts: string;
  open: number;
  high: number;
  low: number;
  close: number;
  volume: number;
  trade_count: number;
};
export type DisconnectMessage = Head & { kind: string; from_ts: string; to_ts: string; detail: unknown };

export type NormalizedMessage = BookChangeMessage | TradeMessage | QuoteMessage | BookSnapshotMessage | TradeBarMessage | DisconnectMessage;

/**
 * The data kind each type serves, whichever route serves it: its plan key is the catalogue's, so a stream
 * needs what the kind's download needs. Level changes and the venue's trade prints are the raw tape; a book at
 * each interval is the computed `book_snapshot_interval` (covered, like its download, by the raw tape's key);
 * quotes are top of book; bars the OHLCV. A disconnect is the tape's coverage, open to all.
 */
export function kindOfType(t: DataType): KindId | null {
  switch (t.kind) {
    case 'book_change':
    case 'trade':
      return 'raw';
    case 'quote':
      return 'top_of_book';
    case 'book_snapshot':
      return 'book_snapshot_interval';
    case 'trade_bar':
      return 'ohlcv';
    case 'disconnect':
      return null;
  }
}

/** The plan data set key each type needs: its kind's (src/catalogue/kinds.ts planKeyOf). */
export function planKeyOfType(t: DataType): DatasetKey | null {
  const kind = kindOfType(t);
  return kind === null ? null : planKeyOf(kind);
}
