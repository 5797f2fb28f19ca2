import path from 'node:path';
import { versionSources } from '../../src/lake/sources.js';
import { currentVersion } from '../../src/lake/versions.js';
import { tradesDownload } from '../../src/query/downloads.js';
import { checkStatus, qs, request } from '../http.js';
import { peakTracker } from '../proc.js';
import { NotAvailable, sideBySide, timed, type BenchContext, type Sample, type Scenario, type ScenarioRow } from '../runner.js';
import { atLeast, isFlat } from '../stats.js';
import { baselineCopy, withBaselineDb } from './common.js';

/**
 * Downloads: trades as CSV or Parquet, read by an HTTP client (bytes counted, not stored), against DuckDB
 * `COPY` of the very same query (pmlake's own download builder, so rows, columns and order are identical) to a
 * local file. Target: ≥0.8× the COPY throughput, and the server's peak RSS flat between 1M and 10M rows.
 *
 * The spec caps `GET /v1/download/trades` at 1,000,000 rows (and a market rarely has 10M trades), so the 10M
 * pull is one `POST /v1/download/bulk` of the busiest markets' trades (≤2M rows per item, ≤25 items) — one
 * HTTP response, one ZIP streamed from consecutive COPYs. Its baseline COPYs the same items one after the other.
 */
export const ONE_M = 1_000_000;
const TEN_M = 10_000_000;
const ITEM_MAX = 2_000_000;

type Item = { marketId: string; tokens: string[]; limit: number };

function copyOpts(format: 'csv' | 'parquet'): string {
  return format === 'csv' ? 'FORMAT csv, HEADER true' : 'FORMAT parquet, COMPRESSION zstd, ROW_GROUP_SIZE 122880';
}

/**
 * Items adding up to `target` rows: the busiest markets first. When the lake's top markets hold fewer rows
 * than the target, the items cycle over the markets with at least a twentieth of the target (the busy ones), so
 * the response still carries `target` rows — repeated market pulls, each a full COPY of that market's trades.
 */
export function itemsFor(ctx: BenchContext, target: number): Item[] {
  const top = ctx.lake.facts.topMarkets;
  const total = top.reduce((s, m) => s + Math.min(m.trades, ITEM_MAX), 0);
  const busy = top.filter((m) => m.trades >= target / 20);
  const source = total >= target ? top : busy.length ? busy : top.slice(0, 1);
  const items: Item[] = [];
  let rows = 0;
  // ≤20 items: each item is one download, and the Professional plan allows a burst of 20 downloads a minute.
  for (let i = 0; rows < target && items.length < 20 && source.length; i++) {
    const m = source[i % source.length]!;
    if (total >= target && i >= source.length) break;
    const limit = Math.min(m.trades, ITEM_MAX, target - rows);
    if (limit <= 0) break;
    items.push({ marketId: m.marketId, tokens: m.tokens, limit });
    rows += limit;
  }
  return items;
}

function scenario(name: string, format: 'csv' | 'parquet'): Scenario {
  return {
    name,
    async run(ctx: BenchContext): Promise<ScenarioRow[]> {
      const top = ctx.lake.facts.topMarkets;
      if (top.length === 0) throw new NotAvailable('no trades in the bench lake');
      const lake = versionSources(currentVersion(ctx.lake.lakeDir));
      const file = path.join(ctx.workDir, `baseline.${format}`);
      const out: ScenarioRow[] = [];

      const single = itemsFor(ctx, ONE_M).slice(0, 1);
      const bulk1m = itemsFor(ctx, ONE_M);
      const bulk = itemsFor(ctx, TEN_M);
      // A fresh server: its peak memory then reflects these downloads, not what earlier scenarios left behind.
      await ctx.restartServer();
      const pmlakeGet = async (it: Item): Promise<Sample> => {
        const url = `${ctx.server.url}/v1/download/trades?${qs({ market_id: it.marketId, format, limit: it.limit })}`;
        const key = await ctx.newKey(`dl-${format}`);
        const peak = peakTracker(ctx.server.pid);
        const { seconds, value } = await timed(() => request(url, { headers: { 'x-api-key': key } }));
        checkStatus(url, value);
        return { seconds, rows: it.limit, bytes: value.bytes, peakRss: peak.stop() };
      };
      const pmlakeBulk = async (items: Item[]): Promise<Sample> => {
        const url = `${ctx.server.url}/v1/download/bulk`;
        const key = await ctx.newKey(`bulk-${format}`);
        const body = { items: items.map((it) => ({ kind: 'trades', market_id: it.marketId, format, limit: it.limit })) };
        const peak = peakTracker(ctx.server.pid);
        const { seconds, value } = await timed(() => request(url, { method: 'POST', headers: { 'x-api-key': key }, body }));
        checkStatus(url, value);
        return { seconds, rows: items.reduce((s, it) => s + it.limit, 0), bytes: value.bytes, peakRss: peak.stop() };
      };

      await withBaselineDb(async (db) => {
        const baseline = async (items: Item[]): Promise<Sample> => {
          let seconds = 0;
          let rows = 0;
          let bytes = 0;
          let peakRss = 0;
          for (const it of items) {
            const q = tradesDownload(lake, { tokens: it.tokens }, {}, it.limit, format);
            const s = await baselineCopy(db, q.sql, { ...q.params }, file, copyOpts(format));
            seconds += s.seconds;
            rows += s.rows ?? 0;
            bytes += s.bytes ?? 0;
            peakRss = Math.max(peakRss, s.peakRss ?? 0);
          }
          return { seconds, rows, bytes, peakRss };
        };
        const small = await sideBySide(
          ctx.reps,
          () => pmlakeGet(single[0]!),
          () => baseline(single),
        );
        const smallRows = small.pmlake.rows ?? 0;
        out.push({
          scenario: `${name}-1m`.replace('-10m-1m', '-1m'),
          status: 'ok',
          pmlakeDoes: `GET /v1/download/trades format=${format} limit=${single[0]!.limit}`,
          baselineDoes: `DuckDB COPY of the same query to a local ${format} file`,
          rows: smallRows,
          pmlake: small.pmlake,
          baseline: small.baseline,
          ratio: small.ratio,
          targets: [atLeast('≥0.8× DuckDB COPY throughput', small.ratio, 0.8)],
          notes: [`market ${single[0]!.marketId}; baseline ${small.baseline.mbPerSec?.toFixed(0)} MB/s`],
        });
        // The memory comparison is like for like: the same bulk path at ~1M rows, then at 10M rows.
        const ref = await pmlakeBulk(bulk1m);
        // Bulk rounds are long (10M rows, ~1 min a side here): at most 2 of them, and no separate warm-up (the 1M rounds warmed up).
        const big = await sideBySide(
          Math.min(ctx.reps, 2),
          () => pmlakeBulk(bulk),
          () => baseline(bulk),
          { warmup: false },
        );
        const bigRows = big.pmlake.rows ?? 0;
        const refRows = ref.rows ?? 0;
        // The 1M reference is the higher of the two ~1M-row pulls (GET and bulk) on this fresh server: both are
        // "1M rows", and which of them happens to leave more allocator slack behind is not the question.
        const refPeak = Math.max(ref.peakRss ?? 0, small.pmlake.peakRss ?? 0);
        const flat = refPeak > 0 && big.pmlake.peakRss !== undefined ? isFlat(refPeak, big.pmlake.peakRss) : null;
        out.push({
          scenario: name,
          status: 'ok',
          pmlakeDoes: `POST /v1/download/bulk, ${bulk.length} trades items (${format}) in one ZIP`,
          baselineDoes: `DuckDB COPY of the same ${bulk.length} queries to local ${format} files`,
          rows: bigRows,
          pmlake: big.pmlake,
          baseline: big.baseline,
          ratio: big.ratio,
          targets: [
            atLeast('≥0.8× DuckDB COPY throughput', big.ratio, 0.8),
            { text: `peak RSS flat ${fmtM(refRows)}→${fmtM(bigRows)} rows`, met: flat, detail: `${mib(refPeak)} → ${mib(big.pmlake.peakRss)} MiB` },
          ],
          notes: [
            `server peak RSS (fresh server): GET ${smallRows} rows ${mib(small.pmlake.peakRss)} MiB; bulk ${refRows} rows ${mib(ref.peakRss)} MiB; bulk ${bigRows} rows ${mib(big.pmlake.peakRss)} MiB`,
            `${bulk.length} items over ${new Set(bulk.map((b) => b.marketId)).size} market(s)${bigRows < TEN_M ? `; the lake holds only ${bigRows} such rows` : ''}`,
            `baseline ${big.baseline.mbPerSec?.toFixed(0)} MB/s`,
          ],
        });
      });
      return out;
    },
  };
}

function mib(b: number | undefined): string {
  return b === undefined ? '?' : (b / 2 ** 20).toFixed(0);
}
function fmtM(n: number): string {
  return n >= 1e6 ? `${(n / 1e6).toFixed(n % 1e6 === 0 ? 0 : 1)}M` : `${Math.round(n / 1e3)}k`;
}

export const downloadScenarios: Scenario[] = [scenario('download-csv-10m', 'csv'), scenario('download-parquet', 'parquet')];
