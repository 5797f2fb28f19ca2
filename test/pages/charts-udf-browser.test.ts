import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chromium, type Browser, type Page } from 'playwright-core';
import { buildQueryLake, type QueryLake } from '../helpers/query-lake.js';

/**
 * The TradingView UDF routes driven by a real UDF client flow in a real browser (Debian chromium): the /charts
 * page with Source "UDF datafeed" runs config → symbols → history as the charting library's
 * UDFCompatibleDatafeed does, with the user's key. The requests are watched from outside the page (playwright's
 * network events, not the page's own record), and the bars the client received are checked against
 * /v1/trades/ohlcv for the same market, outcome, timeframe and window.
 */

type Bar = { t: number; o: number; h: number; l: number; c: number; v: number };
type Seen = { path: string; query: URLSearchParams; key: string | undefined };
type Udf = {
  config: Record<string, unknown>;
  symbolInfo: Record<string, any>;
  resolution: string;
  history: { s: string; t: number[]; o: number[]; h: number[]; l: number[]; c: number[]; v: number[] };
  bars: { time: number; open: number; high: number; low: number; close: number; volume: number }[];
};

/** What the datafeed client handed the chart (the library's bars: time in ms), as UDF bars (t in seconds). */
function received(u: Udf): Bar[] {
  return u.bars.map((b) => ({ t: b.time / 1000, o: b.open, h: b.high, l: b.low, c: b.close, v: b.volume }));
}

describe('UDF datafeed client flow in a real browser', () => {
  let L: QueryLake;
  let browser: Browser;
  let market: { id: string; question: string; outcomes: string[] };
  beforeAll(async () => {
    if (!fs.existsSync('/usr/bin/chromium')) execFileSync('bash', ['scripts/ensure-system-deps.sh'], { stdio: 'inherit' });
    L = await buildQueryLake();
    browser = await chromium.launch({
      executablePath: '/usr/bin/chromium',
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'],
    });
    const list = await L.get('/v1/markets?limit=50');
    expect(list.status).toBe(200);
    market = (list.body as any[]).find((m) => m.trade_count > 50 && m.outcomes.length > 1);
    expect(market).toBeDefined();
  }, 180_000);
  afterAll(async () => {
    await browser?.close();
    await L?.close();
  });

  /** /v1/trades/ohlcv for the window a countback history request covers: the newest `n` bars starting at or before `to`. */
  async function ohlcv(outcome: number, timeframe: string, to: number, n: number): Promise<Bar[]> {
    const end = new Date((to + 1) * 1000).toISOString();
    const r = await L.get(`/v1/trades/ohlcv?market_id=${market.id}&outcome=${outcome}&timeframe=${timeframe}&limit=${n}&end=${encodeURIComponent(end)}`);
    expect(r.status).toBe(200);
    // ISO timestamps newest first there; unix seconds oldest first in UDF (the trade count is the API's extra)
    type Row = { timestamp: string; open: number; high: number; low: number; close: number; volume: number };
    return (r.body as Row[]).reverse().map((b) => ({ t: Date.parse(b.timestamp) / 1000, o: b.open, h: b.high, l: b.low, c: b.close, v: b.volume }));
  }

  async function loadUdf(page: Page, resolution: string): Promise<Udf> {
    const before = await page.evaluate(() => JSON.stringify((window as any).__udf?.history ?? null));
    await page.fill('#timeframe', resolution);
    await page.press('#timeframe', 'Enter');
    await page
      .waitForFunction(
        ([r, b]) => {
          const u = (window as any).__udf;
          return u?.resolution === r && u.history !== null && JSON.stringify(u.history) !== b && (window as any).__chartData?.timeframe === r;
        },
        [resolution, before] as const,
        { timeout: 30_000 },
      )
      .catch(async (e) => {
        throw new Error(`${String(e)} status=${await page.textContent('#status')}`);
      });
    return (await page.evaluate(() => (window as any).__udf)) as Udf;
  }

  it('config → symbols → history with the key; bars equal /v1/trades/ohlcv at 7 and 2D; no console errors', async () => {
    const page = await browser.newPage({ viewport: { width: 1200, height: 800 } });
    const problems: string[] = [];
    page.on('console', (m) => {
      if (m.type() === 'error' || m.type() === 'warning') problems.push(`${m.type()}: ${m.text()}`);
    });
    page.on('pageerror', (e) => problems.push(`pageerror: ${e.message}`));
    const seen: Seen[] = [];
    page.on('request', (r) => {
      const u = new URL(r.url());
      if (u.pathname.startsWith('/v1/charts/udf/'))
        seen.push({ path: u.pathname.slice('/v1/charts/udf/'.length), query: u.searchParams, key: r.headers()['x-api-key'] });
    });
    try {
      await page.goto(`${L.srv.url}/charts`);
      expect(seen).toEqual([]); // nothing before the user asks for UDF
      await page.fill('#key', L.key);
      await page.selectOption('#source', 'udf');
      await page.fill('#timeframe', '7');
      const words = String(market.question).split(/\s+/);
      await page.fill('#search', words.slice(0, Math.min(3, words.length)).join(' '));
      await page.click(`#results button[data-id="${market.id}"]`);
      await page.waitForFunction(() => (window as any).__udf?.history !== null && (window as any).__chartData?.source === 'udf', null, { timeout: 30_000 });
      const u7 = (await page.evaluate(() => (window as any).__udf)) as Udf;

      // The flow, in order, each with the user's key.
      expect(seen.map((s) => s.path)).toEqual(['config', 'symbols', 'history']);
      for (const s of seen) expect(s.key).toBe(L.key);
      expect(seen[1]!.query.get('symbol')).toBe(market.id);
      const h = seen[2]!.query;
      expect(h.get('symbol')).toBe(u7.symbolInfo.ticker);
      expect(h.get('resolution')).toBe('7');
      const to = Number(h.get('to'));
      const countback = Number(h.get('countback'));
      expect(Number(h.get('from'))).toBeLessThan(to);
      expect(Math.abs(to - Date.now() / 1000)).toBeLessThan(120);
      expect(countback).toBe(2000);

      // config as the library reads it.
      expect(u7.config.supports_search).toBe(true);
      expect(u7.config.supports_group_request).toBe(false);
      expect(u7.config.supported_resolutions).toEqual(expect.arrayContaining(['1', '60', '1D']));

      // The symbol info fields the library requires, present and sane.
      const info = u7.symbolInfo;
      expect(info.name).toBe(market.id);
      expect(info.ticker).toBe(market.id);
      expect(info.session).toBe('24x7');
      expect(info.timezone).toBe('Etc/UTC');
      expect(Number.isInteger(info.pricescale) && info.pricescale >= 100 && Math.log10(info.pricescale) % 1 === 0).toBe(true);
      expect(info.minmov).toBe(1);
      expect(info.has_intraday).toBe(true);
      expect(Array.isArray(info.supported_resolutions) && info.supported_resolutions.length > 0).toBe(true);
      expect(info.supported_resolutions).toEqual(u7.config.supported_resolutions);
      expect(typeof info.description).toBe('string');

      // The bars received at 7 (minutes, not an anchor timeframe) are /v1/trades/ohlcv at 7m for the same window.
      expect(u7.history.s).toBe('ok');
      expect(u7.bars.map((b) => b.time / 1000)).toEqual(u7.history.t);
      expect(u7.history.t).toEqual([...u7.history.t].sort((a, b) => a - b));
      const want7 = await ohlcv(0, '7m', to, countback);
      expect(want7.length).toBeGreaterThan(5);
      expect(received(u7)).toEqual(want7);
      for (const t of u7.history.t) expect(t % 420).toBe(0);
      // The page sizes its bars by the resolution: the scrub ends where the last 7-minute bar does.
      expect(Number(await page.getAttribute('#scrub', 'max'))).toBe(u7.history.t.at(-1)! + 420);
      // ... and they are what the chart holds.
      const drawn = await page.evaluate(() => (window as any).__series.candles.data());
      expect(drawn).toEqual(want7.map((b) => ({ time: b.t, open: b.o, high: b.h, low: b.l, close: b.c })));

      // 2D (two days, not an anchor timeframe): symbol info is cached, as the library does; only history is asked.
      const u2d = await loadUdf(page, '2D');
      expect(seen.map((s) => s.path)).toEqual(['config', 'symbols', 'history', 'history']);
      const h2 = seen[3]!.query;
      expect(h2.get('resolution')).toBe('2D');
      expect(seen[3]!.key).toBe(L.key);
      const want2d = await ohlcv(0, '2d', Number(h2.get('to')), Number(h2.get('countback')));
      expect(want2d.length).toBeGreaterThan(0);
      expect(received(u2d)).toEqual(want2d);
      for (const t of u2d.history.t) expect(t % 172_800).toBe(0);

      // Another outcome is another symbol: symbols, then history, for `<id>.1`.
      await page.selectOption('#outcome', '1');
      await page.waitForFunction((id) => (window as any).__udf?.symbolInfo?.ticker === `${id}.1` && (window as any).__chartData?.outcome === 1, market.id, {
        timeout: 30_000,
      });
      expect(seen.slice(4).map((s) => s.path)).toEqual(['symbols', 'history']);
      expect(seen[4]!.query.get('symbol')).toBe(`${market.id}.1`);
      const u1 = (await page.evaluate(() => (window as any).__udf)) as Udf;
      const h1 = seen[5]!.query;
      expect(u1.symbolInfo).toMatchObject({ name: `${market.id}.1`, market_id: market.id, outcome: 1 });
      expect(received(u1)).toEqual(await ohlcv(1, '2d', Number(h1.get('to')), Number(h1.get('countback'))));
      expect(problems).toEqual([]);
    } finally {
      await page.close();
    }
  }, 120_000);
});
