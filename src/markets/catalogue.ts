import type { LakeSession } from '../lake/session.js';
import type { Row } from '../lake/values.js';
import { StampedCache } from '../lake/stamp.js';
import { listSort, marketCatalogueQuery, rawConditionIdsQuery, SORT_BY, type MarketListFilter, type SortBy } from '../query/markets.js';

/**
 * GET /v1/markets from memory: the catalogue of the request's lake version, read once per version (with every
 * sort's order ranked by DuckDB) and then filtered and paged here, so a list costs no lake scan. The filters
 * are listMarketsQuery's WHERE clause (src/query/markets.ts) restated over the rows; the pages are its pages.
 */

type Entry = {
  row: Row;
  /** Lower-cased as DuckDB's ILIKE and lower() do (see `lower`); null where the column is NULL. */
  question: string | null;
  category: string | null;
  endUs: bigint | null;
};
type Catalogue = { entries: Entry[]; orders: Record<SortBy, Int32Array> };

const catalogues = new StampedCache<Catalogue>({ maxEntries: 16 });
const rawSeries = new StampedCache<Set<string>>({ maxEntries: 64 });

const rawKey = (eventTypes: readonly string[]): string => `raw\u0000${eventTypes.join('\u0000')}`;

/**
 * Whether the list `f` asks for is answered without reading the lake: the version's catalogue (and the raw
 * series' condition ids it needs) is held or already being read by another request.
 */
export function catalogueHeld(lake: LakeSession, f: Pick<MarketListFilter, 'series'>): boolean {
  if (!catalogues.has(lake, 'markets')) return false;
  return !(f.series && 'rawEventTypes' in f.series) || rawSeries.has(lake, rawKey(f.series.rawEventTypes));
}

/** One page of the list: exactly the rows listMarketsQuery(f) returns, in its order. */
export async function listFromCatalogue(lake: LakeSession, f: MarketListFilter): Promise<Row[]> {
  const { entries, orders } = (await catalogues.get(lake, 'markets', () => readCatalogue(lake))).value;
  let inSeries: ((r: Row) => boolean) | null = null;
  const series = f.series;
  if (series && 'seriesId' in series) inSeries = (r) => r.series_id === series.seriesId;
  else if (series && 'none' in series) return [];
  else if (series && 'rawEventTypes' in series) {
    const ids = (await rawSeries.get(lake, rawKey(series.rawEventTypes), () => readRawIds(lake, series.rawEventTypes))).value;
    inSeries = (r) => typeof r.condition_id === 'string' && ids.has(r.condition_id);
  }
  const search = f.search === undefined || f.search === '' ? null : lower(f.search);
  const category = f.category === undefined ? null : lower(f.category);
  const positive = (v: unknown): boolean => typeof v === 'number' && v > 0;
  const keep = (e: Entry): boolean => {
    const r = e.row;
    if (f.active !== undefined && r.active !== f.active) return false;
    if (f.closed !== undefined && r.closed !== f.closed) return false;
    if (f.resolved !== undefined && r.resolved !== f.resolved) return false;
    if (search !== null && (e.question === null || !e.question.includes(search))) return false;
    if (category !== null && e.category !== category) return false;
    if (inSeries && !inSeries(r)) return false;
    if (f.dataType === 'trades' || f.dataType === 'ohlcv') {
      if (!positive(r.trade_count)) return false;
    } else if (f.dataType === 'orderbook') {
      if (!positive(r.orderbook_count)) return false;
    } else if (f.hasData === true && !positive(r.trade_count) && !positive(r.orderbook_count)) return false;
    if (f.endingAfter !== undefined && (e.endUs === null || e.endUs < f.endingAfter)) return false;
    if (f.endingBefore !== undefined && (e.endUs === null || e.endUs > f.endingBefore)) return false;
    return true;
  };
  const out: Row[] = [];
  let skip = f.offset;
  for (const i of orders[listSort(f)]) {
    const e = entries[i]!;
    if (!keep(e)) continue;
    if (skip > 0) skip--;
    else if (out.push(e.row) >= f.limit) break;
  }
  return out;
}

async function readCatalogue(lake: LakeSession): Promise<Catalogue> {
  const rows = await lake.rows(marketCatalogueQuery(lake.sources));
  const orders = Object.fromEntries(SORT_BY.map((s) => [s, new Int32Array(rows.length)])) as Record<SortBy, Int32Array>;
  const entries = rows.map((r, i): Entry => {
    for (const s of SORT_BY) orders[s][Number(r[`rank_${s}`]) - 1] = i;
    return {
      row: r,
      question: typeof r.question === 'string' ? lower(r.question) : null,
      category: typeof r.category === 'string' ? lower(r.category) : null,
      endUs: typeof r.end_us === 'string' ? BigInt(r.end_us) : null,
    };
  });
  return { entries, orders };
}

async function readRawIds(lake: LakeSession, eventTypes: readonly string[]): Promise<Set<string>> {
  const rows = await lake.rows(rawConditionIdsQuery(lake.sources, eventTypes));
  return new Set(rows.map((r) => String(r.cid)));
}

/**
 * Lower case as DuckDB's lower() and ILIKE compute it: one code point at a time (utf8proc's simple mapping).
 * String.prototype.toLowerCase differs in two places: a final capital sigma becomes ς (DuckDB: σ everywhere),
 * and İ becomes i + a combining dot (DuckDB: i).
 */
function lower(s: string): string {
  // eslint-disable-next-line no-control-regex
  if (/^[\x00-\x7f]*$/.test(s)) return s.toLowerCase();
  let out = '';
  for (const c of s) out += c === '\u0130' ? 'i' : c.toLowerCase();
  return out;
}
