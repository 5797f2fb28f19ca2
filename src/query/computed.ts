import type { Query } from '../lake/duckdb.js';
import type { Lake } from '../lake/sources.js';
import type { CopyFormat } from '../lake/stream.js';
import type { RowShape } from '../lake/values.js';
import { bucketCeil, type Timeframe } from '../timeframe.js';
import { DAY_MICROS, dateOf, query, tsParam, type Params } from './common.js';
import { asFile, suffixParams } from './downloads.js';

/**
 * The computed file kinds: the book of each outcome at every interval boundary of a window, and `tbbo` (each
 * venue trade print with the best bid and ask in force just before it). Each is one set-based statement (the
 * books: one per day of the window, unioned) that the download path wraps in `COPY … TO fifo`
 * (src/lake/stream.ts), so they stream like every other file.
 *
 * The book's clock is the receive time, as the book-at-instant endpoint's (src/markets/book-at.ts): the book at
 * B is the newest stored snapshot stamped at or before B (ties: the larger seq), then every l2 row of the token
 * with a larger seq received at or before B, folded to the last size per level (a venue `book` message on that
 * tape replaces the whole book; size 0 removes a level).
 */

/** A window whose both ends are set: a computed pull has no open end (its rows are generated per boundary). */
export type Bounded = { start: bigint; end: bigint };

const SIDE = `CASE WHEN lower(side) IN ('buy', 'bid', 'bids') THEN 'bid' WHEN lower(side) IN ('sell', 'ask', 'asks') THEN 'ask' END`;
const MIN_SEQ = '-9223372036854775807';

export const INTERVAL_BOOK_SHAPE: RowShape = {
  timestamps: ['timestamp', 'book_timestamp'],
  timeUnit: 'ms',
  decimals: ['best_bid', 'best_ask', 'mid', 'spread'],
  levels: ['bids', 'asks'],
};

export const TBBO_SHAPE: RowShape = {
  timestamps: ['timestamp', 'recv_timestamp', 'quote_timestamp'],
  timeUnit: 'ms',
  decimals: ['price', 'size', 'bid_price', 'bid_size', 'ask_price', 'ask_size'],
  text: ['seq', 'quote_seq'],
};

/** The boundaries of a window: aligned to the interval, first at or after start, all before end. */
export function boundaries(tf: Timeframe, w: Bounded): { first: bigint; count: bigint } {
  const first = bucketCeil(tf, w.start);
  const step = BigInt(tf.seconds) * 1_000_000n;
  return { first, count: first >= w.end ? 0n : (w.end - first + step - 1n) / step };
}

/** `(VALUES ($tok0), …)` of the tokens: the one place their ids enter the statement, bound. */
function tokenValues(tokens: readonly string[], params: Params): string {
  if (tokens.length === 0) return `(SELECT NULL::VARCHAR AS asset_id WHERE false)`;
  return `(VALUES ${tokens.map((t, i) => ((params[`tok${i}`] = t), `($tok${i})`)).join(', ')}) tok(asset_id)`;
}

/**
 * Rows of a data set for the tokens from the newest row at or before `from` (per token; a quiet book may be days
 * old) up to `to`. The anchor lookup reads only that token's row groups (files are sorted by asset_id, ts).
 */
function sinceAnchor(lake: Lake, name: 'book_snapshots' | 'top_of_book', cols: string, upTo = '$to'): string {
  const src = lake.from(name);
  return `(SELECT ${cols} FROM ${src} s
    LEFT JOIN (SELECT asset_id AS a_id, max(ts) AS a_ts FROM ${src} WHERE asset_id IN (SELECT asset_id FROM tok) AND ts <= $from AND date <= $from_date GROUP BY 1) a
      ON a.a_id = s.asset_id
    WHERE s.asset_id IN (SELECT asset_id FROM tok) AND s.ts <= ${upTo} AND s.date <= $to_date AND s.ts >= coalesce(a.a_ts, $from))`;
}

/**
 * The book of each token at every boundary of the window, to `depth` levels a side (best first), one row per
 * token and boundary at which the token has a book (none before its first snapshot or tape row).
 * `bid_levels`/`ask_levels` count the whole book; `book_timestamp` is when it last changed (snapshot or tape).
 */
export function intervalBookDownload(
  lake: Lake,
  tokens: readonly string[],
  tf: Timeframe,
  w: Bounded,
  depth: number,
  limit: number,
  format: CopyFormat,
): Query {
  // One statement per UTC day (or per interval, when longer) of the window, unioned in order: each piece's joins,
  // folds and sort hold one day, so memory does not grow with the window. DuckDB keeps the union's order (insertion
  // order is preserved), as the per-token trade files rely on too.
  const step = BigInt(tf.seconds) * 1_000_000n;
  const chunk = step > DAY_MICROS ? step : DAY_MICROS;
  const pieces: Query[] = [];
  for (let a = w.start; a < w.end;) {
    const b = ((a + chunk) / chunk) * chunk < w.end ? ((a + chunk) / chunk) * chunk : w.end;
    if (boundaries(tf, { start: a, end: b }).count > 0n)
      pieces.push(suffixParams(intervalBookSelect(lake, tokens, tf, { start: a, end: b }, depth), `d${pieces.length}`));
    a = b;
  }
  if (pieces.length <= 1) return asFile(pieces[0] ?? intervalBookSelect(lake, tokens, tf, w, depth), INTERVAL_BOOK_SHAPE, format, limit);
  const params: Params = Object.assign({}, ...pieces.map((p) => p.params));
  return asFile(query(pieces.map((p) => `(${p.sql})`).join('\nUNION ALL\n'), params), INTERVAL_BOOK_SHAPE, format, limit);
}

/** The rows of intervalBookDownload over one piece of the window, ordered (boundary, token). */
function intervalBookSelect(lake: Lake, tokens: readonly string[], tf: Timeframe, w: Bounded, depth: number): Query {
  const { first, count } = boundaries(tf, w);
  const step = BigInt(tf.seconds) * 1_000_000n;
  const last = count === 0n ? first : first + (count - 1n) * step;
  const params: Params = {
    first_us: first,
    stop_us: last + 1n,
    step_us: step,
    depth,
    from: tsParam(first),
    from_date: dateOf(first),
    to: tsParam(last),
    to_date: dateOf(last),
  };
  const tok = tokenValues(tokens, params);
  const snaps = sinceAnchor(lake, 'book_snapshots', 's.asset_id, s.ts, s.seq, s.condition_id, s.bids, s.asks');
  const sql = `WITH tok AS (SELECT * FROM ${tok}),
bounds AS (
  SELECT asset_id, make_timestamp(b) AS boundary
  FROM tok CROSS JOIN range($first_us::BIGINT, $stop_us::BIGINT, $step_us::BIGINT) r(b)
),
-- One row per (token, stamp, seq): a venue book and an interval snapshot can share both, with the same levels.
stored AS (SELECT DISTINCT ON (asset_id, ts, seq) * FROM ${snaps}),
snaps AS (SELECT asset_id, ts, max(seq) AS seq FROM stored GROUP BY asset_id, ts),
pick AS (
  SELECT b.asset_id, b.boundary, s.ts AS snap_ts, s.seq AS snap_seq
  FROM bounds b ASOF LEFT JOIN snaps s ON s.asset_id = b.asset_id AND b.boundary >= s.ts
),
-- Each tape row keyed by the snapshot it follows (the newest with a smaller seq), so a boundary finds the rows
-- after its snapshot by equality: a join on the token alone would compare every boundary with every row of it.
-- Snapshots are made by replaying the tape in seq order, so a later snapshot is stamped later and the rows after
-- it were received after its stamp: they are never at or before a boundary whose newest snapshot is an earlier one.
tape AS (
  SELECT t.*, s.seq AS base_seq
  FROM (
    SELECT asset_id, ${SIDE} AS side, price, size, is_snapshot, seq, level_idx, recv_ts
    FROM ${lake.from('l2')}
    WHERE asset_id IN (SELECT asset_id FROM tok) AND recv_ts <= $to AND date <= $to_date
      AND seq > coalesce((SELECT min(seq) FROM snaps), ${MIN_SEQ})
  ) t ASOF LEFT JOIN snaps s ON s.asset_id = t.asset_id AND t.seq > s.seq
),
applied AS (
  SELECT p.asset_id, p.boundary, t.side, t.price, t.size, t.is_snapshot, t.seq, t.level_idx, t.recv_ts
  FROM pick p JOIN tape t
    ON t.asset_id = p.asset_id AND coalesce(t.base_seq, ${MIN_SEQ}) = coalesce(p.snap_seq, ${MIN_SEQ}) AND t.recv_ts <= p.boundary
),
summary AS (
  SELECT asset_id, boundary, max(seq) FILTER (WHERE is_snapshot) AS reset_seq, max(recv_ts) AS last_ts
  FROM applied GROUP BY asset_id, boundary
),
levels AS (
  SELECT a.asset_id, a.boundary, a.side, a.price, arg_max(a.size, (a.seq, a.level_idx)) AS size
  FROM applied a JOIN summary m USING (asset_id, boundary)
  WHERE a.side IS NOT NULL AND a.seq >= coalesce(m.reset_seq, ${MIN_SEQ})
  GROUP BY a.asset_id, a.boundary, a.side, a.price
),
changes AS (
  SELECT asset_id, boundary,
    list(price) FILTER (WHERE side = 'bid') AS bid_touched,
    list(price) FILTER (WHERE side = 'ask') AS ask_touched,
    list({'price': price, 'size': size}) FILTER (WHERE side = 'bid' AND size > 0) AS bid_set,
    list({'price': price, 'size': size}) FILTER (WHERE side = 'ask' AND size > 0) AS ask_set
  FROM levels GROUP BY asset_id, boundary
),
books AS (
  SELECT p.asset_id, p.boundary, bs.condition_id,
    CASE WHEN m.reset_seq IS NULL THEN p.snap_ts END AS snapshot_ts, m.last_ts,
    -- A stored snapshot's levels are best first already: only a boundary with tape after it needs the merge.
    CASE WHEN m.asset_id IS NULL THEN coalesce(bs.bids, []) ELSE list_reverse_sort(list_concat(
      list_filter(CASE WHEN m.reset_seq IS NULL THEN coalesce(bs.bids, []) ELSE [] END, x -> NOT list_contains(coalesce(c.bid_touched, []), x.price)),
      coalesce(c.bid_set, []))) END AS all_bids,
    CASE WHEN m.asset_id IS NULL THEN coalesce(bs.asks, []) ELSE list_sort(list_concat(
      list_filter(CASE WHEN m.reset_seq IS NULL THEN coalesce(bs.asks, []) ELSE [] END, x -> NOT list_contains(coalesce(c.ask_touched, []), x.price)),
      coalesce(c.ask_set, []))) END AS all_asks
  FROM pick p
  LEFT JOIN summary m USING (asset_id, boundary)
  LEFT JOIN changes c USING (asset_id, boundary)
  LEFT JOIN stored bs ON bs.asset_id = p.asset_id AND bs.ts = p.snap_ts AND bs.seq = p.snap_seq
  WHERE p.snap_seq IS NOT NULL OR m.asset_id IS NOT NULL
)
SELECT coalesce(b.condition_id, tk.market_id) AS market_id, b.asset_id, tk.outcome_index AS outcome, b.boundary AS "timestamp",
  greatest(b.snapshot_ts, b.last_ts) AS book_timestamp,
  all_bids[1].price AS best_bid, all_asks[1].price AS best_ask,
  (all_bids[1].price + all_asks[1].price) / 2 AS mid, all_asks[1].price - all_bids[1].price AS spread,
  len(all_bids) AS bid_levels, len(all_asks) AS ask_levels,
  list_slice(all_bids, 1, $depth) AS bids, list_slice(all_asks, 1, $depth) AS asks
FROM books b LEFT JOIN (SELECT t.token_id, t.outcome_index, m.condition_id AS market_id FROM ${lake.from('tokens')} t
  LEFT JOIN ${lake.from('markets')} m ON m.id = t.market_id) tk ON tk.token_id = b.asset_id
ORDER BY b.boundary, b.asset_id`;
  return query(sql, params);
}

/**
 * Every venue trade print (the tape's `last_trade_price`, lake `last_trades`) of the tokens in the window, with
 * the best bid and ask (price and size) of the top of book in force just before it: the newest top_of_book row
 * of the token received before the print (smaller seq: seq orders arrival across the tape's messages). NULL
 * quote columns: no quote had arrived yet. Oldest first (time, token, seq).
 */
export function tbboDownload(lake: Lake, tokens: readonly string[], w: Bounded, limit: number, format: CopyFormat): Query {
  const params: Params = {
    start: tsParam(w.start),
    end: tsParam(w.end),
    part_from: dateOf(w.start),
    part_to: dateOf(w.end),
    from: tsParam(w.start),
    from_date: dateOf(w.start),
    // A print is stamped with the venue's time but joined by arrival: one received after `end` needs the
    // quotes received before it, so quotes run to the last print's receive time (and the day after `end`).
    to_date: dateOf(w.end + DAY_MICROS),
  };
  const tok = tokenValues(tokens, params);
  const quotes = sinceAnchor(
    lake,
    'top_of_book',
    's.asset_id, s.ts, s.seq, s.best_bid, s.best_bid_size, s.best_ask, s.best_ask_size',
    '(SELECT max(recv_ts) FROM trades)',
  );
  const sql = `WITH tok AS (SELECT * FROM ${tok}),
trades AS (
  SELECT ts, recv_ts, condition_id, asset_id, side, price, size, fee_rate_bps, transaction_hash, seq
  FROM ${lake.from('last_trades')}
  WHERE asset_id IN (SELECT asset_id FROM tok) AND ts >= $start AND ts < $end AND date >= $part_from AND date <= $part_to
),
quotes AS (SELECT * FROM ${quotes})
SELECT t.condition_id AS market_id, t.asset_id, t.ts AS "timestamp", t.recv_ts AS recv_timestamp, t.side, t.price, t.size,
  t.fee_rate_bps, t.transaction_hash, t.seq,
  q.best_bid AS bid_price, q.best_bid_size AS bid_size, q.best_ask AS ask_price, q.best_ask_size AS ask_size,
  q.ts AS quote_timestamp, q.seq AS quote_seq
FROM trades t ASOF LEFT JOIN quotes q ON q.asset_id = t.asset_id AND t.seq > q.seq
ORDER BY t.ts, t.asset_id, t.seq`;
  return asFile(query(sql, params), TBBO_SHAPE, format, limit);
}
