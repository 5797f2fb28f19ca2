import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { DuckDBInstance } from '@duckdb/node-api';
import { sqlString } from '../../src/lake/duckdb.js';
import { PRICE_STR, sizeStr } from './format.js';
import { tokenId } from './plan.js';
import { Rng } from './prng.js';

/**
 * One synthetic hour of the public archive (docs/archive-format.md) at a chosen size: what a venue hour's file
 * looks like to the ingest — one UTC hour, rows sorted by market, asset, receive time, nearly all of them
 * `price_change` level changes (new shape: each entry on both tokens, with that token's touch), a `book` of each
 * token at its first event (as after the exporter's subscription) and after each trade with the trade's
 * `last_trade_price`. Markets are active in proportion to a Zipf weight, so a few carry much of the hour. Each
 * market's Yes book is simulated; the No book is its mirror, and every best_bid/best_ask is the book's, so the
 * integrity layer finds nothing. Written market by market in file order, without a sort of the hour. For the
 * bench (`ingest-archive`); `archiveHour` is deterministic for a seed.
 */
export type HourOptions = { rows: number; seed: number; hour?: string; markets?: number };

const BID = 0;
const ASK = 1;
/** Probability that an event is a trade (a `last_trade_price`, a `book` and a one-token price_change). */
const P_TRADE = 0.003;

type Sim = { lvl: [Float64Array, Float64Array]; n: [number, number]; tick: number; bb: number; ba: number };

/** Sets a Yes level's size, keeping the level counts. */
function set(s: Sim, side: number, p: number, cents: number): void {
  s.n[side as 0 | 1] += (cents > 0 ? 1 : 0) - (s.lvl[side as 0 | 1][p]! > 0 ? 1 : 0);
  s.lvl[side as 0 | 1][p] = cents;
}

function resting(rng: Rng): number {
  const shares = Math.min(2_000_000, Math.max(5, Math.exp(Math.log(150) + 1.2 * rng.normal())));
  return rng.chance(0.6) ? Math.round(shares) * 100 : Math.round(shares * 100);
}

function touch(s: Sim): void {
  let p = 999;
  while (p > 0 && s.lvl[BID][p] === 0) p--;
  s.bb = p;
  p = 1;
  while (p < 1000 && s.lvl[ASK][p] === 0) p++;
  s.ba = p;
}

function newSim(rng: Rng): Sim {
  const tick = rng.chance(0.15) ? 1 : 10;
  const s: Sim = { lvl: [new Float64Array(1000), new Float64Array(1000)], n: [0, 0], tick, bb: 0, ba: 0 };
  const mid = tick * Math.round((100 + rng.int(800)) / tick);
  for (let side = 0; side < 2; side++) {
    let p = side === BID ? mid - tick : mid + tick;
    for (let i = 0, n = 6 + rng.int(14); i < n && p >= tick && p <= 1000 - tick; i++) {
      set(s, side, p, resting(rng));
      p += (side === BID ? -tick : tick) * (1 + (rng.chance(0.3) ? rng.geometric(0.5) : 0));
    }
  }
  touch(s);
  return s;
}

/** One level change of the Yes book, applied; returns [side, price, new size]. */
function change(s: Sim, rng: Rng): [number, number, number] {
  const side = rng.chance(0.5) ? BID : ASK;
  const a = s.lvl[side as 0 | 1];
  const dir = side === BID ? -1 : 1;
  const best = side === BID ? s.bb : s.ba;
  // Depth stays between 3 and 30 levels a side.
  if (s.n[side as 0 | 1] <= 2 || (s.n[side as 0 | 1] < 30 && rng.chance(0.5))) {
    let p = s.ba - s.bb > s.tick && rng.chance(0.3) ? best - dir * s.tick : best + dir * s.tick * rng.geometric(0.4);
    p = Math.max(s.tick, Math.min(1000 - s.tick, p));
    if (side === BID ? p >= s.ba : p <= s.bb) p = best;
    set(s, side, p, a[p]! + resting(rng));
    touch(s);
    return [side, p, a[p]!];
  }
  let p = best;
  for (let skip = rng.geometric(0.35); skip > 0; skip--) {
    let q = p + dir;
    while (q > 0 && q < 1000 && a[q] === 0) q += dir;
    if (q <= 0 || q >= 1000) break;
    p = q;
  }
  set(s, side, p, rng.chance(0.6) ? 0 : Math.max(100, Math.round(a[p]! * (0.2 + 0.6 * rng.float()))));
  touch(s);
  return [side, p, a[p]!];
}

/** The archive's depth text of one token's book: bids ascending, asks descending (best last), as the venue sends them. */
function depth(s: Sim, token: number): [string, string] {
  const out: string[][] = [[], []];
  for (let side = 0; side < 2; side++) {
    const tokSide = token === 0 ? side : 1 - side;
    const ascending = tokSide === BID;
    for (let i = 1; i < 1000; i++) {
      const yes = (token === 0) === ascending ? i : 1000 - i;
      const c = s.lvl[side][yes]!;
      if (c > 0) out[tokSide]!.push(`["${PRICE_STR[token === 0 ? yes : 1000 - yes]}","${sizeStr(c)}"]`);
    }
  }
  return [`[${out[BID]!.join(',')}]`, `[${out[ASK]!.join(',')}]`];
}

/** TSV lines of one market's hour, per token in receive order: i, recv, ts, event type, bids, asks, price, size, side, best_bid, best_ask, fee, tx. */
function marketLines(rng: Rng, events: number, h0: number, i: number): [string[], string[]] {
  const s = newSim(rng);
  const out: [string[], string[]] = [[], []];
  const times = Float64Array.from({ length: events }, () => h0 + rng.int(3_600_000)).sort();
  let recv = h0;
  const row = (tok: number, r: number, ts: number, et: string, rest: string): void => {
    out[tok].push(`${i * 2 + tok}\t${r}\t${ts}\t${et}\t${rest}\n`);
  };
  const book = (tok: number, r: number, ts: number): void => {
    const [b, a] = depth(s, tok);
    row(tok, r, ts, 'book', `${b}\t${a}\t\t\t\t\t\t\t`);
  };
  const entry = (tok: number, r: number, ts: number, side: number, p: number, c: number): void => {
    const [price, sd, bb, ba] = tok === 0 ? [p, side, s.bb, s.ba] : [1000 - p, 1 - side, 1000 - s.ba, 1000 - s.bb];
    row(tok, r, ts, 'price_change', `\t\t${PRICE_STR[price]}\t${sizeStr(c)}\t${sd === BID ? 'BUY' : 'SELL'}\t${PRICE_STR[bb]}\t${PRICE_STR[ba]}\t\t`);
  };
  for (let e = 0; e < events; e++) {
    const ts = times[e]!;
    recv = Math.max(recv, ts + 20 + Math.round(rng.exp(40)));
    if (e === 0) {
      book(0, recv, ts);
      book(1, recv, ts);
    } else if (rng.chance(P_TRADE) && s.n[0] > 2 && s.n[1] > 2) {
      const side = rng.chance(0.5) ? BID : ASK;
      const p = side === BID ? s.bb : s.ba;
      const taken = Math.min(s.lvl[side][p]!, 100 * (1 + rng.int(200)));
      set(s, side, p, s.lvl[side][p]! - taken);
      touch(s);
      const tok = rng.int(2);
      const price = tok === 0 ? p : 1000 - p;
      const taker = (side === ASK) === (tok === 0) ? 'BUY' : 'SELL';
      row(tok, recv, ts, 'last_trade_price', `\t\t${PRICE_STR[price]}\t${sizeStr(taken)}\t${taker}\t\t\t0\t0x${rng.hex(64)}`);
      book(tok, recv, ts);
      entry(1 - tok, recv, ts, side, p, s.lvl[side][p]!);
    } else {
      const r = rng.float();
      const ch = Array.from({ length: r < 0.7 ? 1 : r < 0.9 ? 2 : 3 + rng.int(2) }, () => change(s, rng));
      for (let tok = 0; tok < 2; tok++) for (const [side, p, c] of ch) entry(tok, recv, ts, side, p, c);
    }
  }
  return out;
}

/** Writes the hour as one archive-layout Parquet file; returns its row count. */
export async function archiveHour(opts: HourOptions, out: string): Promise<number> {
  const rng = new Rng(opts.seed, 'archive-hour');
  const h0 = Date.parse(`${opts.hour ?? '2026-04-20T14'}:00:00Z`);
  const nMarkets = opts.markets ?? Math.max(20, Math.round(opts.rows / 6000));
  const ids = Array.from({ length: nMarkets }, () => ({ market: `0x${rng.hex(64)}`, tokens: [tokenId(rng), tokenId(rng)].sort() }));
  ids.sort((a, b) => (a.market < b.market ? -1 : 1));
  const weights = ids.map((_, k) => 1 / (1 + ((k * 7919) % nMarkets)) ** 0.9);
  const total = weights.reduce((a, b) => a + b, 0);
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'pmlake-archive-hour-'));
  const tsv = path.join(tmp, 'rows.tsv');
  const fd = fs.openSync(tsv, 'w');
  let n = 0;
  try {
    for (let k = 0; k < nMarkets; k++) {
      // About 2.9 rows per event (1.45 level changes, each on both tokens).
      const events = Math.max(2, Math.round((opts.rows * weights[k]!) / total / 2.9));
      const lines = marketLines(new Rng(opts.seed, `archive-hour:${k}`), events, h0, k);
      // Within a market the file lists the tokens in asset_id order; the ids were sorted, so token 0 first.
      for (const tok of lines) {
        for (let j = 0; j < tok.length; j += 20_000) fs.writeSync(fd, tok.slice(j, j + 20_000).join(''));
        n += tok.length;
      }
    }
    fs.closeSync(fd);
    const tokens = ids.flatMap((m, k) => m.tokens.map((t, j) => `(${k * 2 + j}, '${m.market}', '${t}')`));
    const db = await DuckDBInstance.create(':memory:', { threads: '2', memory_limit: '1GB', preserve_insertion_order: 'true' });
    const conn = await db.connect();
    try {
      await conn.run(`SET TimeZone = 'UTC'`);
      await conn.run(`CREATE TABLE ids AS SELECT * FROM (VALUES ${tokens.join(', ')}) v(i, market, asset_id)`);
      await conn.run(
        `COPY (
           WITH d AS (SELECT list(market ORDER BY i) AS mk, list(asset_id ORDER BY i) AS ak FROM ids)
           SELECT CAST(make_timestamp(recv * 1000) AS TIMESTAMPTZ) AS timestamp_received, CAST(make_timestamp(ts * 1000) AS TIMESTAMPTZ) AS "timestamp",
                  CAST(d.mk[i + 1] AS BLOB) AS market, et AS event_type, d.ak[i + 1] AS asset_id, bids, asks, price, size, side, best_bid, best_ask,
                  fee_rate_bps, transaction_hash, NULL::DECIMAL(9,4) AS old_tick_size, NULL::DECIMAL(9,4) AS new_tick_size
           FROM read_csv(${sqlString(tsv)}, delim = '\t', quote = '', escape = '', header = false, nullstr = '', auto_detect = false,
                         columns = {'i': 'INTEGER', 'recv': 'BIGINT', 'ts': 'BIGINT', 'et': 'VARCHAR', 'bids': 'VARCHAR', 'asks': 'VARCHAR',
                                    'price': 'DECIMAL(9,4)', 'size': 'DECIMAL(18,6)', 'side': 'VARCHAR', 'best_bid': 'DECIMAL(9,4)',
                                    'best_ask': 'DECIMAL(9,4)', 'fee_rate_bps': 'USMALLINT', 'transaction_hash': 'VARCHAR'}), d
         ) TO ${sqlString(out)} (FORMAT parquet, COMPRESSION zstd, COMPRESSION_LEVEL 9, ROW_GROUP_SIZE 1048576)`,
      );
      // The archive's sort is what the ingest relies on: never hand out a file that lost it.
      const unsorted = (
        await conn.runAndReadAll(
          `SELECT count(*) FROM (SELECT market, asset_id, timestamp_received AS t,
                  lag(market) OVER w AS m0, lag(asset_id) OVER w AS a0, lag(timestamp_received) OVER w AS t0
           FROM read_parquet(${sqlString(out)}, file_row_number = true) WINDOW w AS (ORDER BY file_row_number))
           WHERE m0 IS NOT NULL AND (m0, a0, t0) > (market, asset_id, t)`,
        )
      ).getRows()[0]?.[0];
      if (Number(unsorted) > 0) throw new Error(`internal: the archive hour lost its sort (${String(unsorted)} rows)`);
    } finally {
      conn.closeSync();
      db.closeSync();
    }
    return n;
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true });
  }
}
