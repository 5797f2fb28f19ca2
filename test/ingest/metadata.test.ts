import fs from 'node:fs';
import path from 'node:path';
import zlib from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runIngest, type IngestReport } from '../../ingest/run.js';
import { derivedMarketId } from '../../ingest/catalog.js';
import { md5Hex, query, tempDir } from './fills-oracle.js';
import { currentFiles } from '../../src/lake/versions.js';
import { files } from '../helpers/lake-files.js';

/**
 * Every market-metadata fixture ingests, and the catalogue agrees with an independent plain-TypeScript reading
 * of the same files.
 */
const DIR = path.resolve('test/fixtures/venue/markets');
const F = (f: string) => path.join(DIR, f);
type J = Record<string, unknown>;
const readJson = (f: string): unknown => JSON.parse(fs.readFileSync(F(f), 'utf8'));

/** RFC 4180 CSV (quoted fields, doubled quotes). */
function parseCsv(text: string): Record<string, string>[] {
  const rows: string[][] = [];
  let row: string[] = [];
  let cur = '';
  let q = false;
  for (let i = 0; i < text.length; i += 1) {
    const c = text[i]!;
    if (q) {
      if (c === '"' && text[i + 1] === '"') {
        cur += '"';
        i += 1;
      } else if (c === '"') q = false;
      else cur += c;
    } else if (c === '"') q = true;
    else if (c === ',') {
      row.push(cur);
      cur = '';
    } else if (c === '\n') {
      row.push(cur);
      rows.push(row);
      row = [];
      cur = '';
    } else if (c !== '\r') cur += c;
  }
  if (cur !== '' || row.length > 0) {
    row.push(cur);
    rows.push(row);
  }
  const [head, ...body] = rows;
  return body.map((r) => Object.fromEntries(head!.map((h, i) => [h, r[i] ?? ''])));
}

// ---- the oracle: plain reading of each file -----------------------------------------------------------------
const events = readJson('gamma_events_2020-2022.json') as J[];
const negrisk = readJson('gamma_event_negrisk.json') as J[];
const btc = readJson('gamma_market_btc_5m.json') as J;
const gammaMarkets: J[] = [...events, ...negrisk].flatMap((e) => e.markets as J[]).concat([btc]);
const dump = zlib
  .gunzipSync(fs.readFileSync(F('btc_5m_markets_2026-07-24.jsonl.gz')))
  .toString('utf8')
  .trim()
  .split('\n')
  .map((l) => JSON.parse(l) as J);
const clob: J[] = [...(readJson('clob_markets_2025-10.json') as J[]), ...((readJson('clob_markets_page_enveloped.json') as J).data as J[])];
const csv = parseCsv(fs.readFileSync(F('markets_catalog_2026-04.csv'), 'utf8'));

const lc = (s: unknown) => String(s).toLowerCase();
const idToCid = new Map<string, string>();
for (const m of gammaMarkets) idToCid.set(String(m.id), lc(m.conditionId));
for (const d of dump) idToCid.set(String((d.raw as J).id), lc(d.condition_id));
const cids = new Set([...gammaMarkets.map((m) => lc(m.conditionId)), ...dump.map((d) => lc(d.condition_id)), ...clob.map((c) => lc(c.condition_id))]);
const csvOnly = csv.filter((r) => !idToCid.has(r.market_id!));
const EXPECTED_MARKETS = cids.size + csvOnly.length;

const tmp = tempDir('pmlake-meta-');
const lake = path.join(tmp.dir, 'lake');
let report: IngestReport;
type Row = Record<string, unknown>;
let byCid: Map<string, Row>;
let byId: Map<string, Row>;
let tokens: Map<string, Row>;

beforeAll(async () => {
  report = await runIngest([DIR], { lakeDir: lake });
  const markets = await query(`SELECT * FROM read_parquet(${files(lake, 'catalog/markets')})`);
  byCid = new Map(markets.filter((m) => m.condition_id).map((m) => [String(m.condition_id), m]));
  byId = new Map(markets.map((m) => [String(m.id), m]));
  tokens = new Map((await query(`SELECT * FROM read_parquet(${files(lake, 'catalog/tokens')})`)).map((t) => [String(t.token_id), t]));
});
afterAll(() => tmp.cleanup());

describe('market metadata fixtures', () => {
  it('ingests every file without issues', () => {
    expect(report.ingested).toBe(fs.readdirSync(DIR).length);
    expect(report.failed).toBe(0);
    expect(report.issues).toEqual([]);
  });

  it('has one market per condition id, plus CSV markets known only by Gamma id', () => {
    expect(byId.size).toBe(EXPECTED_MARKETS);
    expect(byCid.size).toBe(cids.size);
  });

  it('keeps Gamma markets as published: id, outcomes, outcome_token_ids parallel to outcomes', () => {
    for (const m of gammaMarkets) {
      const row = byCid.get(lc(m.conditionId))!;
      expect(row.id).toBe(String(m.id));
      expect(row.id_derived).toBe(false);
      expect(row.question).toBe(m.question);
      expect(row.outcomes).toEqual(JSON.parse(String(m.outcomes)));
      if (m.clobTokenIds) {
        const toks = JSON.parse(String(m.clobTokenIds)) as string[];
        expect(row.outcome_token_ids).toEqual(toks);
        toks.forEach((t, i) =>
          expect(tokens.get(t)).toMatchObject({ market_id: String(m.id), outcome_index: i, outcome_label: (row.outcomes as string[])[i] }),
        );
      } else expect(row.outcome_token_ids).toBeNull();
    }
    const b = byId.get(String(btc.id))!;
    expect(b).toMatchObject({ series_id: 'btc-up-or-down-5m', event_id: '260654', closed: false, resolved: false, winning_outcome: null });
  });

  it('resolves Gamma markets by their settled prices', () => {
    for (const m of gammaMarkets) {
      const prices = (JSON.parse(String(m.outcomePrices)) as string[]).map(Number);
      const max = Math.max(...prices);
      const resolved = m.umaResolutionStatus === 'resolved' || m.umaResolutionStatus === 'settled' || (m.closed === true && max >= 0.99);
      const row = byCid.get(lc(m.conditionId))!;
      expect(row.resolved).toBe(resolved);
      expect(row.winning_outcome).toBe(resolved && max >= 0.99 ? prices.indexOf(max) : null);
    }
  });

  it('gives CLOB-only markets a stable derived id and the winner flag as winning_outcome', () => {
    for (const c of clob) {
      const row = byCid.get(lc(c.condition_id))!;
      expect(row.id).toBe(derivedMarketId(lc(c.condition_id), md5Hex));
      expect(row.id_derived).toBe(true);
      const toks = c.tokens as J[];
      const w = toks.findIndex((t) => t.winner === true);
      expect(row.winning_outcome).toBe(w === -1 ? null : w);
      expect(row.outcomes).toEqual(toks.map((t) => t.outcome));
      if (toks.every((t) => t.token_id)) {
        toks.forEach((t, i) => expect(tokens.get(String(t.token_id))).toMatchObject({ market_id: row.id, outcome_index: i }));
      }
    }
  });

  it('reads JSONL dumps: resolution from outcome prices, series from asset and interval', () => {
    for (const d of dump) {
      const row = byCid.get(lc(d.condition_id))!;
      const prices = d.outcome_prices as string[];
      expect(row).toMatchObject({ id: String((d.raw as J).id), resolved: true, winning_outcome: prices.indexOf('1'), series_id: 'btc-up-or-down-5m' });
      expect(row.outcome_token_ids).toEqual(d.token_ids);
    }
  });

  it('reads the catalogue CSV and merges its rows with Gamma records by id', () => {
    for (const r of csv.filter((_, i) => i % 97 === 0).concat(csv.filter((r) => idToCid.has(r.market_id!)))) {
      const row = byId.get(r.market_id!)!;
      expect(row.question).toBe(r.question);
      expect(row.outcomes).toEqual(JSON.parse(r.outcomes!));
      if (!idToCid.has(r.market_id!)) {
        expect(row).toMatchObject({ category: r.category, condition_id: null, sources: ['csv'] });
        expect(row.volume).toBeCloseTo(Number(r.volume), 6);
        expect(row.active).toBe(r.active === '1');
      } else {
        // Gamma outranks the CSV: its numbers win, and the market keeps its condition id and tokens.
        const g = gammaMarkets.find((m) => String(m.id) === r.market_id)!;
        expect(row).toMatchObject({ condition_id: lc(g.conditionId), sources: ['csv', 'gamma'] });
        expect(row.volume).toBeCloseTo(Number(g.volumeNum), 6);
      }
    }
  });

  it('builds the series catalogue from event series and dump intervals', async () => {
    const series = await query(`SELECT * FROM read_parquet(${files(lake, 'catalog/series')})`);
    const s = new Map(series.map((r) => [String(r.series_id), r]));
    const want = new Set(events.flatMap((e) => ((e.series as J[]) ?? []).map((x) => String(x.slug))).concat('btc-up-or-down-5m'));
    expect(new Set(s.keys())).toEqual(want);
    expect(s.get('btc-up-or-down-5m')).toMatchObject({
      name: 'BTC Up or Down 5m',
      asset: 'Bitcoin',
      asset_symbol: 'BTC',
      timeframe: '5m',
      asset_class: 'crypto',
    });
    expect(s.get('nba')).toMatchObject({ name: 'NBA', recurrence: 'daily', timeframe: 'daily' });
    // A series' category is the most common category of its markets (events of one series disagree).
    for (const slug of ['nba', 'btc-weeklies']) {
      const counts = new Map<string, number>();
      for (const e of events.filter((x) => x.seriesSlug === slug)) {
        for (const m of e.markets as J[]) {
          const c = String(m.category ?? e.category)
            .trim()
            .toLowerCase()
            .replace(/[^a-z0-9]+/g, '_');
          counts.set(c, (counts.get(c) ?? 0) + 1);
        }
      }
      const top = [...counts].sort((a, b) => b[1] - a[1])[0]![0];
      expect(s.get(slug)!.category).toBe(top);
    }
    expect(s.get('btc-weeklies')).toMatchObject({ asset_symbol: 'BTC', asset: 'Bitcoin', asset_class: 'crypto', timeframe: 'weekly' });
    for (const m of byId.values()) if (m.series_id) expect(s.has(String(m.series_id))).toBe(true);
  });

  it('every token row points at a market that lists it', () => {
    for (const t of tokens.values()) {
      const m = byId.get(String(t.market_id))!;
      expect(m.outcome_token_ids as string[]).toContain(t.token_id);
    }
  });

  it('re-ingest changes nothing, and file order does not matter', async () => {
    const cat = (['markets', 'tokens', 'series'] as const).flatMap((d) => currentFiles(lake, d));
    const mtimes = cat.map((f) => fs.statSync(f).mtimeMs);
    const again = await runIngest([DIR], { lakeDir: lake });
    expect(again.skipped).toBe(fs.readdirSync(DIR).length);
    expect(again.versions_published).toEqual([]);
    expect((['markets', 'tokens', 'series'] as const).flatMap((d) => currentFiles(lake, d))).toEqual(cat);
    expect(cat.map((f) => fs.statSync(f).mtimeMs)).toEqual(mtimes);
    // One file per run, in reverse order, lands the same catalogue.
    const lake2 = path.join(tmp.dir, 'reverse');
    for (const f of fs.readdirSync(DIR).sort().reverse()) await runIngest([F(f)], { lakeDir: lake2 });
    for (const d of ['markets', 'tokens', 'series']) {
      const a = `read_parquet(${files(lake, `catalog/${d}`)})`;
      const b = `read_parquet(${files(lake2, `catalog/${d}`)})`;
      const [diff] = await query(
        `SELECT (SELECT count(*) FROM (FROM ${a} EXCEPT ALL FROM ${b})) + (SELECT count(*) FROM (FROM ${b} EXCEPT ALL FROM ${a})) AS n`,
      );
      expect([d, diff!.n]).toEqual([d, '0']);
    }
  });
});
