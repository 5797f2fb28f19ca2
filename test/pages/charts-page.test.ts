import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chromium, type Browser, type Page } from 'playwright-core';
import { buildQueryLake, type QueryLake } from '../helpers/query-lake.js';

/**
 * The /charts page driven by a real browser (Debian chromium) over a real server and lake: a user types a key,
 * searches, picks a market, and sees candles whose values are the API's and a depth view that follows the
 * instant clicked on the chart. Screenshots at two sizes go to test-artifacts/charts/ (git-ignored).
 */
const ARTIFACTS = path.resolve('test-artifacts/charts');

type Bar = { timestamp: string; open: number; high: number; low: number; close: number; volume: number; trade_count: number };
type Depth = { at: string; bids: { price: number; size: number }[]; asks: { price: number; size: number }[] };

describe('charts page in a real browser', () => {
  let L: QueryLake;
  let browser: Browser;
  beforeAll(async () => {
    if (!fs.existsSync('/usr/bin/chromium')) execFileSync('bash', ['scripts/ensure-system-deps.sh'], { stdio: 'inherit' });
    L = await buildQueryLake();
    browser = await chromium.launch({
      executablePath: '/usr/bin/chromium',
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'],
    });
    fs.mkdirSync(ARTIFACTS, { recursive: true });
  }, 180_000);
  afterAll(async () => {
    await browser?.close();
    await L?.close();
  });

  it('serves the page, its script and the library itself, public, with a CSP', async () => {
    const page = await fetch(`${L.srv.url}/charts`);
    expect(page.status).toBe(200);
    expect(page.headers.get('content-type')).toBe('text/html; charset=utf-8');
    expect(page.headers.get('content-security-policy')).toContain("script-src 'self'");
    const html = await page.text();
    expect(html).not.toMatch(/https?:\/\//); // nothing from another origin
    for (const p of ['/charts/charts.js', '/charts/lightweight-charts.js']) {
      const r = await fetch(`${L.srv.url}${p}`);
      expect(r.status).toBe(200);
      expect(r.headers.get('content-type')).toBe('text/javascript; charset=utf-8');
      expect((await r.text()).length).toBeGreaterThan(1000);
    }
    const docs = await (await fetch(`${L.srv.url}/docs`)).text();
    expect(docs).toContain('href="/charts"');
  });

  async function clickChartAt(page: Page, fraction: number): Promise<Depth> {
    const box = (await page.locator('#chart').boundingBox())!;
    const before = await page.evaluate(() => JSON.stringify((window as any).__depth));
    // A person's pace: the library reads two clicks within 500 ms as a double click, not two clicks.
    await page.waitForTimeout(600);
    await page.mouse.click(box.x + box.width * fraction, box.y + box.height / 2);
    await page
      .waitForFunction((b) => JSON.stringify((window as any).__depth) !== b, before, { timeout: 20_000 })
      .catch(async (e) => {
        await page.screenshot({ path: path.join(ARTIFACTS, 'debug.png') });
        throw new Error(`${String(e)} status=${await page.textContent('#status')} at=${await page.textContent('#at')}`);
      });
    return (await page.evaluate(() => (window as any).__depth)) as Depth;
  }

  it('draws the API candles of a searched market and the depth at the clicked instants', async () => {
    // The busiest market with both trades and book data, found through the API.
    const list = await L.get('/v1/markets?limit=50');
    expect(list.status).toBe(200);
    const market = (list.body as any[]).find((m) => m.trade_count > 50 && m.orderbook_count > 50);
    expect(market).toBeDefined();
    const words = String(market.question).split(/\s+/);
    const term = words.slice(0, Math.min(3, words.length)).join(' ');

    const page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
    const problems: string[] = [];
    page.on('console', (m) => {
      if (m.type() === 'error' || m.type() === 'warning') problems.push(`${m.type()}: ${m.text()}`);
    });
    page.on('pageerror', (e) => problems.push(`pageerror: ${e.message}`));
    try {
      await page.goto(`${L.srv.url}/charts`);
      await page.fill('#key', L.key);
      await page.fill('#timeframe', '7m');
      await page.fill('#search', term);
      await page.click(`#results button[data-id="${market.id}"]`);
      await page.waitForFunction(() => (window as any).__chartData?.candles?.length > 0 && (window as any).__depth !== null, null, { timeout: 30_000 });

      // The candles drawn are the API's, oldest first.
      const drawn = (await page.evaluate(() => (window as any).__chartData)) as { market_id: string; timeframe: string; candles: Bar[] };
      expect(drawn.market_id).toBe(market.id);
      expect(drawn.timeframe).toBe('7m');
      const api = await L.get(`/v1/trades/ohlcv?market_id=${market.id}&outcome=0&timeframe=7m&limit=2000`);
      expect(api.status).toBe(200);
      const apiBars = (api.body as Bar[]).slice().reverse();
      expect(apiBars.length).toBeGreaterThan(5);
      expect(drawn.candles).toEqual(apiBars);
      // And those are what the library holds in its candlestick and volume series (times in UTC seconds).
      const series = await page.evaluate(() => {
        const w = window as any;
        return { candles: w.__series.candles.data(), volume: w.__series.volume.data().map((v: any) => ({ time: v.time, value: v.value })) };
      });
      const t = (iso: string): number => Date.parse(iso) / 1000;
      expect(series.candles).toEqual(apiBars.map((x) => ({ time: t(x.timestamp), open: x.open, high: x.high, low: x.low, close: x.close })));
      expect(series.volume).toEqual(apiBars.map((x) => ({ time: t(x.timestamp), value: x.volume })));

      // The tape's coverage under the chart: for the candles' days (first bar's day to the last bar's close), one
      // cell per day of the API's coverage of outcome 0, with its status.
      await page.waitForFunction(() => (window as any).__coverage !== null, null, { timeout: 20_000 });
      const day = (ms: number): string => new Date(ms).toISOString().slice(0, 10);
      const covStart = day(Date.parse(apiBars[0]!.timestamp));
      const covEnd = day(Date.parse(apiBars[apiBars.length - 1]!.timestamp) + 7 * 60_000 - 1);
      const cov = await L.get(`/v1/markets/${market.id}/coverage?start=${covStart}&end=${covEnd}`);
      expect(cov.status).toBe(200);
      const apiDays = (cov.body.days as { date: string; outcome: number; status: string }[])
        .filter((d) => d.outcome === 0)
        .map((d) => ({ date: d.date, status: d.status }));
      expect(apiDays.length).toBeGreaterThan(0);
      const cells = await page.$$eval('#tape span', (xs) => xs.map((x) => ({ date: (x as HTMLElement).dataset.date, status: x.className })));
      expect(cells).toEqual(apiDays);

      // Two clicks on the chart: two instants, two different books, each the API's book at that instant.
      const a = await clickChartAt(page, 0.3);
      const b = await clickChartAt(page, 0.75);
      expect(a.at).not.toBe(b.at);
      expect({ bids: a.bids, asks: a.asks }).not.toEqual({ bids: b.bids, asks: b.asks });
      for (const d of [a, b]) {
        const snap = await L.get(`/v1/orderbook/snapshot?market_id=${market.id}&outcome=0&depth=50&at=${encodeURIComponent(d.at)}`);
        expect(snap.status).toBe(200);
        expect(d.bids).toEqual(snap.body.bids);
        expect(d.asks).toEqual(snap.body.asks);
        expect(d.bids.length + d.asks.length).toBeGreaterThan(0);
      }

      // The slider, by keyboard: Home scrubs to the first candle's start.
      const before = await page.evaluate(() => JSON.stringify((window as any).__depth));
      await page.focus('#scrub');
      await page.keyboard.press('Home');
      await page
        .waitForFunction((x) => JSON.stringify((window as any).__depth) !== x, before, { timeout: 20_000 })
        .catch(async (e) => {
          throw new Error(`${String(e)} status=${await page.textContent('#status')} at=${await page.textContent('#at')} v=${await page.inputValue('#scrub')}`);
        });
      const first = (await page.evaluate(() => (window as any).__depth)) as Depth;
      // The scrub starts where both the candles and the book do (there is no book before the tape's first change).
      const window0 = `start=${encodeURIComponent(apiBars[0]!.timestamp)}&limit=1`;
      const tob0 = await L.get(`/v1/orderbook/top_of_book?market_id=${market.id}&outcome=0&${window0}`);
      const bookFrom = Math.ceil(Date.parse(tob0.body[0].timestamp) / 1000) * 1000;
      expect(first.at).toBe(new Date(Math.max(Date.parse(apiBars[0]!.timestamp), bookFrom)).toISOString());
      const snap0 = await L.get(`/v1/orderbook/snapshot?market_id=${market.id}&outcome=0&depth=50&at=${encodeURIComponent(first.at)}`);
      expect({ bids: first.bids, asks: first.asks }).toEqual({ bids: snap0.body.bids, asks: snap0.body.asks });

      await page.screenshot({ path: path.join(ARTIFACTS, 'charts-1400x900.png'), fullPage: true });
      await page.setViewportSize({ width: 390, height: 844 });
      await page.waitForTimeout(300); // the library resizes on the next frame
      await page.screenshot({ path: path.join(ARTIFACTS, 'charts-390x844.png'), fullPage: true });
      for (const f of ['charts-1400x900.png', 'charts-390x844.png']) expect(fs.statSync(path.join(ARTIFACTS, f)).size).toBeGreaterThan(5000);
      expect(problems).toEqual([]);
    } finally {
      await page.close();
    }
  }, 120_000);
});
