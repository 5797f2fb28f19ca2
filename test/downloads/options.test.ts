import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildDownloadsLake, parseCsv, type DlLake } from '../helpers/downloads-lake.js';
import { files } from '../helpers/lake-files.js';

/**
 * Options data: generator → real ingest (ingest/options.ts) → lake → /v1/download/options. Greeks are
 * computed in SQL (Zelen–Severo normal CDF) and checked here against an independent Black-76 whose normal
 * CDF is a numerical integral of the density (Simpson's rule), nothing shared with the SQL.
 */
let L: DlLake;
beforeAll(async () => {
  L = await buildDownloadsLake({ seed: 3, markets: 2 });
});
afterAll(async () => {
  await L?.close();
});

function pdf(x: number): number {
  return Math.exp(-0.5 * x * x) / Math.sqrt(2 * Math.PI);
}
function cdf(x: number): number {
  // N(x) = 1/2 + ∫_0^x φ, Simpson with 2000 panels: error far below 1e-9 for |x| < 10.
  const n = 2000;
  const h = x / n;
  let s = pdf(0) + pdf(x);
  for (let i = 1; i < n; i++) s += (i % 2 ? 4 : 2) * pdf(i * h);
  return 0.5 + (s * h) / 3;
}
function black76(F: number, K: number, T: number, sigma: number, call: boolean) {
  const rt = Math.sqrt(T);
  const d1 = (Math.log(F / K) + 0.5 * sigma * sigma * T) / (sigma * rt);
  return {
    delta: call ? cdf(d1) : cdf(d1) - 1,
    gamma: pdf(d1) / (F * sigma * rt),
    vega: (F * pdf(d1) * rt) / 100,
    theta: -(F * pdf(d1) * sigma) / (2 * rt) / 365,
  };
}

describe('options', () => {
  it('ingest parses instrument names into underlying, expiry (08:00 UTC), strike and type', async () => {
    const rows = await L.rows(`SELECT instrument_name, underlying, expiry, strike, option_type FROM read_parquet(${files(L.lakeDir, 'options')}) LIMIT 200`);
    expect(rows.length).toBeGreaterThan(0);
    for (const r of rows) {
      const [u, d, k, t] = String(r.instrument_name).split('-');
      expect(r.underlying).toBe(u);
      expect(r.strike).toBe(Number(k));
      expect(r.option_type).toBe(t);
      const e = r.expiry as Date;
      expect(e.getUTCHours()).toBe(8);
      expect(
        `${e.getUTCDate()}${['JAN', 'FEB', 'MAR', 'APR', 'MAY', 'JUN', 'JUL', 'AUG', 'SEP', 'OCT', 'NOV', 'DEC'][e.getUTCMonth()]}${String(e.getUTCFullYear()).slice(2)}`,
      ).toBe(d);
    }
  });

  it('a bad line is reported with its line number and the rest lands', async () => {
    const { optionsHandler } = await import('../../ingest/options.js');
    const { DuckDBInstance } = await import('@duckdb/node-api');
    const db = await DuckDBInstance.create(':memory:');
    const conn = await db.connect();
    const f = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'opt-')), 'o.jsonl');
    fs.writeFileSync(
      f,
      [
        '{"instrument_name":"BTC-27JUN25-100000-C","timestamp":1719475200000,"trade_id":"1","price":0.0123,"iv":55.2,"index_price":98000.5,"amount":1.5,"direction":"buy"}',
        '{"instrument_name":"NOT-AN-OPTION","timestamp":1,"trade_id":"2","price":1,"iv":1,"index_price":1,"amount":1,"direction":"buy"}',
        'garbage',
        '{"instrument_name":"ETH-3JAN25-3500-P","timestamp":1735000000000,"trade_id":"3","price":0.05,"iv":60,"index_price":3400,"amount":2,"direction":"sell"}',
      ].join('\n'),
    );
    const ctx = { conn, lakeDir: '', log: undefined as never, snapshotSeconds: 60, issues: [] as { line?: number }[], counts: {} as Record<string, number> };
    await optionsHandler.stage(ctx as never, f);
    expect(ctx.issues.map((i) => i.line)).toEqual([2, 3]);
    const rows = (await conn.runAndReadAll('SELECT trade_id, expiry, strike FROM stg_options ORDER BY trade_id')).getRowObjectsJS();
    expect(rows.map((r) => r.trade_id)).toEqual(['1', '3']);
    expect((rows[0]!.expiry as Date).toISOString()).toBe('2025-06-27T08:00:00.000Z');
    conn.closeSync();
    db.closeSync();
  });

  it('greeks from SQL equal an independent Black-76', async () => {
    const res = await L.fetch('/v1/download/options?series_id=deribit:btc-options&data_type=greeks&format=json&limit=2000000');
    expect(res.status).toBe(200);
    const rows = JSON.parse(await res.text()) as Record<string, any>[];
    expect(rows.length).toBeGreaterThan(10);
    let checked = 0;
    for (const r of rows) {
      expect(r.underlying).toBe('BTC');
      const T = (Date.parse(r.expiry) - Date.parse(r.timestamp)) / (365 * 86_400_000);
      if (T <= 0) {
        expect(r.delta).toBeNull();
        continue;
      }
      const g = black76(r.index_price, r.strike, T, r.iv / 100, r.option_type === 'C');
      expect(r.delta).toBeCloseTo(g.delta, 6);
      expect(r.gamma / g.gamma).toBeCloseTo(1, 6);
      expect(r.vega / g.vega).toBeCloseTo(1, 6);
      expect(r.theta / g.theta).toBeCloseTo(1, 6);
      checked++;
    }
    expect(checked).toBeGreaterThan(10);
  });

  it('trades CSV filtered by instrument_prefix; unknown series and data types are typed errors', async () => {
    const all = parseCsv(await (await L.fetch('/v1/download/options?series_id=deribit:eth-options&limit=2000000')).text());
    const hdr = all[0]!;
    const name = all[1]![hdr.indexOf('instrument_name')]!;
    const prefix = name.split('-').slice(0, 2).join('-') + '-';
    const some = parseCsv(await (await L.fetch(`/v1/download/options?series_id=deribit:eth-options&instrument_prefix=${prefix}&limit=2000000`)).text());
    expect(some.length).toBeGreaterThan(1);
    expect(some.slice(1).every((r) => r[hdr.indexOf('instrument_name')]!.startsWith(prefix))).toBe(true);
    expect(some.length - 1).toBe(all.slice(1).filter((r) => r[hdr.indexOf('instrument_name')]!.startsWith(prefix)).length);
    const bad = await L.fetch('/v1/download/options?series_id=polymarket:btc');
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { detail: { code: string } }).detail.code).toBe('not_options_series');
    // Snapshots are not captured for options (the data set holds trades): refused up front as a 422 naming data_type.
    const snap = await L.fetch('/v1/download/options?series_id=deribit:btc-options&data_type=snapshots');
    expect(snap.status).toBe(422);
    expect(((await snap.json()) as { detail: { loc: string[] }[] }).detail[0]!.loc).toEqual(['query', 'data_type']);
  });
});
