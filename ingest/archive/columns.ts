import type { DuckDBConnection } from '@duckdb/node-api';

/**
 * The archive's v2 columns (docs/archive-format.md) and how each is read into the staging SQL's types
 * (sql/ingest/archive_stage.sql). Columns 1–5 are set on every row: a file without one of them is not an
 * archive file this ingest can read. Columns 6–16 belong to one event type each: a file without one is read
 * with that column NULL, and the ingest says so.
 */
export const REQUIRED = ['timestamp_received', 'timestamp', 'market', 'event_type', 'asset_id'] as const;
export const OPTIONAL = [
  'bids',
  'asks',
  'price',
  'size',
  'side',
  'best_bid',
  'best_ask',
  'fee_rate_bps',
  'transaction_hash',
  'old_tick_size',
  'new_tick_size',
] as const;
type Column = (typeof REQUIRED)[number] | (typeof OPTIONAL)[number];

/** The staged name and type of each column; the two timestamps become epoch milliseconds. */
const TARGET: Record<Column, { as: string; type: string }> = {
  timestamp_received: { as: 'recv_ms', type: 'BIGINT' },
  timestamp: { as: 'ts_ms', type: 'BIGINT' },
  market: { as: 'market', type: 'VARCHAR' },
  event_type: { as: 'event_type', type: 'VARCHAR' },
  asset_id: { as: 'asset_id', type: 'VARCHAR' },
  bids: { as: 'bids', type: 'VARCHAR' },
  asks: { as: 'asks', type: 'VARCHAR' },
  price: { as: 'price', type: 'DECIMAL(10,6)' },
  size: { as: 'size', type: 'DECIMAL(18,6)' },
  side: { as: 'side', type: 'VARCHAR' },
  best_bid: { as: 'best_bid', type: 'DECIMAL(10,6)' },
  best_ask: { as: 'best_ask', type: 'DECIMAL(10,6)' },
  fee_rate_bps: { as: 'fee_rate_bps', type: 'INTEGER' },
  transaction_hash: { as: 'transaction_hash', type: 'VARCHAR' },
  old_tick_size: { as: 'old_tick_size', type: 'DECIMAL(10,6)' },
  new_tick_size: { as: 'new_tick_size', type: 'DECIMAL(10,6)' },
};

const quoteIdent = (c: string): string => `"${c.replaceAll('"', '""')}"`;

/** The read of one present column, by its Parquet type as DuckDB sees it. */
function readAs(col: Column, type: string, plainMarket: boolean): string {
  const c = quoteIdent(col);
  const t = TARGET[col];
  if (col === 'timestamp_received' || col === 'timestamp') {
    if (type.startsWith('TIMESTAMP')) return `epoch_ms(${c})`;
    // Integer columns hold epoch milliseconds; text is parsed as a timestamp (UTC).
    if (/INT/.test(type)) return `CAST(${c} AS BIGINT)`;
    return `epoch_ms(TRY_CAST(${c} AS TIMESTAMP))`;
  }
  // market: fixed_size_binary[66] in the archive (BLOB here), ASCII 0x + 64 hex; VARCHAR elsewhere. CAST writes
  // a BLOB's bytes other than printable ASCII (and \ ' ") as \xNN, byte by byte: where no market has such a byte,
  // decode (UTF-8 as is) gives the same text far faster.
  if (col === 'market' && type === 'BLOB' && plainMarket) return `decode(${c})`;
  if (t.type === 'VARCHAR') return type === 'VARCHAR' ? c : `CAST(${c} AS VARCHAR)`;
  if (type === t.type) return c;
  return `TRY_CAST(${c} AS ${t.type})`;
}

export type ArchiveSchema = { columns: Map<string, string>; missingRequired: string[]; missingOptional: string[] };

/** The file's columns and types (its footer only). */
export async function readSchema(conn: DuckDBConnection, file: string): Promise<ArchiveSchema> {
  const rows = (await conn.runAndReadAll(`DESCRIBE SELECT * FROM read_parquet($f)`, { f: file })).getRowObjectsJS();
  const columns = new Map(rows.map((r) => [String(r.column_name), String(r.column_type)]));
  return {
    columns,
    missingRequired: REQUIRED.filter((c) => !columns.has(c)),
    missingOptional: OPTIONAL.filter((c) => !columns.has(c)),
  };
}

/**
 * The table macros the staging SQL reads: _ar_all(f), every row of the file with the columns normalized (a missing
 * optional column as NULL), its position in the file (rn; the file keeps arrival order within a token) and the
 * market in its stored type (market_n); _ar_src(f, lo, hi), the rows of the markets lo..hi (text, as
 * `CAST(market AS VARCHAR)` gives them), a filter on the stored column that Parquet's statistics answer: the file
 * is sorted by market, so a piece reads only its row groups. plainMarket: every market id of the file is plain
 * text (the census says so), read without CAST's escaping.
 */
export function sourceMacros(schema: ArchiveSchema, plainMarket = false): string[] {
  const cols = [...REQUIRED, ...OPTIONAL].map((col) => {
    const type = schema.columns.get(col);
    const t = TARGET[col];
    return `${type === undefined ? `NULL::${t.type}` : readAs(col, type, plainMarket)} AS ${t.as}`;
  });
  const marketType = schema.columns.get('market') ?? 'VARCHAR';
  return [
    `CREATE OR REPLACE TEMP MACRO _ar_all(f) AS TABLE
       SELECT file_row_number AS rn, "market" AS market_n, ${cols.join(', ')} FROM read_parquet(f, file_row_number = true)`,
    `CREATE OR REPLACE TEMP MACRO _ar_src(f, lo, hi) AS TABLE
       SELECT * FROM _ar_all(f) WHERE market_n BETWEEN CAST(lo AS ${marketType}) AND CAST(hi AS ${marketType})`,
  ];
}
