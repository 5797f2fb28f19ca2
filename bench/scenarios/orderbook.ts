import { currentVersion } from '../../src/lake/versions.js';
import { qs, requestJson } from '../http.js';
import { NotAvailable, QUERY_ROUNDS, queryReps, sideBySide, timed, type BenchContext, type Scenario, type ScenarioRow } from '../runner.js';
import { peakTracker } from '../proc.js';
import { atLeast, atMost, seededRandom } from '../stats.js';
import { baselineQuery, fileList, ts, withBaselineDb } from './common.js';

/**
 * book-at-instant: `GET /v1/orderbook/snapshot` of the busiest book at a random instant (a different seeded
 * instant each round, the same for both sides) against DuckDB replaying that day's tape up to the instant:
 * the day's last full `book` message before the instant, then every level update after it, last size per
 * (side, price) wins, zero sizes removed. Target: under 100 ms (and the ratio is shown).
 */
export const bookAtInstant: Scenario = {
  name: 'book-at-instant',
  async run(ctx: BenchContext): Promise<ScenarioRow[]> {
    const b = ctx.lake.facts.busiestL2;
    if (!b.assetId || !b.marketId) throw new NotAvailable('no L2 tape in the bench lake');
    const from = Date.parse(b.from);
    const to = Date.parse(b.to);
    const rnd = seededRandom(20250915);
    // One instant per round (warm-up included), drawn up front so both sides see the same ones.
    const instants = Array.from({ length: queryReps(ctx.reps) + 1 }, () => new Date(from + Math.floor(rnd() * (to - from))).toISOString());
    const at = (rep: number): string => instants[rep + 1]!;

    const replaySql = (files: string[]): string => `
      WITH tape AS (
        SELECT side, price, size, is_snapshot, seq, level_idx
        FROM read_parquet(${fileList(files)})
        WHERE asset_id = $asset AND recv_ts <= $at
      ),
      book_start AS (SELECT coalesce(max(seq), -1) AS seq FROM tape WHERE is_snapshot),
      last AS (
        SELECT side, price, arg_max(size, (seq, level_idx)) AS size
        FROM tape WHERE seq >= (SELECT seq FROM book_start)
        GROUP BY side, price
      )
      SELECT side, price, size FROM last WHERE size > 0
      ORDER BY side, CASE WHEN side = 'BUY' THEN -price ELSE price END`;

    return withBaselineDb(async (db) => {
      const r = await sideBySide(
        queryReps(ctx.reps),
        async (rep) => {
          const url = `${ctx.server.url}/v1/orderbook/snapshot?${qs({ market_id: b.marketId, outcome: b.outcome, at: at(rep) })}`;
          const peak = peakTracker(ctx.server.pid);
          const { seconds, value } = await timed(() => requestJson<Record<string, unknown>>(url, ctx.key));
          const j = value.json;
          const levels = (Array.isArray(j.bids) ? j.bids.length : 0) + (Array.isArray(j.asks) ? j.asks.length : 0);
          return { seconds, rows: levels, bytes: value.bytes, peakRss: peak.stop() };
        },
        async (rep) => {
          const day = at(rep).slice(0, 10);
          // The day's files in the lake's current version (several after appends, until compaction).
          const files = currentVersion(ctx.lake.lakeDir).partitionFiles('l2', [day]);
          if (files.length === 0) return { seconds: Number.NaN, rows: 0 };
          return baselineQuery(db, replaySql(files), { asset: b.assetId, at: ts(at(rep)) });
        },
        QUERY_ROUNDS,
      );
      return [
        {
          scenario: 'book-at-instant',
          status: 'ok',
          pmlakeDoes: 'GET /v1/orderbook/snapshot at a random instant',
          baselineDoes: "DuckDB: replay of that day's tape up to the instant",
          rows: r.pmlake.rows ?? 0,
          pmlake: r.pmlake,
          baseline: r.baseline,
          ratio: r.ratio,
          targets: [atMost('< 100 ms', r.pmlake.seconds, 0.1), atLeast('within 1.2× of DuckDB replay', r.ratio, 1 / 1.2)],
          notes: [`asset ${b.assetId.slice(0, 8)}… (market ${b.marketId}, ${b.rows} L2 rows); instants ${instants.slice(1).join(', ')}`],
        },
      ];
    });
  },
};
