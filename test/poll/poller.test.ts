import fs from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { SimulatedVenue, syntheticMarkets, type SimHttpRoute, type SimMarket } from '../../sim/simulate/venue.js';
import { CataloguePoller, type CataloguePollerOptions, type PollSummary } from '../../src/poll/poller.js';
import { quietLog, tempDir, waitFor } from '../helpers/capture-files.js';
import { catalogueVenue, closedPolls, conditionIds, openPolls, readPoll, recordsOf, sortedCopy, type PollLine } from './poll-helpers.js';

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

const ENDPOINTS = ['gamma_markets', 'gamma_events', 'clob_markets'] as const;
const FAST_HTTP = { timeoutMs: 5_000, retries: 4, baseDelayMs: 20, maxDelayMs: 200 };

async function setup(markets: SimMarket[], extra: Partial<CataloguePollerOptions> = {}) {
  const v = await catalogueVenue({ markets, seed: 3, gammaMaxLimit: 100, clobPageSize: 7 });
  cleanups.push(() => v.venue.close());
  const dir = tempDir('poll');
  const opts: CataloguePollerOptions = {
    outDir: dir,
    pollerId: 'p1',
    gammaUrl: v.gammaUrl,
    clobUrl: v.clobUrl,
    periodSeconds: 3600,
    gammaLimit: 10,
    http: FAST_HTTP,
    log: quietLog,
    ...extra,
  };
  return { ...v, dir, opts };
}

function checkFormat(lines: PollLine[], summary: PollSummary, gammaUrl: string, clobUrl: string): void {
  expect(lines[0]).toEqual({
    kind: 'catalogue_poll',
    format: 1,
    poller: 'p1',
    started_at: summary.startedAt,
    endpoints: {
      gamma_markets: `${gammaUrl}/markets/keyset?limit=10`,
      gamma_events: `${gammaUrl}/events/keyset?limit=10`,
      clob_markets: `${clobUrl}/markets`,
    },
  });
  const end = lines.at(-1)!;
  expect(Object.keys(end).sort()).toEqual(['complete', 'finished_at', 'kind', 'pages']);
  expect(end.kind).toBe('end');
  expect(end.pages).toBe(lines.filter((l) => l.kind === 'page').length);
  for (const l of lines.slice(1, -1)) {
    expect(['page', 'error']).toContain(l.kind);
    expect(ENDPOINTS).toContain(l.endpoint);
    expect(new Date(String(l.received_at)).toISOString()).toBe(l.received_at);
  }
}

describe('CataloguePoller against the simulated venue', () => {
  it('writes every listed market once per endpoint, each page body byte for byte as sent', async () => {
    const markets = syntheticMarkets(45, 11);
    const { dir, opts, sent, gammaUrl, clobUrl } = await setup(markets);
    const poller = await CataloguePoller.prepare(opts);
    const summary = (await poller.pollOnce())!;
    expect(openPolls(dir)).toEqual([]);
    expect(closedPolls(dir)).toEqual([summary.file]);
    const lines = readPoll(summary.file);
    checkFormat(lines, summary, gammaUrl, clobUrl);
    expect(lines.at(-1)!.complete).toEqual({ gamma_markets: true, gamma_events: true, clob_markets: true });
    const expected = sortedCopy(markets.map((m) => m.conditionId));
    for (const e of ENDPOINTS) expect(sortedCopy(conditionIds(recordsOf(lines, e)))).toEqual(expected);
    // 45 markets by 10: four full pages and a short one without next_cursor; CLOB by 7: seven pages.
    expect(lines.filter((l) => l.endpoint === 'gamma_markets').length).toBe(5);
    expect(lines.filter((l) => l.endpoint === 'clob_markets').length).toBe(7);
    // Each page line holds what the venue sent for that URL, byte for byte, in the order asked.
    const pageLines = lines.filter((l) => l.kind === 'page');
    expect(pageLines.map((l) => ({ url: l.url, body: l.body }))).toEqual(
      sent.map((s) => ({ url: `${opts.gammaUrl.replace(/\/gamma$/, '')}${s.path}`, body: s.body })),
    );
    // The CLOB paging followed the venue's cursors to LTE=.
    const lastClob = JSON.parse(pageLines.at(-1)!.body!) as { next_cursor: string };
    expect(lastClob.next_cursor).toBe('LTE=');
  });

  it('neither loses nor doubles a market created in the middle of the paging (the unordered listing does)', async () => {
    const markets = syntheticMarkets(40, 12);
    const { catalogue, opts, gammaUrl } = await setup(markets);
    // One new market per endpoint, listed while that endpoint's page 1 is being answered.
    const fresh = ENDPOINTS.map((_, i) => syntheticMarkets(1, 100 + i)[0]!);
    catalogue.onPageServed = (endpoint, page) => {
      if (page === 1) catalogue.add(fresh[ENDPOINTS.indexOf(endpoint)]!);
    };
    const summary = (await (await CataloguePoller.prepare(opts)).pollOnce())!;
    const lines = readPoll(summary.file);
    const listedAfter = (k: number) => sortedCopy([...markets, ...fresh.slice(0, k)].map((m) => m.conditionId));
    // Each endpoint got one new market while it paged (after its page 1): its pages hold it exactly once.
    ENDPOINTS.forEach((e, i) => expect(sortedCopy(conditionIds(recordsOf(lines, e)))).toEqual(listedAfter(i + 1)));

    // The same catalogue through the venue's offset listing, in its default order (by volume, which moves as
    // markets trade).
    catalogue.onPageServed = null;
    const seen: string[] = [];
    for (let offset = 0; ; offset += 10) {
      const page = (await (await fetch(`${gammaUrl}/markets?limit=10&offset=${offset}`)).json()) as { conditionId: string }[];
      seen.push(...page.map((m) => m.conditionId));
      if (page.length < 10) break;
    }
    const all = listedAfter(3);
    const doubled = seen.length - new Set(seen).size;
    const lost = all.filter((c) => !seen.includes(c)).length;
    expect(doubled + lost).toBeGreaterThan(0);
  });

  it('retries 503 and 429 pages and completes; a page that is not JSON or changed shape ends that endpoint, the others complete', async () => {
    const markets = syntheticMarkets(30, 13);
    const { catalogue, opts } = await setup(markets);
    catalogue.fault('gamma_markets', 1, { status: 503 }, 2);
    catalogue.fault('clob_markets', 2, { status: 429, retryAfter: '0' });
    const poller = await CataloguePoller.prepare(opts);
    const first = (await poller.pollOnce())!;
    expect(first.complete).toEqual({ gamma_markets: true, gamma_events: true, clob_markets: true });
    const lines = readPoll(first.file);
    expect(lines.filter((l) => l.kind === 'error')).toEqual([]);
    // 3 Gamma pages + 2 retries; 5 CLOB pages (30 by 7) + 1 retry.
    expect(catalogue.served.gamma_markets).toBe(3 + 2);
    expect(catalogue.served.clob_markets).toBe(5 + 1);
    for (const e of ENDPOINTS) expect(sortedCopy(conditionIds(recordsOf(lines, e)))).toEqual(sortedCopy(markets.map((m) => m.conditionId)));

    catalogue.fault('gamma_events', 1, 'not-json');
    catalogue.fault('clob_markets', 0, 'shape');
    const second = (await poller.pollOnce())!;
    expect(second.complete).toEqual({ gamma_markets: true, gamma_events: false, clob_markets: false });
    const l2 = readPoll(second.file);
    expect(l2.at(-1)!.complete).toEqual(second.complete);
    const errors = l2.filter((l) => l.kind === 'error');
    expect(errors.map((e) => [e.endpoint, e.status])).toEqual([
      ['gamma_events', 200],
      ['clob_markets', 200],
    ]);
    expect(errors[0]!.message).toMatch(/^not JSON/);
    expect(errors[0]!.body).toBe('<html><body><h1>502 Bad Gateway</h1></body></html>');
    expect(errors[1]!.message).toMatch(/shape changed/);
    expect(JSON.parse(errors[1]!.body!)).toHaveProperty('results');
    // The events paging stopped at the bad page: only page 0 before it, nothing after.
    expect(l2.filter((l) => l.endpoint === 'gamma_events').map((l) => l.kind)).toEqual(['page', 'error']);
    expect(l2.filter((l) => l.endpoint === 'clob_markets').map((l) => l.kind)).toEqual(['error']);
  });

  it('a 4xx answer is not retried: an error line with the status and body, the endpoint incomplete', async () => {
    const { opts } = await setup([]);
    // A venue taking at most 5 rows a keyset page (the real one: 100 markets, 500 events).
    const v = await catalogueVenue({ markets: syntheticMarkets(25, 14), seed: 3, keysetMaxMarkets: 5, keysetMaxEvents: 5 });
    cleanups.push(() => v.venue.close());
    const summary = (await (await CataloguePoller.prepare({ ...opts, gammaUrl: v.gammaUrl, clobUrl: v.clobUrl })).pollOnce())!;
    expect(summary.complete).toEqual({ gamma_markets: false, gamma_events: false, clob_markets: true });
    const errors = readPoll(summary.file).filter((l) => l.kind === 'error');
    expect(errors.map((e) => [e.endpoint, e.status, e.message, JSON.parse(e.body!)])).toEqual([
      ['gamma_markets', 422, 'HTTP 422', { error: 'limit must be between 1 and 5' }],
      ['gamma_events', 422, 'HTTP 422', { error: 'limit must be between 1 and 5' }],
    ]);
    expect(v.catalogue.served.gamma_markets).toBe(1);
  });

  it('stops an endpoint whose server repeats its cursor instead of paging in a circle', async () => {
    const route: SimHttpRoute = (_req, res, url) => {
      if (url.pathname === '/gamma/markets/keyset') res.writeHead(200).end('{"markets":[],"next_cursor":"c2FtZQ=="}');
      else if (url.pathname === '/gamma/events/keyset') res.writeHead(200).end('{"events":[]}');
      else if (url.pathname === '/clob/markets') res.writeHead(200).end('{"data":[],"next_cursor":"LTE=","limit":100,"count":0}');
      else return false;
      return true;
    };
    const venue = await SimulatedVenue.start({ markets: [], rate: 0, routes: [route] });
    cleanups.push(() => venue.close());
    const { opts } = await setup([]);
    const summary = (await (await CataloguePoller.prepare({ ...opts, gammaUrl: `${venue.httpUrl}/gamma`, clobUrl: `${venue.httpUrl}/clob` })).pollOnce())!;
    expect(summary.complete).toEqual({ gamma_markets: false, gamma_events: true, clob_markets: true });
    const lines = readPoll(summary.file).filter((l) => l.endpoint === 'gamma_markets');
    expect(lines.map((l) => [l.kind, l.url])).toEqual([
      ['page', `${venue.httpUrl}/gamma/markets/keyset?limit=10`],
      ['error', `${venue.httpUrl}/gamma/markets/keyset?limit=10&after_cursor=c2FtZQ%3D%3D`],
    ]);
    expect(lines[1]!.message).toBe('the server repeated cursor c2FtZQ==');
  });

  it('keeps polling on its period after a poll with an error; stop() ends it with no open file left', async () => {
    const markets = syntheticMarkets(12, 15);
    const { catalogue, dir, opts } = await setup(markets, { periodSeconds: 1 });
    catalogue.fault('gamma_events', 0, 'not-json');
    const polls: PollSummary[] = [];
    const poller = await CataloguePoller.start({ ...opts, onPoll: (s) => polls.push(s) });
    cleanups.push(() => poller.stop());
    await waitFor('two polls', () => polls.length >= 2, 20_000);
    await poller.stop();
    expect(polls[0]!.complete.gamma_events).toBe(false);
    expect(polls[1]!.complete).toEqual({ gamma_markets: true, gamma_events: true, clob_markets: true });
    expect(openPolls(dir)).toEqual([]);
    expect(closedPolls(dir).length).toBe(polls.length);
    expect(fs.existsSync(polls[1]!.file)).toBe(true);
  });

  it('schedules the next poll at the next wall-clock multiple of the period', () => {
    const poller = new CataloguePoller({ outDir: '/nonexistent', pollerId: 'p', gammaUrl: '', clobUrl: '', periodSeconds: 300, log: quietLog });
    const t = Date.UTC(2026, 10, 26, 21, 0, 0);
    expect(poller.nextPollAt(t)).toBe(t + 300_000);
    expect(poller.nextPollAt(t + 1)).toBe(t + 300_000);
    expect(poller.nextPollAt(t + 299_999)).toBe(t + 300_000);
    expect(poller.nextPollAt(t + 300_000)).toBe(t + 600_000);
  });
});
