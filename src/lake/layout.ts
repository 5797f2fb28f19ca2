import path from 'node:path';

/**
 * The lake's contract: every data set, its directory, partition key, sort order, natural key and columns.
 * Ingest writes exactly these columns; the API and downloads read them. lake/README.md documents the same
 * table for people and other Parquet tools — keep the two in step.
 *
 * Prices are DECIMAL(10,6) and sizes DECIMAL(18,6): the venue quotes at most 4 decimals on prices and 6 on
 * sizes (USDC and outcome shares both have 6 on chain), so decimals keep every value exact and Parquet stores
 * them as plain int64. Timestamps are TIMESTAMP (microseconds) and always UTC. Token ids are VARCHAR.
 */

export type PartitionKind = 'month' | 'date' | 'none';

export type DatasetDef = Readonly<{
  /** Directory under the lake root. */
  dir: string;
  /** Hive partition: month=YYYY-MM or date=YYYY-MM-DD derived from `partitionColumn`; 'none' is one file. */
  partition: PartitionKind;
  partitionColumn?: string;
  /**
   * Order of rows inside every file: the queries that matter filter on the first key. The first key must be a
   * function of the natural key (the same trade id always has the same token): an append checks for duplicates
   * only among stored rows with the batch's first-key values (ingest/partitions.ts).
   */
  sortBy: readonly string[];
  /** Rows equal on these columns are the same fact; ingest keeps one. */
  naturalKey: readonly string[];
  /**
   * Which row wins when a staged row meets an existing one with the same natural key: 'keep' (default) for
   * facts that never change, 'replace' for data derived at ingest and recomputed (candles).
   */
  onConflict?: 'keep' | 'replace';
  /**
   * With 'replace': the only columns a re-derived row can change (default: any). The merge then compares the
   * natural key and these, not whole stored rows (book_snapshots would otherwise read every stored bids/asks list).
   */
  replaceColumns?: readonly string[];
  /**
   * Rows per Parquet row group (default 122,880). Smaller for wide rows read one at a time: a point lookup
   * decodes a whole row group's column chunk.
   */
  rowGroupSize?: number;
  /** Column name → DuckDB type, in file order. */
  columns: Readonly<Record<string, string>>;
  /**
   * Columns added after the data set's first files were written (the tape-integrity flags): files of an older
   * lake lack them, so every reader reads the data set with `union_by_name` and gets NULL there (see lake/README.md).
   */
  addedColumns?: readonly string[];
}>;

export const PRICE = 'DECIMAL(10,6)';
export const SIZE = 'DECIMAL(18,6)';
const LEVEL = `STRUCT(price ${PRICE}, size ${SIZE})[]`;
/** raw's columns, which its market index (raw_by_market) repeats after its own condition_id. */
const RAW_COLUMNS = {
  recv_ts: 'TIMESTAMP',
  seq: 'BIGINT',
  event_types: 'VARCHAR[]',
  condition_ids: 'VARCHAR[]',
  frame: 'VARCHAR',
} as const;

export const DATASETS = {
  markets: {
    dir: 'catalog/markets',
    partition: 'none',
    sortBy: ['id'],
    naturalKey: ['condition_id'],
    columns: {
      id: 'VARCHAR',
      id_derived: 'BOOLEAN',
      condition_id: 'VARCHAR',
      question_id: 'VARCHAR',
      event_id: 'VARCHAR',
      slug: 'VARCHAR',
      question: 'VARCHAR',
      description: 'VARCHAR',
      category: 'VARCHAR',
      outcomes: 'VARCHAR[]',
      outcome_prices: 'DOUBLE[]',
      outcome_token_ids: 'VARCHAR[]',
      active: 'BOOLEAN',
      closed: 'BOOLEAN',
      resolved: 'BOOLEAN',
      neg_risk: 'BOOLEAN',
      winning_outcome: 'INTEGER',
      resolution_date: 'TIMESTAMP',
      volume: 'DOUBLE',
      volume_24h: 'DOUBLE',
      liquidity: 'DOUBLE',
      start_date: 'TIMESTAMP',
      end_date: 'TIMESTAMP',
      created_at: 'TIMESTAMP',
      series_id: 'VARCHAR',
      tick_size: PRICE,
      trade_count: 'BIGINT',
      orderbook_count: 'BIGINT',
      data_from: 'TIMESTAMP',
      data_to: 'TIMESTAMP',
      sources: 'VARCHAR[]',
      updated_at: 'TIMESTAMP',
    },
  },
  tokens: {
    dir: 'catalog/tokens',
    partition: 'none',
    sortBy: ['token_id'],
    naturalKey: ['token_id'],
    columns: {
      token_id: 'VARCHAR',
      market_id: 'VARCHAR',
      condition_id: 'VARCHAR',
      outcome_index: 'INTEGER',
      outcome_label: 'VARCHAR',
    },
  },
  series: {
    dir: 'catalog/series',
    partition: 'none',
    sortBy: ['series_id'],
    naturalKey: ['series_id'],
    columns: {
      series_id: 'VARCHAR',
      slug: 'VARCHAR',
      name: 'VARCHAR',
      description: 'VARCHAR',
      category: 'VARCHAR',
      asset_class: 'VARCHAR',
      asset: 'VARCHAR',
      asset_symbol: 'VARCHAR',
      timeframe: 'VARCHAR',
      recurrence: 'VARCHAR',
    },
  },
  trades: {
    dir: 'trades',
    partition: 'month',
    partitionColumn: 'ts',
    sortBy: ['token_id', 'ts', 'log_index'],
    naturalKey: ['id'],
    columns: {
      id: 'VARCHAR',
      token_id: 'VARCHAR',
      condition_id: 'VARCHAR',
      ts: 'TIMESTAMP',
      block_number: 'BIGINT',
      transaction_hash: 'VARCHAR',
      log_index: 'INTEGER',
      order_hash: 'VARCHAR',
      outcome_index: 'INTEGER',
      outcome_label: 'VARCHAR',
      side: 'VARCHAR',
      price: PRICE,
      size: SIZE,
      usd_value: SIZE,
      maker: 'VARCHAR',
      taker: 'VARCHAR',
      fee: SIZE,
      collateral: 'VARCHAR',
    },
  },
  candles_1m: {
    dir: 'candles_1m',
    partition: 'month',
    partitionColumn: 'bucket',
    // ingest/candles.ts recomputes every candle of a touched token-month; the new rows must win.
    onConflict: 'replace',
    sortBy: ['token_id', 'bucket'],
    naturalKey: ['token_id', 'bucket'],
    columns: {
      token_id: 'VARCHAR',
      bucket: 'TIMESTAMP',
      open: PRICE,
      high: PRICE,
      low: PRICE,
      close: PRICE,
      volume: SIZE,
      usd_volume: SIZE,
      trade_count: 'BIGINT',
    },
  },
  candles_1h: {
    dir: 'candles_1h',
    partition: 'month',
    partitionColumn: 'bucket',
    // Rolled up from candles_1m at ingest (ingest/candles.ts), for the same touched token-months; the
    // 1h-and-coarser OHLCV reads one row an hour instead of sixty (Databento keeps ohlcv-1m and ohlcv-1h alike).
    onConflict: 'replace',
    sortBy: ['token_id', 'bucket'],
    naturalKey: ['token_id', 'bucket'],
    columns: {
      token_id: 'VARCHAR',
      bucket: 'TIMESTAMP',
      open: PRICE,
      high: PRICE,
      low: PRICE,
      close: PRICE,
      volume: SIZE,
      usd_volume: SIZE,
      trade_count: 'BIGINT',
    },
  },
  l2: {
    dir: 'l2',
    partition: 'date',
    partitionColumn: 'recv_ts',
    sortBy: ['asset_id', 'seq', 'level_idx'],
    naturalKey: ['asset_id', 'ts', 'hash', 'is_snapshot', 'side', 'price', 'size'],
    columns: {
      recv_ts: 'TIMESTAMP',
      ts: 'TIMESTAMP',
      condition_id: 'VARCHAR',
      asset_id: 'VARCHAR',
      side: 'VARCHAR',
      price: PRICE,
      size: SIZE,
      is_snapshot: 'BOOLEAN',
      hash: 'VARCHAR',
      seq: 'BIGINT',
      level_idx: 'INTEGER',
      after_gap: 'BOOLEAN',
    },
    addedColumns: ['after_gap'],
  },
  raw: {
    dir: 'raw',
    partition: 'date',
    partitionColumn: 'recv_ts',
    sortBy: ['recv_ts', 'seq'],
    naturalKey: ['recv_ts', 'frame'],
    columns: RAW_COLUMNS,
  },
  /**
   * raw again, clustered by market: one row per frame and market it holds (a frame of two markets twice; a frame
   * of none not at all). Time-ordered raw spreads a market's frames through every row group, so a read of one
   * market decodes the whole day's frames; here they are contiguous and the row groups' min/max on condition_id
   * skip the rest. The market replay reads a day from here when its partition exists, which ingest keeps
   * true only when it indexes every frame of that day with a market (ingest/raw-index.ts).
   */
  raw_by_market: {
    dir: 'raw_by_market',
    partition: 'date',
    partitionColumn: 'recv_ts',
    sortBy: ['condition_id', 'recv_ts', 'seq'],
    naturalKey: ['condition_id', 'recv_ts', 'frame'],
    // Small groups: the skipping is per row group, and a quiet market's frames are a few hundred a day.
    rowGroupSize: 4096,
    columns: { condition_id: 'VARCHAR', ...RAW_COLUMNS },
  },
  last_trades: {
    dir: 'last_trades',
    partition: 'date',
    partitionColumn: 'ts',
    sortBy: ['asset_id', 'ts', 'seq'],
    naturalKey: ['asset_id', 'ts', 'price', 'size', 'side'],
    columns: {
      ts: 'TIMESTAMP',
      recv_ts: 'TIMESTAMP',
      condition_id: 'VARCHAR',
      asset_id: 'VARCHAR',
      side: 'VARCHAR',
      price: PRICE,
      size: SIZE,
      fee_rate_bps: 'INTEGER',
      transaction_hash: 'VARCHAR',
      seq: 'BIGINT',
    },
  },
  book_snapshots: {
    dir: 'book_snapshots',
    // `verified` turns true when a later batch's `book` checkpoint closes the row's stretch (ingest/integrity/).
    onConflict: 'replace',
    replaceColumns: ['verified'],
    // A book-at-instant lookup reads one snapshot's bids/asks lists, and decodes its whole row group to get them.
    rowGroupSize: 2048,
    partition: 'date',
    partitionColumn: 'ts',
    sortBy: ['asset_id', 'ts', 'seq'],
    naturalKey: ['asset_id', 'ts', 'seq', 'reason'],
    columns: {
      ts: 'TIMESTAMP',
      condition_id: 'VARCHAR',
      asset_id: 'VARCHAR',
      reason: 'VARCHAR',
      seq: 'BIGINT',
      best_bid: PRICE,
      best_ask: PRICE,
      bid_levels: 'INTEGER',
      ask_levels: 'INTEGER',
      bids: LEVEL,
      asks: LEVEL,
      verified: 'BOOLEAN',
    },
    addedColumns: ['verified'],
  },
  top_of_book: {
    dir: 'top_of_book',
    onConflict: 'replace',
    replaceColumns: ['verified'],
    partition: 'date',
    partitionColumn: 'ts',
    sortBy: ['asset_id', 'ts', 'seq'],
    naturalKey: ['asset_id', 'seq'],
    columns: {
      ts: 'TIMESTAMP',
      condition_id: 'VARCHAR',
      asset_id: 'VARCHAR',
      seq: 'BIGINT',
      best_bid: PRICE,
      best_bid_size: SIZE,
      best_ask: PRICE,
      best_ask_size: SIZE,
      mid: 'DECIMAL(11,7)',
      spread: PRICE,
      verified: 'BOOLEAN',
    },
    addedColumns: ['verified'],
  },
  /**
   * Venue checkpoints met in the book replay (ingest/integrity/): every `book` message compared with the book
   * replayed up to just before it, and the new-shape price_change top checks that failed. lake/README.md.
   */
  checkpoints: {
    dir: 'checkpoints',
    partition: 'date',
    partitionColumn: 'ts',
    sortBy: ['asset_id', 'ts', 'seq'],
    naturalKey: ['asset_id', 'seq', 'kind'],
    columns: {
      ts: 'TIMESTAMP',
      condition_id: 'VARCHAR',
      asset_id: 'VARCHAR',
      seq: 'BIGINT',
      kind: 'VARCHAR',
      ok: 'BOOLEAN',
      since_ts: 'TIMESTAMP',
    },
  },
  /**
   * Anomalies the replay found on the tape (gap, top_mismatch, off_tick, crossed, silence, disconnect, duplicate,
   * recv_backwards), and capture_disconnect: a recorder's outage, nothing recorded for the token (capture files).
   */
  incidents: {
    dir: 'incidents',
    partition: 'date',
    partitionColumn: 'from_ts',
    sortBy: ['asset_id', 'from_ts', 'seq'],
    naturalKey: ['asset_id', 'kind', 'from_ts', 'seq'],
    columns: {
      asset_id: 'VARCHAR',
      condition_id: 'VARCHAR',
      kind: 'VARCHAR',
      from_ts: 'TIMESTAMP',
      to_ts: 'TIMESTAMP',
      seq: 'BIGINT',
      detail: 'VARCHAR',
    },
  },
  /**
   * Per token and UTC day: how much of the day's tape is proven by the venue's checkpoints. Derived from
   * checkpoints and incidents and recomputed for every day a batch touches or re-decides, so the new rows win.
   */
  coverage: {
    dir: 'coverage',
    partition: 'month',
    partitionColumn: 'date',
    onConflict: 'replace',
    sortBy: ['asset_id', 'date'],
    naturalKey: ['asset_id', 'date'],
    columns: {
      date: 'DATE',
      condition_id: 'VARCHAR',
      asset_id: 'VARCHAR',
      status: 'VARCHAR',
      seconds_verified: 'DOUBLE',
      seconds_degraded: 'DOUBLE',
      seconds_unverified: 'DOUBLE',
      checkpoints_passed: 'INTEGER',
      checkpoints_failed: 'INTEGER',
      messages: 'BIGINT',
      first_recv_ts: 'TIMESTAMP',
      last_recv_ts: 'TIMESTAMP',
    },
  },
  /**
   * Crypto-options trades of a Deribit-style venue (ingest/options.ts). Option prices are in units of the
   * underlying (BTC), iv in percent, index_price in USD; expiry/strike/option_type are parsed from the
   * instrument name (BTC-27JUN25-100000-C, expiring 08:00 UTC). Greeks are computed at read time in SQL.
   */
  options: {
    dir: 'options',
    partition: 'month',
    partitionColumn: 'ts',
    sortBy: ['underlying', 'ts', 'trade_id'],
    naturalKey: ['venue', 'trade_id'],
    columns: {
      ts: 'TIMESTAMP',
      venue: 'VARCHAR',
      underlying: 'VARCHAR',
      instrument_name: 'VARCHAR',
      expiry: 'TIMESTAMP',
      strike: 'DOUBLE',
      option_type: 'VARCHAR',
      trade_id: 'VARCHAR',
      price: 'DOUBLE',
      iv: 'DOUBLE',
      index_price: 'DOUBLE',
      amount: 'DOUBLE',
      direction: 'VARCHAR',
    },
  },
  /**
   * Point-in-time market definitions (docs/catalogue-format.md): one row per change a source's poll observed, the
   * definition in force at t being, per source, the row with the latest valid_from <= t. Appends only: a poll
   * that changes nothing adds nothing.
   */
  market_definitions: {
    dir: 'catalog/market_definitions',
    partition: 'month',
    partitionColumn: 'valid_from',
    sortBy: ['condition_id', 'source', 'valid_from'],
    naturalKey: ['condition_id', 'source', 'valid_from'],
    columns: {
      condition_id: 'VARCHAR',
      source: 'VARCHAR',
      valid_from: 'TIMESTAMP',
      market_id: 'VARCHAR',
      question: 'VARCHAR',
      slug: 'VARCHAR',
      outcomes: 'VARCHAR[]',
      outcome_token_ids: 'VARCHAR[]',
      tick_size: PRICE,
      min_order_size: SIZE,
      active: 'BOOLEAN',
      closed: 'BOOLEAN',
      accepting_orders: 'BOOLEAN',
      neg_risk: 'BOOLEAN',
      end_date: 'TIMESTAMP',
      resolved: 'BOOLEAN',
      winning_outcome: 'INTEGER',
      /** md5 of the definition fields above (not valid_from): equal fingerprints are the same definition. */
      fingerprint: 'VARCHAR',
      /** The poll file it came from (its base name). */
      poll: 'VARCHAR',
    },
  },
  /** Every log of the venue's exchange contracts, decoded (docs/chain-format.md). */
  chain_logs: {
    dir: 'chain_logs',
    partition: 'month',
    partitionColumn: 'block_ts',
    sortBy: ['block_number', 'log_index'],
    naturalKey: ['block_number', 'log_index'],
    columns: {
      block_number: 'BIGINT',
      block_hash: 'VARCHAR',
      block_ts: 'TIMESTAMP',
      transaction_hash: 'VARCHAR',
      transaction_index: 'INTEGER',
      log_index: 'INTEGER',
      address: 'VARCHAR',
      exchange: 'VARCHAR',
      event: 'VARCHAR',
      /** The decoded arguments as JSON text (uint256 as decimal strings); NULL when no ABI knows the topic. */
      args: 'VARCHAR',
      topics: 'VARCHAR[]',
      data: 'VARCHAR',
    },
  },
} as const satisfies Record<string, DatasetDef>;

export type DatasetName = keyof typeof DATASETS;

/** Directory of one partition value, e.g. lake/trades/month=2025-03. */
export function partitionDir(lakeDir: string, name: DatasetName, value: string | null): string {
  const def: DatasetDef = DATASETS[name];
  const dir = path.join(lakeDir, def.dir);
  if (def.partition === 'none') return dir;
  if (value === null) throw new Error(`data set ${name} needs a partition value`);
  return path.join(dir, `${def.partition}=${value}`);
}

/**
 * `read_parquet` over `list` (SQL text of a file list) with `options` (SQL text starting with a comma). A data set
 * with columns added after the lake's first files reads with union_by_name and a typed empty relation of every
 * column by name beside it, so a file written before a column existed reads it as NULL — also when no file of the
 * list has it yet. Filters and projections still reach the Parquet scan (the empty side holds no row).
 */
export function parquetScan(def: DatasetDef, list: string, options = ''): string {
  if (!def.addedColumns || def.addedColumns.length === 0) return `read_parquet(${list}${options})`;
  const cols = Object.entries(def.columns as Record<string, string>)
    .map(([c, t]) => `NULL::${t} AS "${c}"`)
    .join(', ');
  return `(SELECT * FROM read_parquet(${list}${options}, union_by_name = true) UNION ALL BY NAME SELECT ${cols} WHERE false)`;
}

/** `CREATE TABLE` column list for staging tables with the data set's exact schema. */
export function columnDdl(name: DatasetName): string {
  return Object.entries(DATASETS[name].columns as Record<string, string>)
    .map(([c, t]) => `"${c}" ${t}`)
    .join(', ');
}
