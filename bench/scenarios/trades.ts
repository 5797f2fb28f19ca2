import { qs, requestJson } from '../http.js';
import { NotAvailable, QUERY_ROUNDS, queryReps, sideBySide, timed, type BenchContext, type Scenario, type ScenarioRow } from '../runner.js';
import { peakTracker } from '../proc.js';
import { atLeast, atMost } from '../stats.js';
import { baselineQuery, src, withBaselineDb } from './common.js';

/**
 * trades-page-deep: `GET /v1/trades?market_id=…&limit=10000&offset=500000` of the busiest market (both
 * outcome tokens, newest first) against the same page selected by DuckDB directly. The baseline reads each
 * token with its own scan (files are sorted by token, so an equality filter prunes row groups where an IN list
 * does not) — the fastest way a DuckDB user would write it. Target: within 1.2×.
 */
const LIMIT = 10_000;
const OFFSET = 500_000;

export const COLS = `id, token_id, condition_id, ts, block_number, transaction_hash, log_index, outcome_index, outcome_label,
  side, price, size, usd_value, maker, taker, fee, collateral`;

export const tradesPageDeep: Scenario = {
  name: 'trades-page-deep',
  async run(ctx: BenchContext): Promise<ScenarioRow[]> {
    const bm = ctx.lake.facts.busiestMarket;
    if (!bm.marketId || bm.tokens.length === 0) throw new NotAvailable('no market with trades in the bench lake');
    // Smaller lakes have fewer trades than the default scale's offset: go as deep as the market allows.
    const offset = Math.max(0, Math.min(OFFSET, bm.trades - LIMIT));
    const url = `${ctx.server.url}/v1/trades?${qs({ market_id: bm.marketId, limit: LIMIT, offset })}`;
    const { sql, params } = baselinePage(ctx.lake.lakeDir, bm.tokens, LIMIT, offset);
    return withBaselineDb(async (db) => {
      const r = await sideBySide(
        ctx.reps,
        async () => {
          const peak = peakTracker(ctx.server.pid);
          const { seconds, value } = await timed(() => requestJson<unknown[]>(url, ctx.key));
          if (!Array.isArray(value.json)) throw new Error(`trades answered ${JSON.stringify(value.json).slice(0, 200)}`);
          return { seconds, rows: value.json.length, bytes: value.bytes, peakRss: peak.stop() };
        },
        () => baselineQuery(db, sql, params),
      );
      return [
        {
          scenario: 'trades-page-deep',
          status: 'ok',
          pmlakeDoes: `GET /v1/trades limit ${LIMIT} offset ${offset}`,
          baselineDoes: 'DuckDB: the same page (ORDER BY ts DESC … LIMIT/OFFSET) directly',
          rows: r.pmlake.rows ?? 0,
          pmlake: r.pmlake,
          baseline: r.baseline,
          ratio: r.ratio,
          targets: [atLeast('within 1.2× of DuckDB', r.ratio, 1 / 1.2)],
          notes: [`market ${bm.marketId} (${bm.trades} trades), offset ${offset}${offset < OFFSET ? ` (lake too small for ${OFFSET})` : ''}`],
        },
      ];
    });
  },
};

/** The page a DuckDB user would select: one scan per token (UNION ALL), newest first, LIMIT/OFFSET. */
export function baselinePage(lakeDir: string, tokens: readonly string[], limit: number, offset: number): { sql: string; params: Record<string, string> } {
  const union = tokens.map((_, i) => `SELECT ${COLS} FROM ${src(lakeDir, 'trades')} WHERE token_id = $t${i}`).join(' UNION ALL ');
  return {
    sql: `SELECT * FROM (${union}) ORDER BY ts DESC, block_number DESC, log_index DESC, id DESC LIMIT ${limit} OFFSET ${offset}`,
    params: Object.fromEntries(tokens.map((t, i) => [`t${i}`, t])),
  };
}

/**
 * trades-page-first and trades-page-1k: the pages clients ask for most — `limit=100` at offset 0 and 1,000 of the
 * busiest market — against the same page selected by DuckDB directly. Target ≤20 ms: served from
 * the newest partitions the page lands in, never a top-N over the whole market.
 */
function tradesPage(name: string, offset: number): Scenario {
  const limit = 100;
  return {
    name,
    async run(ctx: BenchContext): Promise<ScenarioRow[]> {
      const bm = ctx.lake.facts.busiestMarket;
      if (!bm.marketId || bm.tokens.length === 0) throw new NotAvailable('no market with trades in the bench lake');
      const url = `${ctx.server.url}/v1/trades?${qs({ market_id: bm.marketId, limit, offset })}`;
      const { sql, params } = baselinePage(ctx.lake.lakeDir, bm.tokens, limit, offset);
      let n = 0;
      return withBaselineDb(async (db) => {
        const measure = (u: () => string) =>
          sideBySide(
            queryReps(ctx.reps),
            async () => {
              const peak = peakTracker(ctx.server.pid);
              const { seconds, value } = await timed(() => requestJson<unknown[]>(u(), ctx.key));
              if (!Array.isArray(value.json)) throw new Error(`trades answered ${JSON.stringify(value.json).slice(0, 200)}`);
              return { seconds, rows: value.json.length, bytes: value.bytes, peakRss: peak.stop() };
            },
            () => baselineQuery(db, sql, params),
            { warmups: QUERY_ROUNDS.warmups },
          );
        const r = await measure(() => url);
        // The same page with an `end` far in the future, a new one each time: the same rows and the same
        // partition plan, but never an answer pmlake kept — what the first client after an ingest waits.
        const cold = await measure(() => `${url}&end=${new Date(Date.UTC(2100, 0, 1) + ++n * 1000).toISOString()}`);
        const row = (scenario: string, x: typeof r, doing: string, targets: ScenarioRow['targets']): ScenarioRow => ({
          scenario,
          status: 'ok',
          pmlakeDoes: doing,
          baselineDoes: 'DuckDB: the same page (ORDER BY ts DESC … LIMIT/OFFSET) directly',
          rows: x.pmlake.rows ?? 0,
          pmlake: x.pmlake,
          baseline: x.baseline,
          ratio: x.ratio,
          targets,
          notes: [`market ${bm.marketId} (${bm.trades} trades), offset ${offset}`],
        });
        return [
          row(name, r, `GET /v1/trades limit ${limit} offset ${offset}`, [atMost('≤20 ms', r.pmlake.seconds * 1000, 20)]),
          row(`${name} (uncached)`, cold, `the same page never asked before (distinct end=…): partition plan, no kept answer`, [
            atLeast('faster than DuckDB over the whole market', cold.ratio, 1),
          ]),
        ];
      });
    },
  };
}

export const tradesPageFirst = tradesPage('trades-page-first', 0);
export const tradesPage1k = tradesPage('trades-page-1k', 1000);
