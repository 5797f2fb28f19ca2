import fs from 'node:fs';
import { DuckDBListValue, type DuckDBConnection } from '@duckdb/node-api';
import type { BatchContext } from './types.js';
import { runSqlFile } from './ws/common.js';
import { makeScratchDir } from './scratch.js';
import { dec, OutFile } from './psv.js';
import { IntegrityTracker } from './integrity/tracker.js';
import { dropIntegrityTemps, ensureIntegrityStaging, loadOutages, loadSeeds, stageIntegrity } from './integrity/stage.js';
import { deriveCoverage } from './integrity/coverage.js';
import { loadGapSeed } from './integrity/gap-state.js';
import type { VersionDraft } from './versions.js';

/**
 * Book replay: turns the batch's level updates (stg_l2) into book_snapshots and top_of_book.
 *
 * Rules (documented in lake/README.md):
 * - Messages of a token are applied in seq order; the rows of one message share a seq.
 * - A `book` message (is_snapshot) replaces both sides of its token's book; a book with no levels is one
 *   row with side/price/size NULL and leaves the book empty.
 * - A price_change level sets the new total at its price; size 0 removes the level.
 * - book_snapshots: one at every `book` message (reason 'book', ts = its receive time), and one per
 *   PMLAKE_SNAPSHOT_SECONDS boundary when the book changed since the last snapshot (reason 'interval',
 *   ts = the first boundary after the last change, seq = the last message applied before it).
 * - top_of_book: one row per message after which best bid, best ask or either size differs.
 * - Across batches the replay of a token is seeded with its latest stored snapshot before the batch plus the
 *   stored l2 rows between that snapshot and the batch, so books carry over between files and days, and
 *   the rows a re-run derives are identical to those derived the first time.
 *
 * Rows travel as typed arrays (fetchChunk) and come back as a pipe-separated file DuckDB reads, which keeps
 * JavaScript to the one thing SQL cannot do: carrying state from message to message.
 */

const LEVELS = 'STRUCT(price DECIMAL(10,6), size DECIMAL(18,6))[]';
/** Same type as a from_json structure; values travel as decimal strings, which DuckDB parses exactly. */
const LEVELS_JSON = '[{"price":"DECIMAL(10,6)","size":"DECIMAL(18,6)"}]';

/**
 * What the lake already holds of each touched token, from `catalog/token_stats` (ingest/catalog.ts): stored
 * book snapshots, stored l2 rows and the first receive time of those. A token the lake has never seen (a new
 * market) needs no seed and no tail, so the history is not scanned for it; without stats (a lake adopted from
 * before versions, until its first batch) every token is assumed to have both, as before.
 */
async function knownTokens(conn: DuckDBConnection, lake: VersionDraft): Promise<void> {
  const stats = lake.files('token_stats');
  await conn.run(
    stats.length > 0
      ? `CREATE OR REPLACE TEMP TABLE _bk_known AS
         SELECT t.asset_id, t.min_seq, coalesce(s.books, 0) AS books, coalesce(s.l2_rows, 0) AS l2_rows, s.l2_lo
         FROM _bk_touch t LEFT JOIN read_parquet($f::VARCHAR[]) s ON s.token_id = t.asset_id`
      : `CREATE OR REPLACE TEMP TABLE _bk_known AS
         SELECT asset_id, min_seq, 1 AS books, 1 AS l2_rows, NULL::TIMESTAMP AS l2_lo FROM _bk_touch`,
    stats.length > 0 ? { f: new DuckDBListValue(stats) } : {},
  );
}

async function prepareSeeds(conn: DuckDBConnection, lake: VersionDraft): Promise<void> {
  await knownTokens(conn, lake);
  const snapshots = lake.files('book_snapshots');
  const seeded = Number((await conn.runAndReadAll('SELECT count(*) FROM _bk_known WHERE books > 0')).getRows()[0]?.[0] ?? 0);
  if (snapshots.length > 0 && seeded > 0) {
    const g = new DuckDBListValue(snapshots);
    // Two passes so the wide list columns are read only for the one snapshot per token that is needed.
    await conn.run(
      `CREATE OR REPLACE TEMP TABLE _bk_seedkey AS
       SELECT s.asset_id, max(s.seq) AS seq, max(s.seq) FILTER (WHERE s.reason = 'book') AS book_seq
       FROM read_parquet($g::VARCHAR[], hive_partitioning = false) s
       JOIN (SELECT asset_id, min_seq FROM _bk_known WHERE books > 0) t USING (asset_id) WHERE s.seq < t.min_seq GROUP BY s.asset_id`,
      { g },
    );
    await conn.run(
      `CREATE OR REPLACE TEMP TABLE _bk_seed AS
       SELECT s.asset_id, s.ts, s.seq, s.bids, s.asks FROM read_parquet($g::VARCHAR[], hive_partitioning = false) s
       JOIN _bk_seedkey k USING (asset_id, seq)
       QUALIFY row_number() OVER (PARTITION BY s.asset_id ORDER BY s.ts DESC, s.reason) = 1`,
      { g },
    );
  } else {
    await conn.run(`CREATE OR REPLACE TEMP TABLE _bk_seedkey (asset_id VARCHAR, seq BIGINT, book_seq BIGINT)`);
    await conn.run(`CREATE OR REPLACE TEMP TABLE _bk_seed (asset_id VARCHAR, ts TIMESTAMP, seq BIGINT, bids ${LEVELS}, asks ${LEVELS})`);
  }
  const days = lake.files('l2').length > 0 ? await tailDays(conn) : null;
  const tailFiles = days ? lake.partitionFiles('l2', lake.partitionValues('l2').filter(days)) : [];
  if (tailFiles.length > 0) {
    await conn.run(
      `CREATE OR REPLACE TEMP TABLE _bk_tail AS
       SELECT l.asset_id, l.seq, l.level_idx, l.side, l.price, l.size, l.is_snapshot
       FROM read_parquet($g::VARCHAR[], hive_partitioning = false) l
       JOIN (SELECT asset_id, min_seq FROM _bk_known WHERE l2_rows > 0) t USING (asset_id) LEFT JOIN _bk_seedkey k USING (asset_id)
       WHERE l.seq < t.min_seq AND (k.seq IS NULL OR l.seq > k.seq)`,
      { g: new DuckDBListValue(tailFiles) },
    );
  } else {
    await conn.run(`CREATE OR REPLACE TEMP TABLE _bk_tail AS SELECT asset_id, seq, level_idx, side, price, size, is_snapshot FROM stg_l2 LIMIT 0`);
  }
  // The stored trades of the same stretch: a trade an earlier batch landed is taken from the replayed book the
  // checkpoint compares as when both were one batch (a batch may be cut between a trade and the book answering it).
  // Not the ones this batch stages again (a re-run): those are replayed as the batch's own.
  const tradeFiles = days && tailFiles.length > 0 ? lake.partitionFiles('last_trades', lake.partitionValues('last_trades').filter(days)) : [];
  if (tradeFiles.length > 0) {
    await conn.run(
      `CREATE OR REPLACE TEMP TABLE _bk_tail_trades AS
       SELECT l.asset_id, l.seq, l.side, l.price, l.size
       FROM read_parquet($g::VARCHAR[], hive_partitioning = false) l
       JOIN (SELECT asset_id, min_seq FROM _bk_known WHERE l2_rows > 0) t USING (asset_id) LEFT JOIN _bk_seedkey k USING (asset_id)
       WHERE l.seq < t.min_seq AND (k.seq IS NULL OR l.seq > k.seq)
         AND NOT EXISTS (SELECT 1 FROM stg_last_trades s WHERE s.asset_id = l.asset_id AND s.seq = l.seq)`,
      { g: new DuckDBListValue(tradeFiles) },
    );
  } else {
    await conn.run(`CREATE OR REPLACE TEMP TABLE _bk_tail_trades AS SELECT asset_id, seq, side, price, size FROM stg_last_trades LIMIT 0`);
  }
}

/**
 * The days (partitions) of the stored l2 files that can hold tail rows, and of the stored trades. A tail row of a seeded token has a seq above the seed's, and an
 * l2 row's seq is its receive ms * 1e6 + k while its partition is its receive date, so when every touched
 * token has a seed only the days from the oldest seed on are read — not the whole history, which every batch
 * of a long ingest would otherwise rescan. A token without a seed starts at its first stored l2 row (stats), or
 * on any day when that is unknown. Tokens with no stored l2 row read nothing.
 */
async function tailDays(conn: DuckDBConnection): Promise<((day: string) => boolean) | null> {
  const row = (
    await conn.runAndReadAll(
      `SELECT count(*) AS n, count(*) FILTER (WHERE k.seq IS NULL AND t.l2_lo IS NULL) AS unbounded,
              least(min(k.seq), min(epoch_ms(t.l2_lo) * 1000000) FILTER (WHERE k.seq IS NULL)) AS lo, max(t.min_seq) AS hi
       FROM _bk_known t LEFT JOIN _bk_seedkey k USING (asset_id) WHERE t.l2_rows > 0`,
    )
  ).getRowObjectsJS()[0]!;
  if (Number(row.n) === 0) return null;
  const day = (seq: unknown): string => new Date(Number(BigInt(seq as bigint) / 1_000_000n)).toISOString().slice(0, 10);
  const from = Number(row.unbounded) === 0 && row.lo !== null ? day(row.lo) : '';
  const to = row.hi !== null ? day(row.hi) : '~';
  return (p) => p >= from && p <= to;
}

/** Price text cache: prices are at most 1e6 distinct integers of 1e-6, formatted once each. */
const priceText: string[] = [];
function priceDec(v: number): string {
  return (priceText[v] ??= dec(v));
}

/**
 * One side of a book: price → size, the prices kept sorted ascending, and each level's JSON text, built the
 * first time a snapshot needs it after the level changed (most levels are snapshotted many times unchanged,
 * and many updates are overwritten before any snapshot).
 */
class Side {
  sizes = new Map<number, number>();
  texts = new Map<number, string>();
  prices: number[] = [];
  /** The last list text and whether the side changed since (one side often stays put between snapshots). */
  private listText = '[]';
  private stale = false;
  clear(): void {
    this.sizes.clear();
    this.texts.clear();
    this.prices.length = 0;
    this.listText = '[]';
    this.stale = false;
  }
  /** Sets the new total at a price; returns whether anything changed. */
  set(price: number, size: number): boolean {
    const old = this.sizes.get(price);
    if (size <= 0) {
      if (old === undefined) return false;
      this.stale = true;
      this.sizes.delete(price);
      this.texts.delete(price);
      const i = this.find(price);
      this.prices.splice(i, 1);
      return true;
    }
    if (old === size) return false;
    this.stale = true;
    if (old === undefined) this.prices.splice(this.find(price), 0, price);
    this.sizes.set(price, size);
    this.texts.delete(price);
    return true;
  }
  private find(price: number): number {
    let lo = 0;
    let hi = this.prices.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (this.prices[mid]! < price) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }
  /** JSON list of {price, size} (decimal strings), best first: descending for bids, ascending for asks. */
  text(descending: boolean): string {
    if (!this.stale) return this.listText;
    const p = this.prices;
    const parts: string[] = new Array(p.length);
    for (let j = 0; j < p.length; j += 1) {
      const price = descending ? p[p.length - 1 - j]! : p[j]!;
      let t = this.texts.get(price);
      if (t === undefined) {
        t = `{"price":"${priceDec(price)}","size":"${dec(this.sizes.get(price)!)}"}`;
        this.texts.set(price, t);
      }
      parts[j] = t;
    }
    this.listText = `[${parts.join(',')}]`;
    this.stale = false;
    return this.listText;
  }
}

/** Takes each traded size off its level (never below 0; 0 removes the level). */
function takeTrades(side: Side, traded: ReadonlyMap<number, number>): void {
  for (const [p, sz] of traded) {
    const resting = side.sizes.get(p);
    if (resting !== undefined) side.set(p, Math.max(0, resting - sz));
  }
}

/** The best price of a side once the traded sizes are taken off (-1 when nothing is left), without changing it. */
function bestAfterTrades(side: Side, traded: ReadonlyMap<number, number>, descending: boolean): number {
  const p = side.prices;
  for (let j = 0; j < p.length; j += 1) {
    const price = descending ? p[p.length - 1 - j]! : p[j]!;
    if (side.sizes.get(price)! - (traded.get(price) ?? 0) > 0) return price;
  }
  return -1;
}

/**
 * The batch's tokens as two lists indexed by `tok` (1…n, _bk_touch), one row: the replay's output is looked up in
 * them instead of joined to _bk_touch, so its rows keep the order the replay wrote them in, which is their data
 * set's sort order (the merge then writes them without sorting again; a hash join returns them scrambled).
 */
const TOKENS = 'SELECT list(asset_id ORDER BY tok) AS tok_asset, list(condition_id ORDER BY tok) AS tok_condition FROM _bk_touch';

export type BookStats = { replayedRows: number; snapshots: number; topChanges: number; seededTokens: number };

export async function deriveBooks(ctx: BatchContext): Promise<BookStats> {
  const { conn, lakeDir } = ctx;
  const stats: BookStats = { replayedRows: 0, snapshots: 0, topChanges: 0, seededTokens: 0 };
  const n = Number((await conn.runAndReadAll('SELECT count(*) FROM stg_l2')).getRows()[0]?.[0] ?? 0);
  if (n === 0) return stats;
  await ensureIntegrityStaging(conn);
  await conn.run(`CREATE OR REPLACE TEMP TABLE _bk_touch AS
    SELECT row_number() OVER (ORDER BY asset_id)::INTEGER AS tok, asset_id, min(seq) AS min_seq,
           any_value(condition_id) FILTER (WHERE condition_id IS NOT NULL) AS condition_id
    FROM stg_l2 WHERE asset_id IS NOT NULL GROUP BY asset_id`);
  await prepareSeeds(conn, ctx.lake);
  stats.seededTokens = Number((await conn.runAndReadAll('SELECT count(*) FROM _bk_seed')).getRows()[0]?.[0] ?? 0);
  const seeds = await loadSeeds(conn, ctx.lake);
  const outages = await loadOutages(conn, ctx.lake);
  const gapSeed = await loadGapSeed(conn, ctx.lake);
  await runSqlFile(conn, 'books_input.sql');

  const dir = makeScratchDir(lakeDir, 'books');
  try {
    const topOut = new OutFile(dir, 'top.psv');
    const snapOut = new OutFile(dir, 'snap.psv');
    const periodMs = ctx.snapshotSeconds * 1000;
    let bids = new Side();
    let asks = new Side();
    // At a `book` checkpoint the replayed sides move here, to be compared with the venue's (ingest/integrity/).
    let oldBids = new Side();
    let oldAsks = new Side();
    const checks = new IntegrityTracker(dir, seeds, snapOut, topOut, outages, gapSeed);
    let tick = -1;
    // Trades taken since the token's last `book`, per price (see the trade rows below). Kept apart from the book
    // itself: the stored books are the l2 replay exactly (lake/README.md's rule, and what the API replays at query
    // time), while a checkpoint must compare the venue's book with the replayed book *after* those trades.
    const tradedBids = new Map<number, number>();
    const tradedAsks = new Map<number, number>();

    let tok = -1;
    // current message
    let mSrc = -1;
    let mMs = 0;
    let mK = -1;
    let mSnap = 0;
    let mChanged = false;
    let inMsg = false;
    let mChkBid = -1;
    let mChkAsk = -1;
    let mOffTick = -1;
    // per-token state
    let dirty = false;
    let lastMs = Number.NaN;
    let lastMsgMs = 0;
    let lastMsgK = 0;
    let pBid = -1;
    let pBidSz = 0;
    let pAsk = -1;
    let pAskSz = 0;

    const snapshot = (tsMs: number, seqMs: number, seqK: number, reason: string): void => {
      checks.snapshotLine(`${tok}|${tsMs}|${seqMs}|${seqK}|${reason}|${bids.text(true)}|${asks.text(false)}`, reason === 'book');
    };

    const endMessage = (): void => {
      if (!inMsg) return;
      inMsg = false;
      if (mSrc === 0) {
        dirty = false;
        lastMs = mMs;
        checks.storedMessage(mMs);
      } else {
        if (mSrc === 1) checks.storedMessage(mMs);
        if (mSnap) {
          if (mSrc === 2) {
            checks.book(mMs, mK, bids, asks, oldBids, oldAsks);
            if (mOffTick >= 0) checks.offTickBook(mMs, mK, mOffTick);
            snapshot(mMs, mMs, mK, 'book');
          }
          dirty = false;
        } else if (mChanged) dirty = true;
        lastMs = mMs;
        lastMsgMs = mMs;
        lastMsgK = mK;
      }
      const bp = bids.prices;
      const ap = asks.prices;
      const bid = bp.length ? bp[bp.length - 1]! : -1;
      const ask = ap.length ? ap[0]! : -1;
      const bidSz = bid >= 0 ? bids.sizes.get(bid)! : 0;
      const askSz = ask >= 0 ? asks.sizes.get(ask)! : 0;
      if (mSrc === 2) {
        if (!mSnap) {
          const tBid = tradedBids.size > 0 ? bestAfterTrades(bids, tradedBids, true) : bid;
          const tAsk = tradedAsks.size > 0 ? bestAfterTrades(asks, tradedAsks, false) : ask;
          checks.priceChange(mMs, mK, tBid, tAsk, mChkBid, mChkAsk, mOffTick);
        }
        checks.top(mMs, mK, bid, ask);
      }
      if (bid !== pBid || ask !== pAsk || bidSz !== pBidSz || askSz !== pAskSz) {
        if (mSrc === 2) {
          checks.topLine(
            `${tok}|${mMs}|${mK}|${bid >= 0 ? dec(bid) : ''}|${bid >= 0 ? dec(bidSz) : ''}|${ask >= 0 ? dec(ask) : ''}|${ask >= 0 ? dec(askSz) : ''}`,
            mSnap === 1,
          );
        }
        pBid = bid;
        pAsk = ask;
        pBidSz = bidSz;
        pAskSz = askSz;
      }
    };

    const prof = process.env.PMLAKE_PROFILE === '1';
    let tp = performance.now();
    let cpu = process.cpuUsage();
    const lap = (what: string): void => {
      if (prof) {
        const c = process.cpuUsage(cpu);
        process.stderr.write(
          `[profile] books ${what} ${(performance.now() - tp).toFixed(0)} ms (JS thread cpu ${((c.user + c.system) / 1000).toFixed(0)} ms)\n`,
        );
      }
      tp = performance.now();
      cpu = process.cpuUsage();
    };
    const startToken = (t: number): void => {
      tok = t;
      bids.clear();
      asks.clear();
      dirty = false;
      lastMs = Number.NaN;
      pBid = -1;
      pAsk = -1;
      pBidSz = 0;
      pAskSz = 0;
      tick = -1;
      tradedBids.clear();
      tradedAsks.clear();
      checks.startToken(t);
    };
    const result = await conn.stream('SELECT tok, src, ms, k, side, snap, price, size, chk_a, chk_b FROM _bk_in ORDER BY tok, seq, src, level_idx');
    let first = true;
    // One chunk ahead: DuckDB produces the next chunk on its thread while this one is replayed.
    let ahead = result.fetchChunk();
    for (;;) {
      const chunk = await ahead;
      if (chunk && chunk.rowCount > 0) ahead = result.fetchChunk();
      if (first) {
        lap('sorted stream, first chunk');
        first = false;
      }
      if (!chunk || chunk.rowCount === 0) break;
      const rows = chunk.rowCount;
      // Typed arrays behind the vectors: the values were made non-NULL in SQL.
      const col = <T>(i: number): T => (chunk.getColumnVector(i) as unknown as { items: T }).items;
      const cTok = col<Int32Array>(0);
      const cSrc = col<Int32Array>(1);
      const cMs = col<Float64Array>(2);
      const cK = col<Int32Array>(3);
      const cSide = col<Int32Array>(4);
      const cSnap = col<Int32Array>(5);
      const cPrice = col<Int32Array>(6);
      const cSize = col<Float64Array>(7);
      const cChkA = col<Int32Array>(8);
      const cChkB = col<Int32Array>(9);
      for (let r = 0; r < rows; r += 1) {
        const t = cTok[r]!;
        const src = cSrc[r]!;
        const ms = cMs[r]!;
        const k = cK[r]!;
        const side = cSide[r]!;
        if (side >= 3) {
          // Not a level update and no message of the book: a tick_size_change sets the token's tick (3); a trade
          // takes its size from the resting bids (4) or asks (5), as the venue's next `book` will show — for the
          // checks only (tradedBids/tradedAsks). The message before it ends first (its top of book is its own).
          endMessage();
          if (t !== tok) startToken(t);
          if (side === 3) {
            tick = cPrice[r]!;
            checks.tick = tick;
          } else {
            const p = cPrice[r]!;
            const traded = side === 4 ? tradedBids : tradedAsks;
            if ((side === 4 ? bids : asks).sizes.has(p)) traded.set(p, (traded.get(p) ?? 0) + cSize[r]!);
          }
          continue;
        }
        if (t !== tok || src !== mSrc || ms !== mMs || k !== mK || !inMsg) {
          endMessage();
          if (t !== tok) startToken(t);
          // A boundary passed since the last change: that snapshot belongs before this message. Stored tail
          // messages (src 1) crossed theirs in an earlier batch, which already wrote the snapshot.
          if (src !== 0 && dirty && Math.floor(ms / periodMs) > Math.floor(lastMs / periodMs)) {
            if (src === 2) snapshot((Math.floor(lastMs / periodMs) + 1) * periodMs, lastMsgMs, lastMsgK, 'interval');
            dirty = false;
          }
          inMsg = true;
          mSrc = src;
          mMs = ms;
          mK = k;
          mSnap = cSnap[r]!;
          mChanged = false;
          mChkBid = -1;
          mChkAsk = -1;
          mOffTick = -1;
          if (mSnap) {
            if (src === 2 && checks.hasHistory) {
              [bids, oldBids] = [oldBids, bids];
              [asks, oldAsks] = [oldAsks, asks];
              // The replayed book the checkpoint compares: the trades since the last book taken off it.
              takeTrades(oldBids, tradedBids);
              takeTrades(oldAsks, tradedAsks);
            }
            tradedBids.clear();
            tradedAsks.clear();
            bids.clear();
            asks.clear();
            // A new-shape book carries its tick_size (chk_a on its rows).
            if (src === 2 && cChkA[r]! > 0) {
              tick = cChkA[r]!;
              checks.tick = tick;
            }
          }
        }
        const price = cPrice[r]!;
        if (src === 2) {
          if (!mSnap && cChkA[r]! >= 0) {
            mChkBid = cChkA[r]!;
            mChkAsk = cChkB[r]!;
          }
          if (tick > 0 && price > 0 && mOffTick < 0 && price % tick !== 0 && cSize[r]! > 0) mOffTick = price;
        }
        // A price_change states the level's new total: a trade taken there before it is part of that total.
        if (side === 0) {
          mChanged = bids.set(price, cSize[r]!) || mChanged;
          if (tradedBids.size > 0) tradedBids.delete(price);
        } else if (side === 1) {
          mChanged = asks.set(price, cSize[r]!) || mChanged;
          if (tradedAsks.size > 0) tradedAsks.delete(price);
        }
      }
      stats.replayedRows += rows;
    }
    endMessage();
    checks.finish();
    topOut.close();
    snapOut.close();
    stats.snapshots = snapOut.rows;
    stats.topChanges = topOut.rows;
    lap(`replay ${stats.replayedRows} rows`);

    await conn.run(
      `INSERT INTO stg_top_of_book
       SELECT make_timestamp(o.ms * 1000), t.tok_condition[o.tok], t.tok_asset[o.tok], o.ms * 1000000 + o.k,
              o.bid, o.bid_size, o.ask, o.ask_size, CAST((o.bid + o.ask) * 0.5 AS DECIMAL(11,7)), o.ask - o.bid, o.verified
       FROM read_csv($f, delim = '|', quote = '', escape = '', header = false, auto_detect = false,
         columns = {'tok': 'INTEGER', 'ms': 'BIGINT', 'k': 'BIGINT', 'bid': 'DECIMAL(10,6)', 'bid_size': 'DECIMAL(18,6)',
                    'ask': 'DECIMAL(10,6)', 'ask_size': 'DECIMAL(18,6)', 'verified': 'BOOLEAN'}) o, (${TOKENS}) t`,
      { f: topOut.path },
    );
    lap('top_of_book insert');
    await conn.run(
      `INSERT INTO stg_book_snapshots
       SELECT make_timestamp(o.ts_ms * 1000), t.tok_condition[o.tok], t.tok_asset[o.tok], o.reason, o.seq_ms * 1000000 + o.seq_k,
              b[1].price, a[1].price, len(b)::INTEGER, len(a)::INTEGER, b, a, o.verified
       FROM (SELECT *, from_json(bids, '${LEVELS_JSON}') AS b, from_json(asks, '${LEVELS_JSON}') AS a
             FROM read_csv($f, delim = '|', quote = '', escape = '', header = false, auto_detect = false,
               columns = {'tok': 'INTEGER', 'ts_ms': 'BIGINT', 'seq_ms': 'BIGINT', 'seq_k': 'BIGINT', 'reason': 'VARCHAR',
                          'bids': 'VARCHAR', 'asks': 'VARCHAR', 'verified': 'BOOLEAN'})) o, (${TOKENS}) t`,
      { f: snapOut.path },
    );
    lap('book_snapshots insert');
    await stageIntegrity(conn, ctx.lake, dir);
    lap('integrity staging');
    await deriveCoverage(conn, ctx.lake);
    lap('coverage');
    for (const [key, v] of Object.entries(checks.counts)) ctx.counts[key] = (ctx.counts[key] ?? 0) + v;
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
    await conn.run('DROP VIEW IF EXISTS _bk_in');
    for (const t of ['_bk_seed', '_bk_seedkey', '_bk_tail', '_bk_tail_trades', '_bk_touch', '_bk_known']) await conn.run(`DROP TABLE IF EXISTS ${t}`);
    await dropIntegrityTemps(conn);
  }
  ctx.counts.book_snapshots = (ctx.counts.book_snapshots ?? 0) + stats.snapshots;
  ctx.counts.top_of_book_changes = (ctx.counts.top_of_book_changes ?? 0) + stats.topChanges;
  return stats;
}
