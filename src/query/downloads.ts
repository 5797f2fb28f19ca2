import { sqlIdent, type Query } from '../lake/duckdb.js';
import type { CopyFormat } from '../lake/stream.js';
import type { Timeframe } from '../timeframe.js';
import { eventTypesCond, perToken, query, windowWhere, type Params, type Window } from './common.js';
import type { Lake } from '../lake/sources.js';
import { bucketExpr, ohlcvSelect } from './ohlcv.js';
import { bookSnapshotsSelect, topOfBookSelect } from './orderbook.js';
import { TRADE_COLUMNS } from './trades.js';
import { isoSql, shapeReplacements, type RowShape, type TimeUnit } from '../lake/values.js';
import { BOOK_SHAPE, CANDLE_SHAPE, TOP_OF_BOOK_SHAPE, TRADE_SHAPE } from './shapes.js';

const TRADE_SCAN =
  'id, token_id, ts, block_number, transaction_hash, log_index, outcome_index, outcome_label, side, price, size, usd_value, maker, taker, fee, collateral';

/**
 * SELECT builders for file downloads and exports (helper F). Each returns `{ sql, params }` for a plain
 * SELECT that src/lake/stream.ts wraps in `COPY (…) TO fifo`. Column names follow the anchor's JSON
 * records (trade rows carry the outcome token id in `market_id`, order-book rows the condition id).
 *
 * Per format: Parquet keeps TIMESTAMP columns and nested lists; CSV and JSON get each resource's ISO 8601 text
 * (./shapes.ts: the form the JSON endpoints write too) and, in CSV, nested book levels as JSON text. Decimals
 * become DOUBLE: every value of the lake's DECIMAL(10,6)/(18,6) round-trips exactly through a double.
 *
 * Order: a file is oldest first in every format — read from its start, and a row cap keeps the earliest rows
 * (the official SDK relies on it) — where the JSON list endpoints page from the newest (the anchor's order for
 * trades and OHLCV). Outcomes: a market's file holds every outcome (the anchor ships both), one when market_id
 * is that outcome's token id; the OHLCV endpoint answers one outcome per request (the anchor's `outcome`).
 */

/** Which tokens a pull covers: explicit token ids, every token of a series' markets, or every token (catalogue series). */
export type TokenSel = { tokens: readonly string[] } | { seriesId: string } | { all: true };

/** A timestamp column of a file at `unit`: ISO text in CSV and JSON (./shapes.ts), TIMESTAMP in Parquet. */
function ts(col: string, format: CopyFormat, unit: TimeUnit): string {
  return format === 'parquet' ? col : isoSql(col, unit);
}

function limitClause(limit: number, params: Params): string {
  params.limit = limit;
  return 'LIMIT $limit';
}

/**
 * Wraps a plain SELECT (the query API's builders in src/query/*.ts, which order their rows) in the resource's
 * column forms (./shapes.ts, the same the JSON API writes) and the row cap. The inner ORDER BY survives the
 * projection and LIMIT: DuckDB keeps insertion order (preserve_insertion_order is on), and the download tests
 * check the order.
 */
export function asFile(inner: Query, shape: RowShape, format: CopyFormat, limit: number): Query {
  const params: Params = { ...inner.params };
  const repl = shapeReplacements(shape, format);
  const select = repl.length ? `* REPLACE (${repl.join(', ')})` : '*';
  return query(`SELECT ${select} FROM (${inner.sql}) ${limitClause(limit, params)}`, params);
}

/** Renames a builder's `$name` parameters to `$name_<suffix>`, so several builders' queries can be unioned. */
export function suffixParams(q: Query, suffix: string): Query {
  let sql = q.sql;
  const params: Params = {};
  // Longest names first, so `$start` never rewrites the front of `$start_x`; \b stops at the name's end.
  for (const k of Object.keys(q.params).sort((a, b) => b.length - a.length)) {
    sql = sql.replace(new RegExp(`\\$${k}\\b`, 'g'), () => `$${k}_${suffix}`);
    params[`${k}_${suffix}`] = q.params[k]!;
  }
  return query(sql, params);
}

/** A series' tokens: every outcome token of the markets the catalogue files under the series. */
function seriesTokens(lake: Lake, params: Params, seriesId: string): string {
  params.series_id = seriesId;
  return `SELECT t.token_id FROM ${lake.from('tokens')} t JOIN ${lake.from('markets')} m ON m.id = t.market_id WHERE m.series_id = $series_id`;
}

/** The token filter of a series pull; none for a catalogue series (every market), which keeps the scan a plain one. */
function seriesWhere(lake: Lake, params: Params, sel: { seriesId: string } | { all: true }): string[] {
  return 'all' in sel ? ['true'] : [`token_id IN (${seriesTokens(lake, params, sel.seriesId)})`];
}

export function tradesDownload(lake: Lake, sel: TokenSel, w: Window, limit: number, format: CopyFormat): Query {
  if ('tokens' in sel) {
    // File order, no ORDER BY: the trade files are sorted by (token, ts, log_index) and listed month by month,
    // so one scan per token (src/query/common.ts perToken) streams each outcome oldest first in constant
    // memory. An ORDER BY over the window (tradesSelect's, for the JSON API) is a sort whose memory grows with
    // the window. Rows come grouped by outcome token, each in time order.
    const params: Params = {};
    const where = windowWhere('ts', w, params, { column: 'month' });
    const rows = perToken(lake.from('trades'), 'token_id', sel.tokens, TRADE_SCAN, where, params);
    return asFile(query(`SELECT ${TRADE_COLUMNS} FROM ${rows} t`, params), TRADE_SHAPE, format, limit);
  }
  const params: Params = {};
  const where = [...seriesWhere(lake, params, sel), ...windowWhere('ts', w, params, { column: 'month' })];
  const inner = query(`SELECT ${TRADE_COLUMNS} FROM ${lake.from('trades')} WHERE ${where.join(' AND ')} ORDER BY ts, block_number, log_index, id`, params);
  return asFile(inner, TRADE_SHAPE, format, limit);
}

/**
 * Candles of any timeframe for every token of a market (the query API's per-token builder, one per
 * outcome, unioned) or of a series. Buckets and open/close rules are src/query/ohlcv.ts's.
 */
export function ohlcvDownload(
  lake: Lake,
  sel: { tokens: readonly { token_id: string; outcome_index: number }[] } | { seriesId: string } | { all: true },
  tf: Timeframe,
  w: Window,
  limit: number,
  format: CopyFormat,
): Query {
  if ('tokens' in sel) {
    if (sel.tokens.length === 0) return asFile(query('SELECT NULL::VARCHAR AS market_id WHERE false', {}), {}, format, limit);
    const parts = sel.tokens.map((t, i) =>
      suffixParams(ohlcvSelect(lake, { token: t.token_id, outcome: t.outcome_index, timeframe: tf, start: w.start, end: w.end }, 'asc'), `o${i}`),
    );
    const params: Params = Object.assign({}, ...parts.map((p) => p.params));
    const inner = query(`SELECT * FROM (${parts.map((p) => `(${p.sql})`).join(' UNION ALL ')}) ORDER BY "timestamp", outcome`, params);
    return asFile(inner, CANDLE_SHAPE, format, limit);
  }
  const params: Params = {};
  const fromCandles = tf.seconds % 60 === 0;
  const col = fromCandles ? 'bucket' : 'ts';
  const where = [...seriesWhere(lake, params, sel), ...windowWhere(col, w, params, { column: 'month' })];
  // The shared bucket expression: bound step/origin parameters were bigints, which DuckDB typed HUGEINT and
  // make_timestamp refused (a 500 on every series OHLCV download).
  const bucket = bucketExpr(col, tf);
  const agg = fromCandles
    ? `arg_min(open, bucket) AS open, max(high) AS high, min(low) AS low, arg_max(close, bucket) AS close, sum(volume) AS volume,
       sum(trade_count)::BIGINT AS trade_count`
    : `arg_min(price, (ts, block_number, log_index)) AS open, max(price) AS high, min(price) AS low,
       arg_max(price, (ts, block_number, log_index)) AS close, sum(size) AS volume, count(*) AS trade_count`;
  const inner = query(
    `SELECT c.*, t.outcome_index AS outcome FROM (
       SELECT token_id AS market_id, ${bucket} AS "timestamp", ${agg}
       FROM ${lake.from(fromCandles ? 'candles_1m' : 'trades')} WHERE ${where.join(' AND ')} GROUP BY token_id, "timestamp") c
     LEFT JOIN ${lake.from('tokens')} t ON t.token_id = c.market_id
     ORDER BY c."timestamp", c.market_id`,
    params,
  );
  return asFile(
    query(`SELECT market_id, outcome, "timestamp", open, high, low, close, volume, trade_count FROM (${inner.sql})`, inner.params),
    CANDLE_SHAPE,
    format,
    limit,
  );
}

/** Scope of book data: tokens of one market, or every market of a series. */
export type BookSel = { tokens: readonly string[] } | { seriesId: string };

function seriesBook(lake: Lake, name: 'book_snapshots' | 'top_of_book', cols: string, seriesId: string, w: Window): Query {
  const params: Params = {};
  const where = [`asset_id IN (${seriesTokens(lake, params, seriesId)})`, ...windowWhere('ts', w, params, { column: 'date' })];
  return query(`SELECT ${cols} FROM ${lake.from(name)} WHERE ${where.join(' AND ')} ORDER BY ts, asset_id, seq`, params);
}

/** Full-depth book snapshots, keyed by the market's condition id (`market_id`) and token (`asset_id`). */
export function orderbookDownload(lake: Lake, sel: BookSel, w: Window, limit: number, format: CopyFormat): Query {
  const inner =
    'tokens' in sel
      ? bookSnapshotsSelect(lake, sel.tokens, w)
      : seriesBook(
          lake,
          'book_snapshots',
          'condition_id AS market_id, asset_id, ts AS "timestamp", reason, seq, best_bid, best_ask, bid_levels, ask_levels, bids, asks',
          sel.seriesId,
          w,
        );
  return asFile(inner, BOOK_SHAPE, format, limit);
}

export function topOfBookDownload(lake: Lake, sel: BookSel, w: Window, limit: number, format: CopyFormat): Query {
  const inner =
    'tokens' in sel
      ? topOfBookSelect(lake, sel.tokens, w)
      : seriesBook(
          lake,
          'top_of_book',
          'condition_id AS market_id, asset_id, ts AS "timestamp", seq, best_bid, best_bid_size, best_ask, best_ask_size, mid, spread',
          sel.seriesId,
          w,
        );
  return asFile(inner, TOP_OF_BOOK_SHAPE, format, limit);
}

/**
 * Verbatim tape frames: `{recv_ts: epoch ms, frame: text}`, in capture order. The raw files are sorted by
 * (recv_ts, seq) and listed in date order, so no ORDER BY is needed: DuckDB keeps insertion order and the
 * pull streams in constant memory however long the window.
 */
export function rawFramesDownload(lake: Lake, eventTypes: readonly string[], conditionId: string | null, w: Window, limit: number | null): Query {
  const params: Params = {};
  const where = windowWhere('recv_ts', w, params, { column: 'date' });
  const types = eventTypesCond(eventTypes, params, 'event');
  if (types) where.push(types);
  if (conditionId) {
    params.condition_id = conditionId;
    where.push('list_contains(condition_ids, $condition_id)');
  }
  const sql = `SELECT epoch_ms(recv_ts) AS recv_ts, frame FROM ${lake.from('raw')}
  ${where.length ? `WHERE ${where.join(' AND ')}` : ''} ${limit === null ? '' : limitClause(limit, params)}`;
  return query(sql, params);
}

/** `FROM <source> WHERE <window on timeCol> [AND condition_id = …] [LIMIT]` shared by the flat tape files. */
function tapeFrom(
  lake: Lake,
  dataset: 'l2' | 'last_trades',
  timeCol: string,
  conditionId: string | null,
  w: Window,
  limit: number | null,
  params: Params,
): string {
  const where = windowWhere(timeCol, w, params, { column: 'date' });
  if (conditionId) {
    params.condition_id = conditionId;
    where.push('condition_id = $condition_id');
  }
  return `FROM ${lake.from(dataset)} ${where.length ? `WHERE ${where.join(' AND ')}` : ''} ${limit === null ? '' : limitClause(limit, params)}`;
}

/**
 * The normalized L2 tape (`shape=normalized`): the anchor's flat per-level depth rows first, under its names —
 * `recv_ts` (epoch milliseconds in every format, the unit of the anchor's raw records and of `shape=raw`),
 * `coin` (the book's instrument: the outcome token id), `side` (`bid`/`ask`), `level` (the level's 0-based
 * position in its venue message: the venue sends a `book`'s bids ascending then its asks descending, so it is
 * not a depth rank — ranking needs each message's whole side, a blocking sort over the pull), `price`, `size`
 * (the new total at that price; 0 removes it), `n_orders` (always NULL: the venue aggregates a level and never
 * says how many orders rest there) — then pmlake's own: the venue `timestamp`, `market_id` (condition id),
 * `is_snapshot` (the rows of a venue `book`), `after_gap` (the first rows after a gap the tape's checks found:
 * lake/README.md, tape integrity; false in a lake ingested before the checks), `hash`, `seq`. In file order (date, token, sequence, level): constant memory.
 */
export function l2LevelsDownload(lake: Lake, conditionId: string | null, w: Window, limit: number | null, format: CopyFormat): Query {
  const params: Params = {};
  const from = tapeFrom(lake, 'l2', 'recv_ts', conditionId, w, limit, params);
  const sql = `SELECT epoch_ms(recv_ts) AS recv_ts, asset_id AS coin, side, level_idx AS level, CAST(price AS DOUBLE) AS price,
    CAST(size AS DOUBLE) AS size, NULL::INTEGER AS n_orders, ${ts('ts', format, 'ms')} AS "timestamp", condition_id AS market_id, is_snapshot,
    coalesce(after_gap, false) AS after_gap, hash, seq
  ${from}`;
  return query(sql, params);
}

/** Venue trades seen on the tape (last_trade_price), flat. */
export function tapeTradesDownload(lake: Lake, conditionId: string | null, w: Window, limit: number | null, format: CopyFormat): Query {
  const params: Params = {};
  const from = tapeFrom(lake, 'last_trades', 'ts', conditionId, w, limit, params);
  const sql = `SELECT ${ts('ts', format, 'ms')} AS "timestamp", ${ts('recv_ts', format, 'ms')} AS recv_ts, condition_id AS market_id, asset_id,
    side, CAST(price AS DOUBLE) AS price, CAST(size AS DOUBLE) AS size, fee_rate_bps, transaction_hash, seq
  ${from}`;
  return query(sql, params);
}

/**
 * The rows a pull's SELECT returns, counted (for /raw/estimate: the download's own statement, so the count is
 * what it would send), with the summed length of one text column (a frame's captured bytes) when named.
 */
export function pullRowsQuery(q: Query, textColumn?: string): Query {
  const text = textColumn === undefined ? '' : `, coalesce(sum(strlen(${sqlIdent(textColumn)})), 0) AS text_bytes`;
  return query(`SELECT count(*) AS rows${text} FROM (${q.sql}) p`, q.params);
}

// ---------------------------------------------------------------------------------------------------------
// Options

export type OptionsSel = { venue: string; underlying: string; instrumentPrefix?: string | undefined };

function optionsWhere(sel: OptionsSel, w: Window, params: Params): string[] {
  params.venue = sel.venue;
  params.underlying = sel.underlying;
  const where = ['venue = $venue', 'underlying = $underlying', ...windowWhere('ts', w, params, { column: 'month' })];
  if (sel.instrumentPrefix) {
    params.prefix = sel.instrumentPrefix;
    where.push('starts_with(instrument_name, $prefix)');
  }
  return where;
}

export function optionsTradesDownload(lake: Lake, sel: OptionsSel, w: Window, limit: number, format: CopyFormat): Query {
  const params: Params = {};
  const where = optionsWhere(sel, w, params);
  const sql = `SELECT ${ts('ts', format, 'ms')} AS "timestamp", instrument_name, underlying, ${ts('expiry', format, 's')} AS expiry,
    strike, option_type, trade_id, price, iv, index_price, amount, direction
  FROM ${lake.from('options')} WHERE ${where.join(' AND ')} ORDER BY ts, trade_id ${limitClause(limit, params)}`;
  return query(sql, params);
}

/**
 * Standard normal CDF in SQL (DuckDB has no erf): Zelen & Severo's polynomial (Abramowitz & Stegun 26.2.17),
 * absolute error below 7.5e-8, mirrored for negative arguments. `x` is an expression built here, never input.
 */
export function normCdfSql(x: string): string {
  const a = `abs(${x})`;
  const t = `(1.0 / (1.0 + 0.2316419 * ${a}))`;
  const poly = `(${t} * (0.319381530 + ${t} * (-0.356563782 + ${t} * (1.781477937 + ${t} * (-1.821255978 + ${t} * 1.330274429)))))`;
  const upper = `(1.0 - ${normPdfSql(a)} * ${poly})`;
  return `(CASE WHEN ${x} >= 0 THEN ${upper} ELSE 1.0 - ${upper} END)`;
}

export function normPdfSql(x: string): string {
  return `(exp(-0.5 * (${x}) * (${x})) / sqrt(2.0 * pi()))`;
}

/**
 * Black-76 greeks per trade, from the venue's implied volatility at the trade: forward F = index price,
 * strike K, T = years to expiry (365-day year), sigma = iv / 100, no discounting (r = 0, the venue's
 * convention for coin-margined options). Units: delta per 1 of F; gamma per USD of F; vega in USD per one
 * volatility point (1%); theta in USD per calendar day. Trades at or after expiry get NULL greeks.
 */
export function optionsGreeksDownload(lake: Lake, sel: OptionsSel, w: Window, limit: number, format: CopyFormat): Query {
  const params: Params = {};
  const where = optionsWhere(sel, w, params);
  const base = `SELECT *, (epoch_us(expiry) - epoch_us(ts)) / (365.0 * 86400e6) AS t_years, iv / 100.0 AS sigma
    FROM ${lake.from('options')} WHERE ${where.join(' AND ')} ORDER BY ts, trade_id ${limitClause(limit, params)}`;
  // sqrt only of a positive time: DuckDB raises an error (not NaN) for the square root of a negative number.
  const rt = `SELECT *, sqrt(CASE WHEN t_years > 0 AND sigma > 0 THEN t_years END) AS rt FROM (${base})`;
  const d = `SELECT *, (ln(index_price / strike) + 0.5 * sigma * sigma * t_years) / (sigma * rt) AS d1 FROM (${rt})`;
  const sql = `SELECT ${ts('ts', format, 'ms')} AS "timestamp", instrument_name, underlying, ${ts('expiry', format, 's')} AS expiry, strike,
    option_type, trade_id, price, iv, index_price, amount, direction, t_years AS time_to_expiry,
    CASE WHEN option_type = 'C' THEN ${normCdfSql('d1')} ELSE ${normCdfSql('d1')} - 1.0 END AS delta,
    ${normPdfSql('d1')} / (index_price * sigma * rt) AS gamma,
    index_price * ${normPdfSql('d1')} * rt / 100.0 AS vega,
    -index_price * ${normPdfSql('d1')} * sigma / (2.0 * rt) / 365.0 AS theta
  FROM (${d})`;
  return query(sql, params);
}

/**
 * Rows, frame bytes and time range of every raw data set in one scan (FILTER per data set), values bound. A data
 * set is the list of event types its frames carry (src/downloads/catalog.ts RAW_DATASETS; empty = every frame);
 * column i describes data set i.
 */
export function rawDatasetsSummaryQuery(lake: Lake, datasets: ReadonlyArray<readonly string[]>): Query {
  const params: Params = {};
  const cols = datasets.map((eventTypes, i) => {
    const cond = eventTypesCond(eventTypes, params, `e${i}_`) ?? 'true';
    const f = `FILTER (WHERE ${cond})`;
    return `count(*) ${f} AS rows_${i}, coalesce(sum(strlen(frame)) ${f}, 0) AS bytes_${i}, min(recv_ts) ${f} AS first_${i}, max(recv_ts) ${f} AS last_${i}`;
  });
  return query(`SELECT ${cols.join(',\n  ')}\nFROM ${lake.from('raw')}`, params);
}
