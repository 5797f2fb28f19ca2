import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import { buildQueryLake, catalog, glob, type QueryLake } from '../helpers/query-lake.js';

/**
 * The /charts page as a link, in a real browser (Debian chromium) over a real server and lake: a view opened
 * from its URL (market, outcome, timeframe, instant; the key from the browser's storage, never from a URL), the
 * URL following the view, the price axis at the market's tick, the first book inside the data, and a click on a
 * candle showing the book at that candle's time. The browser runs in a zone far from UTC, so a shift by the
 * local offset would show. The deep-link screenshot goes to test-artifacts/charts/ (git-ignored).
 */
const ARTIFACTS = path.resolve('test-artifacts/charts');

type Bar = { timestamp: string; open: number; high: number; low: number; close: number; volume: number };
type Depth = { at: string; bids: { price: number; size: number }[]; asks: { price: number; size: number }[] };
type Market = { id: string; question: string; outcomes: string[]; outcome_token_ids: string[]; data_from: string; data_to: string };

const ms = (iso: string): number => Date.parse(iso);

describe('charts page links, tick and instants in a real browser', () => {
  let L: QueryLake;
  let browser: Browser;
  /** Markets with trades and books, by the catalogue's tick (read from the lake, not through the API). */
  let fine: Market;
  let coarse: Market;
  let ticks: Map<string, string>;

  beforeAll(async () => {
    if (!fs.existsSync('/usr/bin/chromium')) execFileSync('bash', ['scripts/ensure-system-deps.sh'], { stdio: 'inherit' });
    L = await buildQueryLake();
    browser = await chromium.launch({
      executablePath: '/usr/bin/chromium',
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'],
    });
    fs.mkdirSync(ARTIFACTS, { recursive: true });
    const rows = await L.rows(
      `SELECT id, tick_size::VARCHAR AS tick FROM read_parquet(${catalog(L.lakeDir, 'markets')})
       WHERE trade_count > 50 AND orderbook_count > 50 AND tick_size IS NOT NULL ORDER BY trade_count DESC, id`,
    );
    ticks = new Map(rows.map((r) => [String(r.id), String(r.tick)]));
    const byTick = async (tick: number): Promise<Market> => {
      const id = rows.find((r) => Number(r.tick) === tick)?.id;
      expect(id, `a market with tick ${tick}`).toBeDefined();
      const m = await L.get(`/v1/markets/${id}`);
      expect(m.status).toBe(200);
      return m.body as Market;
    };
    fine = await byTick(0.001);
    coarse = await byTick(0.01);
  }, 180_000);
  afterAll(async () => {
    await browser?.close();
    await L?.close();
  });

  /** Decimals of a tick written as text by the catalogue ("0.001" → 3). */
  const decimals = (tick: string): number => (tick.replace(/0+$/, '').split('.')[1] ?? '').length;

  async function context(): Promise<{ ctx: BrowserContext; problems: string[]; urls: string[] }> {
    const ctx = await browser.newContext({ viewport: { width: 1400, height: 900 }, timezoneId: 'Pacific/Kiritimati' });
    const problems: string[] = [];
    const urls: string[] = [];
    ctx.on('request', (r) => urls.push(r.url()));
    ctx.on('page', (p) => {
      p.on('console', (m) => {
        if (m.type() === 'error' || m.type() === 'warning') problems.push(`${m.type()}: ${m.text()}`);
      });
      p.on('pageerror', (e) => problems.push(`pageerror: ${e.message}`));
    });
    return { ctx, problems, urls };
  }

  /** The page's own flow (search, pick): what a user without a link does. */
  async function openBySearch(page: Page, m: Market, timeframe: string): Promise<void> {
    await page.goto(`${L.srv.url}/charts`);
    await page.fill('#key', L.key);
    await page.fill('#timeframe', timeframe);
    const words = m.question.split(/\s+/);
    await page.fill('#search', words.slice(0, Math.min(3, words.length)).join(' '));
    await page.click(`#results button[data-id="${m.id}"]`);
    await shown(page);
  }

  /** Candles drawn and a book shown. */
  async function shown(page: Page): Promise<void> {
    await page
      .waitForFunction(() => (window as any).__chartData?.candles?.length > 0 && (window as any).__depth !== null, null, { timeout: 30_000 })
      .catch(async (e) => {
        throw new Error(`${String(e)} status=${await page.textContent('#status')} url=${page.url()}`);
      });
  }

  async function apiBars(m: Market, outcome: number, timeframe: string): Promise<Bar[]> {
    const r = await L.get(`/v1/trades/ohlcv?market_id=${m.id}&outcome=${outcome}&timeframe=${timeframe}&limit=2000`);
    expect(r.status).toBe(200);
    return (r.body as (Bar & { trade_count: number })[]).slice().reverse();
  }

  async function apiBook(m: Market, outcome: number, at: string): Promise<{ bids: unknown; asks: unknown }> {
    const r = await L.get(`/v1/orderbook/snapshot?market_id=${m.id}&outcome=${outcome}&depth=50&at=${encodeURIComponent(at)}`);
    expect(r.status).toBe(200);
    return { bids: r.body.bids, asks: r.body.asks };
  }

  /** The first top-of-book change of the outcome: there is no book before it. */
  async function bookFrom(m: Market, outcome: number): Promise<number> {
    const r = await L.get(`/v1/orderbook/top_of_book?market_id=${m.id}&outcome=${outcome}&start=${encodeURIComponent(m.data_from)}&limit=1`);
    expect(r.status).toBe(200);
    return Math.ceil(ms(r.body[0].timestamp) / 1000) * 1000;
  }

  /** Clicks the candle that opens at `iso`, where the chart itself places it. */
  async function clickCandle(page: Page, iso: string): Promise<Depth> {
    const x = await page.evaluate((t) => (window as any).__chart.timeScale().timeToCoordinate(t), ms(iso) / 1000);
    expect(typeof x).toBe('number');
    const box = (await page.locator('#chart').boundingBox())!;
    const before = await page.evaluate(() => JSON.stringify((window as any).__depth));
    await page.waitForTimeout(600); // two clicks within 500 ms are a double click to the library
    await page.mouse.click(box.x + (x as number), box.y + box.height / 2);
    await page.waitForFunction((b) => JSON.stringify((window as any).__depth) !== b, before, { timeout: 20_000 });
    return (await page.evaluate(() => (window as any).__depth)) as Depth;
  }

  const query = (page: Page): Record<string, string> => Object.fromEntries(new URL(page.url()).searchParams);

  it('the price axis is drawn at the market tick (0.001 → 3 decimals, 0.01 → 2)', async () => {
    const { ctx, problems } = await context();
    try {
      for (const m of [fine, coarse]) {
        const page = await ctx.newPage();
        await openBySearch(page, m, '1h');
        const d = decimals(ticks.get(m.id)!);
        const tick = 10 ** -d;
        const bars = await apiBars(m, 0, '1h');
        const got = await page.evaluate(
          (prices) => {
            const s = (window as any).__series;
            return {
              candles: s.candles.options().priceFormat,
              bid: s.bid.options().priceFormat,
              ask: s.ask.options().priceFormat,
              labels: prices.map((p: number) => s.candles.priceFormatter().format(p)),
            };
          },
          bars.map((b) => b.low),
        );
        for (const f of [got.candles, got.bid, got.ask]) {
          expect(f.precision, m.id).toBe(d);
          expect(f.minMove, m.id).toBeCloseTo(tick, 12);
        }
        // The axis labels the library writes: each price with the tick's decimals, as plain toFixed does.
        expect(got.labels).toEqual(bars.map((b) => b.low.toFixed(d)));
        await page.close();
      }
      expect(problems).toEqual([]);
    } finally {
      await ctx.close();
    }
  }, 120_000);

  it("the first book is inside the data; a click on a candle shows the book at that candle's time", async () => {
    const { ctx, problems } = await context();
    try {
      const page = await ctx.newPage();
      await openBySearch(page, fine, '1h');
      const bars = await apiBars(fine, 0, '1h');
      const first = (await page.evaluate(() => (window as any).__depth)) as Depth;
      // The outcome's last trade, straight from the lake: no candle's data lies after it.
      const token = fine.outcome_token_ids[0]!;
      const last = await L.rows(`SELECT epoch_ms(max(ts)) AS t FROM read_parquet(${glob(L.lakeDir, 'trades')}) WHERE token_id = '${token}'`);
      const lastTrade = Number(last[0]!.t);
      const from = await bookFrom(fine, 0);
      expect(ms(first.at)).toBeLessThanOrEqual(lastTrade);
      expect(ms(first.at)).toBeGreaterThanOrEqual(Math.max(ms(bars[0]!.timestamp), from));
      expect(ms(first.at)).toBe(Math.max(ms(bars.at(-1)!.timestamp), from));
      expect({ bids: first.bids, asks: first.asks }).toEqual(await apiBook(fine, 0, first.at));

      // Candles a third and two thirds through, after the book begins: each click shows the book at its open.
      const clickable = bars.filter((b) => ms(b.timestamp) >= from);
      expect(clickable.length).toBeGreaterThan(6);
      for (const k of [Math.floor(clickable.length / 3), Math.floor((2 * clickable.length) / 3)]) {
        const bar = clickable[k]!;
        const d = await clickCandle(page, bar.timestamp);
        expect(ms(d.at), `candle ${bar.timestamp}`).toBe(ms(bar.timestamp));
        expect({ bids: d.bids, asks: d.asks }).toEqual(await apiBook(fine, 0, bar.timestamp));
        expect(ms(query(page).at!)).toBe(ms(bar.timestamp));
      }
      expect(problems).toEqual([]);
    } finally {
      await ctx.close();
    }
  }, 120_000);

  it('a link opened directly restores market, outcome, timeframe and instant; the URL follows the view; the key stays in storage', async () => {
    const { ctx, problems, urls } = await context();
    try {
      // The key is typed once, in another tab; the browser keeps it.
      const typing = await ctx.newPage();
      await typing.goto(`${L.srv.url}/charts`);
      await typing.fill('#key', L.key);
      await typing.close();

      // An outcome other than 0 with candles, and an instant inside one of its candles (not on a boundary).
      const outcome = fine.outcomes.length - 1;
      expect(outcome).toBeGreaterThan(0);
      const bars = await apiBars(fine, outcome, '1h');
      expect(bars.length).toBeGreaterThan(6);
      const from = await bookFrom(fine, outcome);
      const inside = bars.filter((b) => ms(b.timestamp) >= from);
      const at = new Date(ms(inside[Math.floor(inside.length / 2)]!.timestamp) + 17 * 60_000 + 5_000).toISOString().replace('.000Z', 'Z');
      const link = `${L.srv.url}/charts?market=${fine.id}&outcome=${outcome}&timeframe=1h&at=${at}`;

      const page = await ctx.newPage();
      await page.goto(link);
      await shown(page);
      expect(await page.inputValue('#key')).toBe(L.key);
      // Filled in from storage on every open, the key is masked: it must not show on screen or in a screenshot.
      expect(await page.getAttribute('#key', 'type')).toBe('password');
      expect(await page.inputValue('#outcome')).toBe(String(outcome));
      expect(await page.inputValue('#timeframe')).toBe('1h');
      expect(await page.textContent('#title')).toContain(fine.question);
      const data = (await page.evaluate(() => (window as any).__chartData)) as { market_id: string; outcome: number; timeframe: string; candles: Bar[] };
      expect({ market_id: data.market_id, outcome: data.outcome, timeframe: data.timeframe }).toEqual({ market_id: fine.id, outcome, timeframe: '1h' });
      expect(data.candles).toEqual(bars);
      const d = (await page.evaluate(() => (window as any).__depth)) as Depth;
      expect(ms(d.at)).toBe(ms(at));
      expect({ bids: d.bids, asks: d.asks }).toEqual(await apiBook(fine, outcome, at));
      expect(query(page)).toEqual({ market: fine.id, outcome: String(outcome), timeframe: '1h', at });
      await page.waitForTimeout(300); // the library draws on the next frame
      await page.screenshot({ path: path.join(ARTIFACTS, 'charts-deep-link-1400x900.png'), fullPage: true });

      // Changing the view rewrites the URL in place (no new history entries), keeping the instant shown.
      const entries = await page.evaluate(() => history.length);
      await page.selectOption('#outcome', '0');
      await page.waitForFunction(() => (window as any).__chartData?.outcome === 0 && (window as any).__depth !== null, null, { timeout: 30_000 });
      await page.waitForFunction(
        (a) => new URL(location.href).searchParams.get('outcome') === '0' && (window as any).__depth?.at && Date.parse((window as any).__depth.at) === a,
        ms(at),
        {
          timeout: 30_000,
        },
      );
      expect(query(page)).toEqual({ market: fine.id, outcome: '0', timeframe: '1h', at });
      await page.fill('#timeframe', '4h');
      await page.press('#timeframe', 'Enter');
      await page.waitForFunction(() => (window as any).__chartData?.timeframe === '4h', null, { timeout: 30_000 });
      await page.waitForFunction(() => new URL(location.href).searchParams.get('timeframe') === '4h', null, { timeout: 30_000 });
      const bars4 = await apiBars(fine, 0, '4h');
      const from0 = await bookFrom(fine, 0);
      const bar = bars4.filter((b) => ms(b.timestamp) >= from0).at(-2)!;
      const clicked = await clickCandle(page, bar.timestamp);
      expect(ms(clicked.at)).toBe(ms(bar.timestamp));
      const now = query(page);
      expect(now).toEqual({ market: fine.id, outcome: '0', timeframe: '4h', at: now.at });
      expect(ms(now.at!)).toBe(ms(bar.timestamp));
      expect(await page.evaluate(() => history.length)).toBe(entries);

      // That URL, opened in a fresh tab, is the same view again.
      const again = await ctx.newPage();
      await again.goto(page.url());
      await shown(again);
      const d2 = (await again.evaluate(() => (window as any).__depth)) as Depth;
      expect(ms(d2.at)).toBe(ms(bar.timestamp));
      expect(await again.evaluate(() => ({ o: (window as any).__chartData.outcome, tf: (window as any).__chartData.timeframe }))).toEqual({ o: 0, tf: '4h' });
      expect({ bids: d2.bids, asks: d2.asks }).toEqual({ bids: clicked.bids, asks: clicked.asks });

      // The key went into the browser's storage and request headers, never into any URL.
      expect(await again.evaluate(() => Object.values(localStorage))).toContain(L.key);
      expect(urls.length).toBeGreaterThan(10);
      expect(urls.filter((u) => u.includes(L.key))).toEqual([]);
      expect(problems).toEqual([]);
    } finally {
      await ctx.close();
    }
  }, 180_000);

  it('a link opened in a browser without a stored key asks for it, then opens the view', async () => {
    const { ctx, problems, urls } = await context();
    try {
      const page = await ctx.newPage();
      await page.goto(`${L.srv.url}/charts?market=${coarse.id}&outcome=0&timeframe=30m`);
      await page.waitForFunction(() => /API key/.test(document.getElementById('status')!.textContent ?? ''), null, { timeout: 10_000 });
      expect(urls.filter((u) => new URL(u).pathname.startsWith('/v1/'))).toEqual([]); // nothing asked without a key
      await page.fill('#key', L.key);
      await page.press('#key', 'Enter');
      await shown(page);
      const data = (await page.evaluate(() => (window as any).__chartData)) as { market_id: string; timeframe: string; candles: Bar[] };
      expect({ market_id: data.market_id, timeframe: data.timeframe }).toEqual({ market_id: coarse.id, timeframe: '30m' });
      expect(data.candles).toEqual(await apiBars(coarse, 0, '30m'));
      expect(await page.evaluate(() => localStorage.getItem('pmlake.apiKey'))).toBe(L.key);
      expect(urls.filter((u) => u.includes(L.key))).toEqual([]);
      expect(problems).toEqual([]);
    } finally {
      await ctx.close();
    }
  }, 120_000);
});
