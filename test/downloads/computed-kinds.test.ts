import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildDownloadsLake, parseCsv, type DlLake } from '../helpers/downloads-lake.js';
import { files } from '../helpers/lake-files.js';
import { sqliteOf } from '../helpers/state.js';
import { readZip } from '../helpers/zip.js';
import type { Lake } from '../../src/lake/sources.js';
import { tbboDownload } from '../../src/query/computed.js';

/**
 * The computed download kinds over a lake built by the real generator and ingest, through the real server:
 * book_snapshot_interval against the book-at-instant endpoint at each boundary, tbbo against a plain TypeScript
 * as-of over the lake's top_of_book and last_trades read with DuckDB here; the three formats and an export
 * through the real S3-compatible server hold the same rows; estimates, bad parameters and plan refusal.
 */
let L: DlLake;
let market: { id: string; tokens: string[] };
const iso = (us: bigint) => new Date(Number(us / 1000n)).toISOString();
const q = (tokens: string[]) => tokens.map((t) => `'${t}'`).join(',');
type Row = Record<string, unknown>;

async function parquetRows(buf: Buffer): Promise<Row[]> {
  const f = path.join(L.dir, `r-${crypto.randomBytes(4).toString('hex')}.parquet`);
  fs.writeFileSync(f, buf);
  return L.rows(`SELECT * FROM read_parquet('${f}')`);
}

async function getJson(p: string): Promise<Row[]> {
  const res = await L.fetch(p);
  expect(res.status, await res.clone().text()).toBe(200);
  return (await res.json()) as Row[];
}

/** A window of the tape: from the first minute boundary after the market's first stored book, `minutes` long. */
let bookStartUs: bigint;

beforeAll(async () => {
  L = await buildDownloadsLake({ env: { PMLAKE_RATE_LIMITS: 'off' } });
  // The market with the most venue trade prints on the tape.
  const m = (
    await L.rows(
      `SELECT m.id, m.outcome_token_ids AS tokens, count(*) AS n FROM read_parquet(${files(L.lakeDir, 'catalog/markets')}) m
       JOIN read_parquet(${files(L.lakeDir, 'last_trades')}) t ON list_contains(m.outcome_token_ids, t.asset_id)
       GROUP BY ALL ORDER BY n DESC LIMIT 1`,
    )
  )[0]!;
  market = { id: String(m.id), tokens: m.tokens as string[] };
  const first = (
    await L.rows(`SELECT epoch_us(max(t0)) AS us FROM (SELECT min(ts) AS t0 FROM read_parquet(${files(L.lakeDir, 'book_snapshots')})
      WHERE asset_id IN (${q(market.tokens)}) GROUP BY asset_id)`)
  )[0]!;
  bookStartUs = ((BigInt(first.us as number) + 60_000_000n) / 60_000_000n) * 60_000_000n;
});
afterAll(async () => {
  await L?.close();
});

describe('book_snapshot_interval', () => {
  it('equals the book-at-instant endpoint at every boundary, at two depths and two intervals', async () => {
    // A level change on the tape (not a venue `book`): a 10s boundary just after it folds it onto a stored snapshot.
    const change = (
      await L.rows(`SELECT epoch_us(recv_ts) AS us FROM read_parquet(${files(L.lakeDir, 'l2')})
        WHERE asset_id IN (${q(market.tokens)}) AND NOT is_snapshot AND recv_ts > make_timestamp(${bookStartUs}) ORDER BY seq LIMIT 1`)
    )[0]!;
    const changeMinute = (BigInt(change.us as number) / 60_000_000n) * 60_000_000n;
    const cases = [
      { interval: '1m', start: bookStartUs + 30n * 60_000_000n, minutes: 20, depth: 5 },
      { interval: '10s', start: changeMinute, minutes: 3, depth: 20 },
    ];
    let atStored = 0;
    let folded = 0;
    for (const c of cases) {
      const start = c.start;
      const end = start + BigInt(c.minutes) * 60_000_000n;
      const rows = await getJson(
        `/v1/download/book_snapshot_interval?market_id=${market.id}&interval=${c.interval}&depth=${c.depth}&start=${iso(start)}&end=${iso(end)}&format=json`,
      );
      const stepUs = c.interval === '1m' ? 60_000_000n : 10_000_000n;
      // One row per outcome per boundary (each outcome has a book by then), oldest first.
      expect(rows.length).toBe(Number((end - start) / stepUs) * market.tokens.length);
      for (const r of rows) {
        const book = await getJson(`/v1/orderbook/snapshot?market_id=${r.asset_id}&at=${r.timestamp as string}&depth=${c.depth}`).then(
          (x) => x as unknown as Row,
        );
        expect({ bids: r.bids, asks: r.asks, best_bid: r.best_bid, best_ask: r.best_ask, bid_levels: r.bid_levels, ask_levels: r.ask_levels }).toEqual({
          bids: book.bids,
          asks: book.asks,
          best_bid: book.best_bid,
          best_ask: book.best_ask,
          bid_levels: book.bid_levels,
          ask_levels: book.ask_levels,
        });
        expect((r.bids as unknown[]).length).toBeLessThanOrEqual(c.depth);
        expect(r.market_id).toBe(book.market_id);
        const t = (v: unknown) => (v === null ? null : Date.parse(v as string));
        expect(t(r.book_timestamp)).toBe(t(book.book_timestamp));
        if (t(book.snapshot_timestamp) === t(r.timestamp) && book.updates_applied === 0) atStored++;
        if ((book.updates_applied as number) > 0) folded++;
      }
    }
    // The boundaries include ones right at a stored snapshot and ones where tape changes were folded on top of one.
    expect(atStored).toBeGreaterThan(0);
    expect(folded).toBeGreaterThan(0);
  });

  it('equals a plain TypeScript replay of the whole l2 tape at every 1m boundary of the lake', async () => {
    const span = (
      await L.rows(`SELECT epoch_us(min(recv_ts)) AS a, epoch_us(max(recv_ts)) AS b FROM read_parquet(${files(L.lakeDir, 'l2')})
        WHERE asset_id IN (${q(market.tokens)})`)
    )[0]!;
    const start = (BigInt(span.a as number) / 60_000_000n) * 60_000_000n;
    const end = BigInt(span.b as number) + 120_000_000n;
    const tape = await L.rows(
      `SELECT asset_id, epoch_us(recv_ts) AS us, seq::VARCHAR AS seq, is_snapshot, side, price::DOUBLE AS price, size::DOUBLE AS size
       FROM read_parquet(${files(L.lakeDir, 'l2')}) WHERE asset_id IN (${q(market.tokens)}) ORDER BY seq, level_idx`,
    );
    const depth = 7;
    const expected: Row[] = [];
    for (const asset of market.tokens) {
      const rows = tape.filter((r) => r.asset_id === asset);
      const bids = new Map<number, number>();
      const asks = new Map<number, number>();
      let seen = false;
      let i = 0;
      let lastSeq = '';
      for (let b = start; b < end; b += 60_000_000n) {
        for (; i < rows.length && BigInt(rows[i]!.us as number) <= b; i++) {
          const r = rows[i]!;
          // The rows of one venue `book` message (one seq) replace the whole book.
          if (r.is_snapshot && r.seq !== lastSeq) {
            bids.clear();
            asks.clear();
          }
          lastSeq = r.seq as string;
          seen = true;
          if (r.side === null) continue;
          const side = r.side === 'bid' ? bids : asks;
          if (r.size === 0) side.delete(r.price as number);
          else side.set(r.price as number, r.size as number);
        }
        if (!seen) continue;
        const b2 = [...bids].sort((x, y) => y[0] - x[0]).map(([price, size]) => ({ price, size }));
        const a2 = [...asks].sort((x, y) => x[0] - y[0]).map(([price, size]) => ({ price, size }));
        expected.push({ asset_id: asset, us: Number(b), bids: b2.slice(0, depth), asks: a2.slice(0, depth), bid_levels: b2.length, ask_levels: a2.length });
      }
    }
    expected.sort((x, y) => (x.us as number) - (y.us as number) || ((x.asset_id as string) < (y.asset_id as string) ? -1 : 1));
    const got = await getJson(
      `/v1/download/book_snapshot_interval?market_id=${market.id}&interval=1m&depth=${depth}&start=${iso(start)}&end=${iso(end)}&format=json&limit=1000000`,
    );
    expect(got.length).toBeGreaterThan(1000);
    expect(
      got.map((r) => ({
        asset_id: r.asset_id,
        us: Date.parse(r.timestamp as string) * 1000,
        bids: r.bids,
        asks: r.asks,
        bid_levels: r.bid_levels,
        ask_levels: r.ask_levels,
      })),
    ).toEqual(expected);
  });

  it('CSV, Parquet and JSON hold the same rows; one export through the S3 server too', async () => {
    const start = bookStartUs;
    const end = start + 10n * 60_000_000n;
    const base = `/v1/download/book_snapshot_interval?market_id=${market.id}&interval=30s&depth=3&start=${iso(start)}&end=${iso(end)}`;
    const json = await getJson(`${base}&format=json`);
    expect(json.length).toBeGreaterThan(0);
    const csvRes = await L.fetch(`${base}&format=csv`);
    expect(csvRes.status).toBe(200);
    const [header, ...body] = parseCsv(await csvRes.text());
    expect(header).toEqual(Object.keys(json[0]!));
    const fromCsv = body.map((cells) => Object.fromEntries(header!.map((h, i) => [h, cells[i]])));
    const pq = await parquetRows(Buffer.from(await (await L.fetch(`${base}&format=parquet`)).arrayBuffer()));
    const norm = (r: Row) => ({
      asset_id: String(r.asset_id),
      ts: new Date(r.timestamp as string).getTime(),
      best_bid: r.best_bid === '' || r.best_bid === null ? null : Number(r.best_bid),
      bids: typeof r.bids === 'string' ? JSON.parse(r.bids) : r.bids,
    });
    const want = json.map(norm);
    expect(fromCsv.map(norm)).toEqual(want);
    expect(
      pq.map((r) =>
        norm({ ...r, timestamp: (r.timestamp as Date).toISOString(), bids: (r.bids as Row[]).map((l) => ({ price: Number(l.price), size: Number(l.size) })) }),
      ),
    ).toEqual(want);

    const sub = await L.fetch('/v1/exports', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        kind: 'book_snapshot_interval',
        market_id: market.id,
        interval: '30s',
        depth: 3,
        start: iso(start),
        end: iso(end),
        format: 'json',
      }),
    });
    expect(sub.status, await sub.clone().text()).toBe(202);
    const job = (await sub.json()) as { id: string };
    const status = () => (sqliteOf(L.srv.ctx.state).prepare('SELECT status FROM export_jobs WHERE id = ?').get(job.id) as { status: string }).status;
    const deadline = Date.now() + 20_000;
    while (['queued', 'running'].includes(status()) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    expect(status()).toBe('succeeded');
    const link = (await (await L.fetch(`/v1/exports/${job.id}/url`)).json()) as { data: { download_url: string } };
    const exported = (await (await fetch(link.data.download_url)).json()) as Row[];
    expect(exported).toEqual(json);
  });
});

type Quote = { asset_id: string; seq: bigint; bid: number | null; bid_size: number | null; ask: number | null; ask_size: number | null };

/** Independent as-of, plain TypeScript: per trade print, the quote of its token with the largest seq below the trade's. */
async function expectedTbbo(start: bigint, end: bigint, quotesAfterSeq = -1n): Promise<Row[]> {
  const trades = await L.rows(
    `SELECT asset_id, epoch_us(ts) AS ts, seq::VARCHAR AS seq, price::DOUBLE AS price FROM read_parquet(${files(L.lakeDir, 'last_trades')})
     WHERE asset_id IN (${q(market.tokens)}) AND ts >= make_timestamp(${start}) AND ts < make_timestamp(${end})`,
  );
  const quotes = (
    await L.rows(
      `SELECT asset_id, seq::VARCHAR AS seq, best_bid::DOUBLE AS bid, best_bid_size::DOUBLE AS bid_size, best_ask::DOUBLE AS ask, best_ask_size::DOUBLE AS ask_size
       FROM read_parquet(${files(L.lakeDir, 'top_of_book')}) WHERE asset_id IN (${q(market.tokens)})`,
    )
  )
    .map((r) => ({ ...r, seq: BigInt(r.seq as string) }) as Quote)
    .filter((x) => x.seq > quotesAfterSeq);
  return trades
    .map((t) => {
      const seq = BigInt(t.seq as string);
      let best: Quote | null = null;
      for (const x of quotes) if (x.asset_id === t.asset_id && x.seq < seq && (best === null || x.seq > best.seq)) best = x;
      return {
        asset_id: String(t.asset_id),
        seq: seq.toString(),
        price: t.price,
        bid_price: best?.bid ?? null,
        bid_size: best?.bid_size ?? null,
        ask_price: best?.ask ?? null,
        ask_size: best?.ask_size ?? null,
        quote_seq: best ? best.seq.toString() : null,
        ts: Number(t.ts),
      };
    })
    .sort((a, b) => a.ts - b.ts || (a.asset_id < b.asset_id ? -1 : a.asset_id > b.asset_id ? 1 : 0) || (BigInt(a.seq) < BigInt(b.seq) ? -1 : 1))
    .map(({ ts: _ts, ...r }) => r);
}

const orNull = (v: unknown) => (v === null || v === '' ? null : v);
const pick = (r: Row) => ({
  asset_id: r.asset_id,
  seq: String(r.seq),
  price: Number(r.price),
  bid_price: orNull(r.bid_price) === null ? null : Number(r.bid_price),
  bid_size: orNull(r.bid_size) === null ? null : Number(r.bid_size),
  ask_price: orNull(r.ask_price) === null ? null : Number(r.ask_price),
  ask_size: orNull(r.ask_size) === null ? null : Number(r.ask_size),
  quote_seq: orNull(r.quote_seq) === null ? null : String(r.quote_seq),
});

describe('tbbo', () => {
  it('a trade print before any quote has NULL bid and ask (the builder over a lake whose quotes start later)', async () => {
    const span = (await L.rows(`SELECT epoch_us(min(ts)) AS a, epoch_us(max(ts)) AS b FROM read_parquet(${files(L.lakeDir, 'last_trades')})`))[0]!;
    const start = BigInt(span.a as number);
    const end = BigInt(span.b as number) + 1000n;
    // Quotes only from the median trade print of the market on: the earlier prints have none before them.
    const seqs = (
      await L.rows(`SELECT seq::VARCHAR AS s FROM read_parquet(${files(L.lakeDir, 'last_trades')}) WHERE asset_id IN (${q(market.tokens)}) ORDER BY seq`)
    ).map((r) => BigInt(r.s as string));
    const cut = seqs[Math.floor(seqs.length / 2)]!;
    const session = L.srv.ctx.lakeSession();
    const src = session.sources;
    const lake: Lake = { from: (n) => (n === 'top_of_book' ? `(SELECT * FROM ${src.from(n)} WHERE seq > ${cut})` : src.from(n)) };
    const got = await session.rows(tbboDownload(lake, market.tokens, { start, end }, 1_000_000, 'json'));
    const expected = await expectedTbbo(start, end, cut);
    expect(expected.filter((e) => e.bid_price === null && e.ask_price === null).length).toBeGreaterThan(0);
    expect(got.map(pick)).toEqual(expected);
  });

  it('each trade print carries the newest quote received before it (plain as-of here); formats and an export agree', async () => {
    const span = (await L.rows(`SELECT epoch_us(min(ts)) AS a, epoch_us(max(ts)) AS b FROM read_parquet(${files(L.lakeDir, 'last_trades')})`))[0]!;
    // From an hour after the first print: the quotes before the window are found too.
    const start = BigInt(span.a as number) + 3_600_000_000n;
    const end = BigInt(span.b as number) + 1000n;
    const expected = await expectedTbbo(start, end);
    expect(expected.length).toBeGreaterThan(10);
    expect(expected.some((e) => e.bid_price !== null)).toBe(true);

    const base = `/v1/download/tbbo?market_id=${market.id}&start=${iso(start)}&end=${iso(end)}`;
    const json = await getJson(`${base}&format=json`);
    expect(json.map(pick)).toEqual(expected);
    // The quote is strictly before the trade (by arrival) and stamped no later than its receive time.
    for (const r of json)
      if (r.quote_timestamp !== null) expect(Date.parse(r.quote_timestamp as string)).toBeLessThanOrEqual(Date.parse(r.recv_timestamp as string));

    const csvRes = await L.fetch(`${base}&format=csv`);
    expect(csvRes.status).toBe(200);
    const [header, ...body] = parseCsv(await csvRes.text());
    expect(body.map((cells) => pick(Object.fromEntries(header!.map((h, i) => [h, cells[i]]))))).toEqual(expected);
    const pq = await parquetRows(Buffer.from(await (await L.fetch(`${base}&format=parquet`)).arrayBuffer()));
    expect(pq.map(pick)).toEqual(expected);

    const sub = await L.fetch('/v1/exports', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ kind: 'tbbo', market_id: market.id, start: iso(start), end: iso(end), format: 'parquet' }),
    });
    expect(sub.status, await sub.clone().text()).toBe(202);
    const job = (await sub.json()) as { id: string };
    const status = () => (sqliteOf(L.srv.ctx.state).prepare('SELECT status FROM export_jobs WHERE id = ?').get(job.id) as { status: string }).status;
    const deadline = Date.now() + 20_000;
    while (['queued', 'running'].includes(status()) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    expect(status()).toBe('succeeded');
    const link = (await (await L.fetch(`/v1/exports/${job.id}/url`)).json()) as { data: { download_url: string } };
    const exported = await parquetRows(Buffer.from(await (await fetch(link.data.download_url)).arrayBuffer()));
    expect(exported.map(pick)).toEqual(expected);
  });
});

describe('bulk', () => {
  it('both kinds as bulk items: each file equals the same GET download', async () => {
    const start = bookStartUs;
    const end = start + 20n * 60_000_000n;
    const items = [
      { kind: 'book_snapshot_interval', market_id: market.id, interval: '10s', depth: 4, start: iso(start), end: iso(end), format: 'json' },
      { kind: 'tbbo', market_id: market.id, start: iso(start), end: iso(end + 86_400_000_000n), format: 'json' },
    ];
    const res = await L.fetch('/v1/download/bulk', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ items }) });
    expect(res.status, await res.clone().text()).toBe(200);
    const zip = readZip(Buffer.from(await res.arrayBuffer()));
    const manifest = JSON.parse(zip.get('manifest.json')!.toString()) as { items: { file: string; rows: number; status: string }[] };
    expect(manifest.items.map((i) => i.status)).toEqual(['ok', 'ok']);
    const direct = [
      await getJson(`/v1/download/book_snapshot_interval?market_id=${market.id}&interval=10s&depth=4&start=${iso(start)}&end=${iso(end)}&format=json`),
      await getJson(`/v1/download/tbbo?market_id=${market.id}&start=${iso(start)}&end=${iso(end + 86_400_000_000n)}&format=json`),
    ];
    for (const [i, it] of manifest.items.entries()) {
      expect(JSON.parse(zip.get(it.file)!.toString())).toEqual(direct[i]);
      expect(it.rows).toBe(direct[i]!.length);
    }
  });
});

describe('estimates, bad parameters, plans', () => {
  const estimate = (body: Row) =>
    L.fetch(`/v1/markets/${market.id}/estimate`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });

  it('estimates: tbbo rows exact, interval rows an upper bound (outcomes × boundaries); sized and priced', async () => {
    const start = bookStartUs;
    const end = start + 30n * 60_000_000n;
    const rows = await getJson(`/v1/download/book_snapshot_interval?market_id=${market.id}&interval=1m&start=${iso(start)}&end=${iso(end)}&format=json`);
    const e = (await (await estimate({ data_type: 'book_snapshot_interval', interval: '1m', start: iso(start), end: iso(end) })).json()) as Row;
    expect(e.estimated_rows).toBeGreaterThanOrEqual(rows.length);
    expect(e.estimated_rows).toBeLessThanOrEqual(30 * market.tokens.length);
    expect(e.estimated_size_bytes).toBeGreaterThan(0);
    expect(e.included_in_plan).toBe('Professional');
    expect(e.coverage).not.toBeNull();

    const trades = await getJson(`/v1/download/tbbo?market_id=${market.id}&start=${iso(start)}&end=${iso(end + 86_400_000_000n)}&format=json`);
    const t = (await (await estimate({ data_type: 'tbbo', start: iso(start), end: iso(end + 86_400_000_000n) })).json()) as Row;
    expect(t.estimated_rows).toBe(trades.length);
    expect(t.estimated_cost_usd).toBeGreaterThanOrEqual(0);
    expect(t.rate_per_mb).toBeGreaterThan(0);
  });

  it('a bad interval or depth, or too many boundaries, is a 4xx that says which', async () => {
    const w = `start=${iso(bookStartUs)}&end=${iso(bookStartUs + 3_600_000_000n)}`;
    const badInterval = await L.fetch(`/v1/download/book_snapshot_interval?market_id=${market.id}&interval=7x&${w}`);
    expect(badInterval.status).toBe(422);
    expect(JSON.stringify(await badInterval.json())).toContain('interval');
    for (const depth of ['0', '101', 'ten']) {
      const r = await L.fetch(`/v1/download/book_snapshot_interval?market_id=${market.id}&depth=${depth}&${w}`);
      expect(r.status).toBe(422);
      expect(JSON.stringify(await r.json())).toContain('depth');
    }
    const wide = await L.fetch(`/v1/download/book_snapshot_interval?market_id=${market.id}&interval=1s&start=2020-01-01T00:00:00Z&end=2020-03-01T00:00:00Z`);
    expect(wide.status).toBe(400);
    expect(JSON.stringify(await wide.json())).toContain('too_many_boundaries');
    const noWindow = await L.fetch(`/v1/download/tbbo?market_id=${market.id}`);
    expect(noWindow.status).toBe(422);
  });

  it('a plan without the raw tape (Free) is refused, and is charged nothing', async () => {
    const store = L.srv.ctx.state;
    const user = await store.upsertUser('free-computed@example.com', 'free');
    const key = (await store.createApiKey({ userId: user.id, name: 't', prefix: L.srv.ctx.config.keyPrefix })).plaintext;
    const w = `start=${iso(bookStartUs)}&end=${iso(bookStartUs + 600_000_000n)}`;
    for (const p of [`/v1/download/tbbo?market_id=${market.id}&${w}`, `/v1/download/book_snapshot_interval?market_id=${market.id}&${w}`]) {
      const r = await L.fetch(p, { key });
      expect(r.status).toBe(402);
      expect(JSON.stringify(await r.json())).toMatch(/raw|plan/i);
    }
    const charged = sqliteOf(store).prepare(`SELECT count(*) AS n FROM pulls WHERE user_id = ? AND status = 'completed'`).get(user.id) as { n: number };
    expect(charged.n).toBe(0);
  });
});
