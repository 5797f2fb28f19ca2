import { parseByteSize } from '../src/config.js';
import { columnDdl } from '../src/lake/layout.js';
import { resolveTradeTokens, parquetList } from './catalog.js';
import type { BatchContext } from './types.js';

/**
 * One-minute OHLCV per token from trades, built at ingest so coarser timeframes are cheap rollups, and
 * hourly OHLCV rolled up from those minutes (candles_1h) for 1h-and-coarser queries.
 *
 * For every (token, minute) the batch's trades touch, the candle is recomputed from the lake's trades of that
 * minute plus the staged ones (de-duplicated on trade id), so a minute whose trades arrive in two different
 * ingests is still one correct candle; every (token, hour) touched is rolled up again from its minutes.
 * candles_1m and candles_1h are declared `onConflict: 'replace'` in src/lake/layout.ts, so the partition merge
 * lets these recomputed rows replace the stored ones, key by key. Only the touched minutes' trades are held, not
 * the months': a batch of new days reads the lake's trades only to find it holds none of them.
 *
 * A batch that lands a busy month again can touch more trades than DuckDB's share of the ingest budget holds, and
 * the de-duplication and the per-minute state grow with them: each month is derived in buckets of its touched
 * tokens (a hash of the token id), sized from the memory limit, so memory stays bounded whatever the batch.
 *
 * Also resolves the staged trades' outcome fields through the catalogue first (resolveTradeTokens), which
 * must happen before the trades partitions are written; the orchestrator calls this before merging.
 */
export async function deriveCandles(ctx: BatchContext): Promise<void> {
  const { conn } = ctx;
  const exists = await conn.runAndReadAll(`SELECT count(*) AS n FROM duckdb_tables() WHERE table_name = 'stg_trades'`);
  if (Number(exists.getRowObjectsJS()[0]!.n) === 0) return;
  await resolveTradeTokens(ctx);
  await conn.run(`CREATE TEMP TABLE IF NOT EXISTS stg_candles_1m (${columnDdl('candles_1m')})`);
  await conn.run(
    `CREATE OR REPLACE TEMP TABLE _cdl_touched AS
     SELECT DISTINCT token_id, date_trunc('minute', ts) AS minute, strftime(ts, '%Y-%m') AS month
     FROM stg_trades WHERE ts IS NOT NULL AND token_id IS NOT NULL`,
  );
  await conn.run(`CREATE OR REPLACE TEMP TABLE _cdl_hours AS SELECT DISTINCT token_id, date_trunc('hour', minute) AS hour, month FROM _cdl_touched`);
  const months = (await conn.runAndReadAll(`SELECT DISTINCT month FROM _cdl_touched ORDER BY 1`)).getRowObjectsJS().map((r) => String(r.month));
  await conn.run(`DELETE FROM stg_candles_1m WHERE (token_id, bucket) IN (SELECT token_id, minute FROM _cdl_touched)`);
  const chunkRows = ctx.candleChunkRows ?? (await candleChunkRows(conn));
  for (const month of months) {
    const files = ctx.lake.partitionFiles('trades', [month]);
    // A minute's candle needs all of its trades at once, the lake's included. A batch landing a busy month again
    // (a re-ingest, a second source) touches far more than memory holds, so the touched tokens are split into
    // hash buckets of few enough trades each, one bucket at a time.
    const staged = await countRows(conn, `SELECT count(*) AS n FROM stg_trades WHERE strftime(ts, '%Y-%m') = $month`, { month });
    const stored =
      files.length > 0 ? await countRows(conn, `SELECT count(*) AS n FROM read_parquet(${parquetList(files)}) WHERE ${touchedBy('$month')}`, { month }) : 0;
    const buckets = Math.max(1, Math.ceil((staged + stored) / chunkRows));
    ctx.counts.candle_chunks = (ctx.counts.candle_chunks ?? 0) + buckets;
    for (let bucket = 0; bucket < buckets; bucket++) await minuteCandles(ctx, stored > 0 ? files : [], { month, buckets, bucket });
  }
  const n = await conn.runAndReadAll(`SELECT count(*) AS n FROM stg_candles_1m`);
  ctx.counts.candles_1m = Number(n.getRowObjectsJS()[0]!.n);
  await hourlyCandles(ctx, months);
  const h = await conn.runAndReadAll(`SELECT count(*) AS n FROM stg_candles_1h`);
  ctx.counts.candles_1h = Number(h.getRowObjectsJS()[0]!.n);
  for (const t of ['_cdl_touched', '_cdl_hours']) await conn.run(`DROP TABLE IF EXISTS ${t}`);
}

/** Trades of the minutes the batch touches in a month (the month bound as `monthParam`). */
function touchedBy(monthParam: string): string {
  return `(token_id, date_trunc('minute', ts)) IN (SELECT token_id, minute FROM _cdl_touched WHERE month = ${monthParam})`;
}

type Chunk = { month: string; buckets: number; bucket: number };

/** The minute candles of one bucket of one month's touched minutes, from the lake's trades and the staged ones. */
async function minuteCandles(ctx: BatchContext, files: string[], chunk: Chunk): Promise<void> {
  const { conn } = ctx;
  const inChunk = `hash(token_id) % $buckets = $bucket AND ${touchedBy('$month')}`;
  const lakeTrades =
    files.length > 0
      ? `SELECT id, token_id, ts, block_number, log_index, price, size, usd_value, 0 AS _src
       FROM read_parquet(${parquetList(files)}) WHERE ${inChunk}
       UNION ALL `
      : '';
  const params = { month: chunk.month, buckets: BigInt(chunk.buckets), bucket: BigInt(chunk.bucket) };
  await conn.run(
    `CREATE OR REPLACE TEMP TABLE _cdl_trades AS
     SELECT * FROM (
       ${lakeTrades}SELECT id, token_id, ts, block_number, log_index, price, size, usd_value, 1 AS _src
       FROM stg_trades WHERE ts IS NOT NULL AND ${inChunk})
     -- The same trade may be in the lake and staged again; the lake's row wins, as in the trades merge.
     QUALIFY row_number() OVER (PARTITION BY id ORDER BY _src) = 1`,
    params,
  );
  // open / close are the first / last trade in chain order: block time, then block number (two blocks can
  // share a second), then log index (the order of events inside a block), then id as a last resort.
  await conn.run(
    `INSERT INTO stg_candles_1m BY NAME
     SELECT token_id,
            date_trunc('minute', ts) AS bucket,
            -- arg_min/arg_max over one sort key keep a single row of state per minute; first/last with ORDER BY
            -- buffer every trade of the group, which ran out of memory on a 20M-trade batch. The key is the
            -- trade order (ts, block_number NULLS FIRST, log_index NULLS LAST, id): coalesce puts the NULLs
            -- where that order does (a real log index is far below 2^31).
            arg_min(price, (ts, coalesce(block_number, -1), coalesce(log_index, 2147483647), id)) AS open,
            max(price) AS high,
            min(price) AS low,
            arg_max(price, (ts, coalesce(block_number, -1), coalesce(log_index, 2147483647), id)) AS close,
            sum(size)::DECIMAL(18,6) AS volume,
            sum(usd_value)::DECIMAL(18,6) AS usd_volume,
            count(*) AS trade_count
     FROM _cdl_trades GROUP BY token_id, date_trunc('minute', ts)`,
  );
  await conn.run(`DROP TABLE IF EXISTS _cdl_trades`);
}

/**
 * Hourly candles of the hours the batch touches, rolled up from all their minutes: the recomputed ones staged,
 * the others as stored (an hour never straddles a month, so the stored minutes are the touched months' files).
 */
async function hourlyCandles(ctx: BatchContext, months: string[]): Promise<void> {
  const { conn } = ctx;
  await conn.run(`CREATE TEMP TABLE IF NOT EXISTS stg_candles_1h (${columnDdl('candles_1h')})`);
  await conn.run(`DELETE FROM stg_candles_1h WHERE (token_id, bucket) IN (SELECT token_id, hour FROM _cdl_hours)`);
  const inHours = `(token_id, date_trunc('hour', bucket)) IN (SELECT token_id, hour FROM _cdl_hours)`;
  const files = ctx.lake.partitionFiles('candles_1m', months);
  const stored =
    files.length > 0
      ? ` UNION ALL BY NAME SELECT * FROM read_parquet(${parquetList(files)})
          WHERE ${inHours} AND (token_id, bucket) NOT IN (SELECT token_id, minute FROM _cdl_touched)`
      : '';
  await conn.run(`INSERT INTO stg_candles_1h BY NAME ${hourlyFrom(`(SELECT * FROM stg_candles_1m WHERE ${inHours}${stored})`)}`);
  await backfillHourly(ctx);
}

/**
 * Trades per chunk: one per KiB of DuckDB's memory limit. A trade row (two long ids, a timestamp, decimals) with
 * the de-duplication's and the aggregate's state is a few hundred bytes, so a chunk keeps well inside the limit.
 */
async function candleChunkRows(conn: BatchContext['conn']): Promise<number> {
  const r = await conn.runAndReadAll(`SELECT current_setting('memory_limit') AS m`);
  return Math.max(100_000, Math.floor(parseByteSize(String(r.getRowObjectsJS()[0]!.m)) / 1024));
}

async function countRows(conn: BatchContext['conn'], sql: string, params: Record<string, string>): Promise<number> {
  const r = await conn.runAndReadAll(sql, params);
  return Number(r.getRowObjectsJS()[0]!.n);
}

/** Hourly candles of a candles_1m-shaped source: first minute's open, last minute's close. */
function hourlyFrom(source: string): string {
  return `SELECT token_id, date_trunc('hour', bucket) AS bucket,
            arg_min(open, bucket) AS open, max(high) AS high, min(low) AS low, arg_max(close, bucket) AS close,
            sum(volume)::DECIMAL(18,6) AS volume, sum(usd_volume)::DECIMAL(18,6) AS usd_volume,
            sum(trade_count)::BIGINT AS trade_count
     FROM ${source} GROUP BY token_id, date_trunc('hour', bucket)`;
}

/**
 * A lake built before candles_1h existed has minute candles for months that have no hourly file: those
 * months are rolled up from the stored minutes once, by the next ingest (the query side only uses
 * candles_1h when it covers every month candles_1m does). Hours this batch recomputed are skipped: their rows
 * are staged already.
 */
async function backfillHourly(ctx: BatchContext): Promise<void> {
  const have = new Set(ctx.lake.partitionValues('candles_1h'));
  const missing = ctx.lake.partitionValues('candles_1m').filter((m) => !have.has(m));
  if (missing.length === 0) return;
  const files = ctx.lake.partitionFiles('candles_1m', missing);
  await ctx.conn.run(
    `INSERT INTO stg_candles_1h BY NAME ${hourlyFrom(
      `(SELECT * FROM read_parquet(${parquetList(files)})
        WHERE (token_id, date_trunc('hour', bucket)) NOT IN (SELECT token_id, hour FROM _cdl_hours))`,
    )}`,
  );
  ctx.counts.candles_1h_backfilled_months = (ctx.counts.candles_1h_backfilled_months ?? 0) + missing.length;
}
