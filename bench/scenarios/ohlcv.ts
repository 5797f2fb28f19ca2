import fs from 'node:fs';
import path from 'node:path';
import { qs, requestJson } from '../http.js';
import { NotAvailable, QUERY_ROUNDS, queryReps, sideBySide, timed, type BenchContext, type Scenario, type ScenarioRow } from '../runner.js';
import { peakTracker } from '../proc.js';
import { atLeast } from '../stats.js';
import { addDays, baselineQuery, src, ts, withBaselineDb } from './common.js';

/**
 * OHLCV: pmlake's `GET /v1/trades/ohlcv` (rolled up from candles_1h for whole hours, candles_1m for other whole
 * minutes) against DuckDB computing the same candles straight from the raw trades — the first row's baseline, target
 * ≥10× for 1h and coarser — and, as a second row, against DuckDB rolling up the same stored candles itself: the
 * same logical query, target within 1.2×.
 */

type Spec = { name: string; timeframe: string; seconds: number; days: number; rawTarget: number };

const SPECS: Spec[] = [
  { name: 'ohlcv-1h-90d', timeframe: '1h', seconds: 3600, days: 90, rawTarget: 10 },
  // 7m is finer than 1h: the 10× target does not apply; against raw trades it is a query (within 1.2×).
  { name: 'ohlcv-7m-30d', timeframe: '7m', seconds: 420, days: 30, rawTarget: 1 / 1.2 },
];

function rawTradesSql(lakeDir: string, seconds: number): string {
  // Buckets counted from the Unix epoch (UTC), open/close by block time then log index, as the API defines them.
  return `SELECT time_bucket(INTERVAL '${seconds} seconds', ts, TIMESTAMP '1970-01-01') AS t,
            arg_min(price, (ts, log_index)) AS open, max(price) AS high, min(price) AS low,
            arg_max(price, (ts, log_index)) AS close, sum(size) AS volume, count(*) AS trade_count
          FROM ${src(lakeDir, 'trades')}
          WHERE token_id = $tok AND ts >= $s AND ts < $e
          GROUP BY 1 ORDER BY 1 LIMIT 10000`;
}

/** The stored candles pmlake rolls up for this timeframe: candles_1h for whole hours (when built), else candles_1m. */
function candleSource(lakeDir: string, seconds: number): 'candles_1h' | 'candles_1m' {
  return seconds % 3600 === 0 && fs.existsSync(path.join(lakeDir, 'candles_1h')) ? 'candles_1h' : 'candles_1m';
}

function candlesSql(lakeDir: string, seconds: number): string {
  return `SELECT time_bucket(INTERVAL '${seconds} seconds', bucket, TIMESTAMP '1970-01-01') AS t,
            arg_min(open, bucket) AS open, max(high) AS high, min(low) AS low, arg_max(close, bucket) AS close,
            sum(volume) AS volume, sum(trade_count) AS trade_count
          FROM ${src(lakeDir, candleSource(lakeDir, seconds))}
          WHERE token_id = $tok AND bucket >= $s AND bucket < $e
          GROUP BY 1 ORDER BY 1 LIMIT 10000`;
}

function scenario(spec: Spec): Scenario {
  return {
    name: spec.name,
    async run(ctx: BenchContext): Promise<ScenarioRow[]> {
      const bt = ctx.lake.facts.busiestToken;
      if (!bt.tokenId || !bt.marketId) throw new NotAvailable('no trades in the bench lake');
      // The window ends at the day after the token's last trade and reaches back `days` days.
      const end = addDays(`${bt.to.slice(0, 10)}T00:00:00.000Z`, 1);
      const start = addDays(end, -spec.days);
      const url = `${ctx.server.url}/v1/trades/ohlcv?${qs({
        market_id: bt.marketId,
        outcome: bt.outcome,
        timeframe: spec.timeframe,
        start,
        end,
        limit: 10000,
      })}`;
      const pmlake = async (): Promise<{ seconds: number; rows: number; bytes: number; peakRss: number }> => {
        const peak = peakTracker(ctx.server.pid);
        const { seconds, value } = await timed(() => requestJson<unknown[]>(url, ctx.key));
        if (!Array.isArray(value.json)) throw new Error(`ohlcv answered ${JSON.stringify(value.json).slice(0, 200)}`);
        return { seconds, rows: value.json.length, bytes: value.bytes, peakRss: peak.stop() };
      };
      const params = { tok: bt.tokenId, s: ts(start), e: ts(end) };
      const days = Math.round((Math.min(Date.parse(end), Date.parse(bt.to)) - Math.max(Date.parse(start), Date.parse(bt.from))) / 86_400_000);
      const note = `token ${bt.tokenId.slice(0, 8)}… (market ${bt.marketId}, outcome ${bt.outcome}, ${bt.trades} trades in the lake); data covers ${days} of the ${spec.days} days`;

      const rows: ScenarioRow[] = [];
      await withBaselineDb(async (db) => {
        const raw = await sideBySide(queryReps(ctx.reps), pmlake, () => baselineQuery(db, rawTradesSql(ctx.lake.lakeDir, spec.seconds), params), QUERY_ROUNDS);
        const rawRatioMin = spec.rawTarget;
        rows.push({
          scenario: spec.name,
          status: 'ok',
          pmlakeDoes: `GET /v1/trades/ohlcv timeframe=${spec.timeframe}, ${spec.days} days`,
          baselineDoes: 'DuckDB: the same candles from the raw trades Parquet',
          rows: raw.pmlake.rows ?? 0,
          pmlake: raw.pmlake,
          baseline: raw.baseline,
          ratio: raw.ratio,
          targets: [
            rawRatioMin >= 1
              ? atLeast(`≥${rawRatioMin}× faster than from raw trades`, raw.ratio, rawRatioMin)
              : atLeast('within 1.2× of DuckDB from raw trades', raw.ratio, rawRatioMin),
          ],
          notes: [note, `baseline rows ${raw.baseline.rows}`],
        });
        const c1m = await sideBySide(queryReps(ctx.reps), pmlake, () => baselineQuery(db, candlesSql(ctx.lake.lakeDir, spec.seconds), params), QUERY_ROUNDS);
        const stored = candleSource(ctx.lake.lakeDir, spec.seconds);
        rows.push({
          scenario: `${spec.name} (vs ${stored === 'candles_1h' ? 'c1h' : 'c1m'})`,
          status: 'ok',
          pmlakeDoes: `GET /v1/trades/ohlcv timeframe=${spec.timeframe}, ${spec.days} days`,
          baselineDoes: `DuckDB: the same rollup of ${stored} run directly`,
          rows: c1m.pmlake.rows ?? 0,
          pmlake: c1m.pmlake,
          baseline: c1m.baseline,
          ratio: c1m.ratio,
          targets: [atLeast('within 1.2× of DuckDB (same query)', c1m.ratio, 1 / 1.2)],
          notes: [`baseline rows ${c1m.baseline.rows}`],
        });
      });
      return rows;
    },
  };
}

export const ohlcvScenarios: Scenario[] = SPECS.map(scenario);
