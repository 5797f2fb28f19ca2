import { spawnSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildDownloadsLake, parseCsv, type DlLake } from '../helpers/downloads-lake.js';
import { readZip } from '../helpers/zip.js';
import { activeCopies } from '../../src/lake/stream.js';
import { files } from '../helpers/lake-files.js';
import { sqliteOf } from '../helpers/state.js';

/**
 * Every /v1/download/* endpoint over a lake built by the real generator and ingest, through the real server.
 * Each test parses what it receives (CSV rows, a JSON array, Parquet read back by DuckDB) and compares it
 * with the lake's Parquet read independently.
 */
let L: DlLake;
let market: { id: string; tokens: string[]; condition_id: string };
const lakeGlob = (dir: string) => `'${path.join(L.lakeDir, dir, '*', '*.parquet')}'`;
const catalog = (name: string) => files(L.lakeDir, `catalog/${name}`);

type Trade = { id: string; token_id: string; ts: Date; log_index: number; block_number: number; price: number; size: number };

async function lakeTrades(tokens: string[]): Promise<Trade[]> {
  const rows = (await L.rows(
    `SELECT id, token_id, ts, log_index, block_number, price::DOUBLE AS price, size::DOUBLE AS size FROM read_parquet(${lakeGlob('trades')})
     WHERE token_id IN (${tokens.map((t) => `'${t}'`).join(',')})`,
  )) as unknown as Trade[];
  // Independent ordering, as files are: grouped by outcome token (the market's order), each oldest first by
  // time then log index.
  return rows.sort(
    (a, b) => tokens.indexOf(a.token_id) - tokens.indexOf(b.token_id) || +a.ts - +b.ts || a.log_index - b.log_index || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0),
  );
}

async function parquetRows(buf: Buffer): Promise<Record<string, unknown>[]> {
  const f = path.join(L.dir, `r-${crypto.randomBytes(4).toString('hex')}.parquet`);
  fs.writeFileSync(f, buf);
  return L.rows(`SELECT * FROM read_parquet('${f}')`);
}

beforeAll(async () => {
  L = await buildDownloadsLake();
  // The market with the most trades: its files have rows in every format.
  const m = (
    await L.rows(
      `SELECT m.id, m.outcome_token_ids AS tokens, m.condition_id, count(*) AS n FROM read_parquet(${catalog('markets')}) m
     JOIN read_parquet(${lakeGlob('trades')}) t ON list_contains(m.outcome_token_ids, t.token_id)
     GROUP BY ALL ORDER BY n DESC LIMIT 1`,
    )
  )[0]!;
  market = { id: String(m.id), tokens: m.tokens as string[], condition_id: String(m.condition_id) };
});
afterAll(async () => {
  await L?.close();
});

describe('GET /v1/download/trades', () => {
  it('CSV: header, every trade of both outcomes, oldest first, equal to the lake', async () => {
    const res = await L.fetch(`/v1/download/trades?market_id=${market.id}`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/csv/);
    expect(res.headers.get('content-disposition')).toContain(`filename="trades_${market.id}.csv"`);
    const rows = parseCsv(await res.text());
    const header = rows[0]!;
    expect(header).toEqual([
      'id',
      'market_id',
      'timestamp',
      'block_number',
      'transaction_hash',
      'outcome',
      'outcome_label',
      'side',
      'price',
      'size',
      'usd_value',
      'maker',
      'taker',
      'fee',
      'collateral',
    ]);
    const expected = await lakeTrades(market.tokens);
    expect(expected.length).toBeGreaterThan(5);
    const body = rows.slice(1);
    expect(body.map((r) => r[0])).toEqual(expected.map((t) => t.id));
    body.forEach((r, i) => {
      expect(r[1]).toBe(expected[i]!.token_id);
      expect(Date.parse(r[2]!)).toBe(+expected[i]!.ts);
      expect(Number(r[8])).toBeCloseTo(expected[i]!.price, 9);
      expect(Number(r[9])).toBeCloseTo(expected[i]!.size, 9);
    });
  });

  it('JSON: a valid array; limit caps the rows; a token id narrows to one outcome', async () => {
    const res = await L.fetch(`/v1/download/trades?market_id=${market.tokens[0]}&format=json&limit=3`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^application\/json/);
    const arr = JSON.parse(await res.text()) as Record<string, unknown>[];
    expect(Array.isArray(arr)).toBe(true);
    const expected = (await lakeTrades([market.tokens[0]!])).slice(0, 3);
    expect(arr.map((r) => r.id)).toEqual(expected.map((t) => t.id));
    expect(arr.every((r) => r.market_id === market.tokens[0])).toBe(true);
  });

  it('Parquet: a real ZSTD Parquet file DuckDB reads back, equal to the lake', async () => {
    const res = await L.fetch(`/v1/download/trades?market_id=${market.id}&format=parquet`);
    expect(res.status).toBe(200);
    const buf = Buffer.from(await res.arrayBuffer());
    expect(buf.subarray(0, 4).toString()).toBe('PAR1');
    const f = path.join(L.dir, 'zstd-check.parquet');
    fs.writeFileSync(f, buf);
    const codecs = await L.rows(`SELECT DISTINCT compression FROM parquet_metadata('${f}')`);
    expect(codecs.map((c) => String(c.compression).toUpperCase())).toEqual(['ZSTD']);
    const rows = await parquetRows(buf);
    const expected = await lakeTrades(market.tokens);
    expect(rows.map((r) => r.id)).toEqual(expected.map((t) => t.id));
    expect(rows.map((r) => +(r.timestamp as Date))).toEqual(expected.map((t) => +t.ts));
    // The body length is announced when the whole file was known before the headers went out.
    expect(Number(res.headers.get('content-length') ?? buf.length)).toBe(buf.length);
  });

  it('validation, unknown market and an empty window', async () => {
    expect((await L.fetch(`/v1/download/trades?market_id=${market.id}&limit=1000001`)).status).toBe(422);
    expect((await L.fetch(`/v1/download/trades?market_id=${market.id}&format=xlsx`)).status).toBe(422);
    expect((await L.fetch(`/v1/download/trades`)).status).toBe(422);
    const bad = await L.fetch(`/v1/download/trades?market_id=${market.id}&start=2030-01-02&end=2030-01-01`);
    expect(bad.status).toBe(422);
    const nf = await L.fetch(`/v1/download/trades?market_id=999999999`);
    expect(nf.status).toBe(404);
    expect(await nf.json()).toEqual({ detail: 'Market not found' });
    const empty = await L.fetch(`/v1/download/trades?market_id=${market.id}&start=2001-01-01&end=2001-01-02`);
    expect(empty.status).toBe(404);
    expect(((await empty.json()) as { detail: string }).detail).toMatch(/in this range/);
    expect((await L.fetch(`/v1/download/trades?market_id=${market.id}`, { key: null })).status).toBe(401);
  });
});

describe('GET /v1/download/ohlcv', () => {
  it('1h and 30s candles equal an independent computation over the trades', async () => {
    const trades = await lakeTrades(market.tokens);
    for (const [tf, sec] of [
      ['1h', 3600],
      ['30s', 30],
    ] as const) {
      const res = await L.fetch(`/v1/download/ohlcv?market_id=${market.id}&timeframe=${tf}&format=json`);
      expect(res.status).toBe(200);
      const got = JSON.parse(await res.text()) as {
        market_id: string;
        timestamp: string;
        open: number;
        high: number;
        low: number;
        close: number;
        volume: number;
        trade_count: number;
      }[];
      const want = new Map<string, { o: number; h: number; l: number; c: number; v: number; n: number }>();
      for (const t of trades) {
        const b = Math.floor(+t.ts / 1000 / sec) * sec * 1000;
        const k = `${t.token_id}|${b}`;
        const c = want.get(k);
        if (!c) want.set(k, { o: t.price, h: t.price, l: t.price, c: t.price, v: t.size, n: 1 });
        else {
          c.h = Math.max(c.h, t.price);
          c.l = Math.min(c.l, t.price);
          c.c = t.price;
          c.v += t.size;
          c.n += 1;
        }
      }
      expect(got.length).toBe(want.size);
      for (const g of got) {
        const w = want.get(`${g.market_id}|${Date.parse(g.timestamp)}`)!;
        expect(w, `${tf} ${g.market_id} ${g.timestamp}`).toBeDefined();
        expect([g.open, g.high, g.low, g.close, g.trade_count]).toEqual([w.o, w.h, w.l, w.c, w.n]);
        expect(g.volume).toBeCloseTo(w.v, 6);
      }
      // Oldest bucket first.
      const ts = got.map((g) => Date.parse(g.timestamp));
      expect([...ts].sort((a, b) => a - b)).toEqual(ts);
    }
  });

  it('limit default/max follow the anchor (max 2,000,000)', async () => {
    expect((await L.fetch(`/v1/download/ohlcv?market_id=${market.id}&limit=2000001`)).status).toBe(422);
    expect((await L.fetch(`/v1/download/ohlcv?market_id=${market.id}&limit=2000000&timeframe=7m`)).status).toBe(200);
    expect((await L.fetch(`/v1/download/ohlcv?market_id=${market.id}&timeframe=7x`)).status).toBe(422);
  });
});

describe('order book downloads', () => {
  it('orderbook JSON: rows keyed by condition id, nested levels, equal to the lake', async () => {
    const res = await L.fetch(`/v1/download/orderbook?market_id=${market.id}&format=json&limit=1000000`);
    expect(res.status).toBe(200);
    const got = JSON.parse(await res.text()) as {
      market_id: string;
      asset_id: string;
      /** Text, as in the API: it exceeds 2^53. */
      seq: string;
      bids: { price: number; size: number }[];
      best_bid: number | null;
    }[];
    const want = await L.rows(
      `SELECT asset_id, seq::VARCHAR AS seq, len(bids) AS nb, bids[1].price::DOUBLE AS b0 FROM read_parquet(${lakeGlob('book_snapshots')})
       WHERE condition_id = '${market.condition_id}' ORDER BY ts, asset_id, seq`,
    );
    expect(got.length).toBe(want.length);
    expect(got.every((r) => r.market_id === market.condition_id)).toBe(true);
    got.forEach((r, i) => {
      expect(r.seq).toBe(want[i]!.seq);
      expect(r.bids.length).toBe(Number(want[i]!.nb));
      if (r.bids.length) expect(r.bids[0]!.price).toBe(want[i]!.b0);
    });
  });

  it('orderbook CSV carries the levels as JSON text', async () => {
    const res = await L.fetch(`/v1/download/orderbook?market_id=${market.id}&limit=5`);
    const rows = parseCsv(await res.text());
    const hdr = rows[0]!;
    const bids = rows.slice(1).map((r) => JSON.parse(r[hdr.indexOf('bids')]!) as unknown[]);
    expect(bids.length).toBeGreaterThan(0);
    expect(bids.every(Array.isArray)).toBe(true);
  });

  it('top_of_book needs start and end; CSV rows equal the lake', async () => {
    expect((await L.fetch(`/v1/download/top_of_book?market_id=${market.id}`)).status).toBe(422);
    const res = await L.fetch(`/v1/download/top_of_book?market_id=${market.id}&start=2000-01-01&end=2100-01-01&limit=1000000`);
    expect(res.status).toBe(200);
    const rows = parseCsv(await res.text());
    const want = await L.rows(`SELECT count(*) AS n FROM read_parquet(${lakeGlob('top_of_book')}) WHERE condition_id = '${market.condition_id}'`);
    expect(rows.length - 1).toBe(Number(want[0]!.n));
  });
});

describe('raw tape', () => {
  it('datasets catalogue and estimate', async () => {
    const cat = (await (await L.fetch('/v1/download/raw/datasets')).json()) as { data: { data_type: string; record_count: number }[]; meta: { count: number } };
    expect(cat.meta.count).toBe(cat.data.length);
    const l2 = cat.data.find((d) => d.data_type === 'polymarket_l2_deltas')!;
    const n = await L.rows(
      `SELECT count(*) AS n FROM read_parquet(${lakeGlob('raw')}) WHERE list_contains(event_types, 'book') OR list_contains(event_types, 'price_change') OR list_contains(event_types, 'tick_size_change')`,
    );
    expect(l2.record_count).toBe(Number(n[0]!.n));
    const est = (await (await L.fetch('/v1/download/raw/estimate?data_type=polymarket:l2-delta-tape&limit=10')).json()) as Record<string, unknown>;
    expect(est).toMatchObject({ data_type: 'polymarket_l2_deltas', estimated_rows: Math.min(10, l2.record_count), capped_by_limit: l2.record_count > 10 });
    expect((await L.fetch('/v1/download/raw/estimate?data_type=nope')).status).toBe(400);
  });

  it('shape=raw gives {recv_ts, frame} records byte-identical to the captured frames', async () => {
    const res = await L.fetch(`/v1/download/raw?data_type=polymarket_l2_deltas&market_id=${market.id}&limit=2000000`);
    expect(res.status).toBe(200);
    const got = JSON.parse(await res.text()) as { recv_ts: number; frame: string }[];
    const want = await L.rows(
      `SELECT epoch_ms(recv_ts) AS ms, frame FROM read_parquet(${lakeGlob('raw')})
       WHERE list_contains(condition_ids, '${market.condition_id}') AND (list_contains(event_types, 'book') OR list_contains(event_types, 'price_change') OR list_contains(event_types, 'tick_size_change'))
       ORDER BY recv_ts, seq`,
    );
    expect(got.length).toBe(want.length);
    expect(got.length).toBeGreaterThan(0);
    got.forEach((r, i) => {
      expect(r.frame).toBe(want[i]!.frame);
      expect(r.recv_ts).toBe(Number(want[i]!.ms));
    });
  });

  it('shape=normalized gives flat per-level rows (CSV, parquet); unknown types are a typed 400', async () => {
    const csv = parseCsv(
      await (await L.fetch(`/v1/download/raw?data_type=polymarket_l2_deltas&shape=normalized&format=csv&market_id=${market.id}&limit=2000000`)).text(),
    );
    // The anchor's columns under its names first (recv_ts in epoch ms, coin = token, n_orders unknown), pmlake's after.
    expect(csv[0]).toEqual([
      'recv_ts',
      'coin',
      'side',
      'level',
      'price',
      'size',
      'n_orders',
      'timestamp',
      'market_id',
      'is_snapshot',
      'after_gap',
      'hash',
      'seq',
    ]);
    const want = await L.rows(
      `SELECT recv_ts, asset_id, side, level_idx, price::DOUBLE AS price, size::DOUBLE AS size, is_snapshot, after_gap, seq FROM read_parquet(${lakeGlob('l2')})
       WHERE condition_id = '${market.condition_id}'`,
    );
    expect(want.length).toBeGreaterThan(0);
    expect(csv.length - 1).toBe(want.length);
    const key = (r: { seq: unknown; level: unknown; coin: unknown }) => `${String(r.seq)}/${String(r.level)}/${String(r.coin)}`;
    const byKey = new Map(want.map((r) => [key({ seq: r.seq, level: r.level_idx, coin: r.asset_id }), r]));
    expect(byKey.size).toBe(want.length);
    for (const row of csv.slice(1)) {
      const [recv, coin, side, level, price, size, nOrders, , , isSnapshot, afterGap, , seq] = row;
      const w = byKey.get(key({ seq, level, coin }));
      expect(w, `${seq}/${level}`).toBeDefined();
      expect(Number(recv)).toBe((w!.recv_ts as Date).getTime());
      expect(coin).toBe(w!.asset_id);
      expect(side).toBe(w!.side ?? '');
      expect(price === '' ? null : Number(price)).toBe(w!.price);
      expect(size === '' ? null : Number(size)).toBe(w!.size);
      expect(nOrders).toBe('');
      expect(isSnapshot).toBe(String(w!.is_snapshot));
      expect(afterGap).toBe(String(w!.after_gap));
    }
    const pq = await parquetRows(
      Buffer.from(await (await L.fetch(`/v1/download/raw?data_type=polymarket_l2_deltas&shape=normalized&format=parquet&limit=100`)).arrayBuffer()),
    );
    expect(pq.length).toBe(Math.min(100, Number((await L.rows(`SELECT count(*) AS n FROM read_parquet(${lakeGlob('l2')})`))[0]!.n)));
    expect(Object.keys(pq[0]!).slice(0, 7)).toEqual(['recv_ts', 'coin', 'side', 'level', 'price', 'size', 'n_orders']);
    expect(typeof pq[0]!.recv_ts === 'bigint' || typeof pq[0]!.recv_ts === 'number').toBe(true);
    expect(pq.every((r) => r.n_orders === null)).toBe(true);
    const bad = await L.fetch('/v1/download/raw?data_type=polymarket_bbo&shape=normalized');
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { detail: { code: string } }).detail.code).toBe('normalized_unavailable');
  });
});

describe('series and bulk', () => {
  const postBulk = (body: unknown) =>
    L.fetch('/v1/download/bulk', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  it('series OHLCV at 30s (from trades) and 1h (from minute candles): every bucket equals a bucketing of the trades in TypeScript', async () => {
    const s = (
      await L.rows(
        `SELECT m.series_id, list(t.token_id) AS toks FROM read_parquet(${catalog('markets')}) m, unnest(m.outcome_token_ids) AS t(token_id)
       WHERE m.series_id IS NOT NULL GROUP BY 1 ORDER BY len(toks) DESC LIMIT 1`,
      )
    )[0];
    expect(s).toBeDefined();
    const trades = await lakeTrades(s!.toks as string[]);
    expect(trades.length).toBeGreaterThan(0);
    for (const [tf, stepMs] of [
      ['30s', 30_000],
      ['1h', 3_600_000],
    ] as const) {
      const want = new Map<string, { open: number; high: number; low: number; close: number; volume: number; n: number }>();
      const ordered = [...trades].sort((a, b) => +a.ts - +b.ts || a.block_number - b.block_number || a.log_index - b.log_index);
      for (const t of ordered) {
        const k = `${t.token_id}|${new Date(Math.floor(+t.ts / stepMs) * stepMs).toISOString()}`;
        const c = want.get(k);
        if (!c) want.set(k, { open: t.price, high: t.price, low: t.price, close: t.price, volume: t.size, n: 1 });
        else Object.assign(c, { high: Math.max(c.high, t.price), low: Math.min(c.low, t.price), close: t.price, volume: c.volume + t.size, n: c.n + 1 });
      }
      // The other key: this file's other tests use up the main key's download rate (20 a minute).
      const res = await L.fetch(
        `/v1/download/series?series_id=${encodeURIComponent(String(s!.series_id))}&data_type=ohlcv&timeframe=${tf}&format=json&limit=2000000`,
        { key: L.otherKey },
      );
      expect(res.status).toBe(200);
      const got = JSON.parse(await res.text()) as {
        market_id: string;
        timestamp: string;
        open: number;
        high: number;
        low: number;
        close: number;
        volume: number;
        trade_count: number;
      }[];
      expect(got.length).toBe(want.size);
      for (const g of got) {
        const w = want.get(`${g.market_id}|${new Date(g.timestamp).toISOString()}`);
        expect(w, `${g.market_id} ${g.timestamp}`).toBeDefined();
        expect([g.open, g.high, g.low, g.close, g.trade_count]).toEqual([w!.open, w!.high, w!.low, w!.close, w!.n]);
        expect(g.volume).toBeCloseTo(w!.volume, 4);
      }
    }
  });

  it('series: every market of a series in one file', async () => {
    const s = (
      await L.rows(
        `SELECT m.series_id, list(t.token_id) AS toks FROM read_parquet(${catalog('markets')}) m, unnest(m.outcome_token_ids) AS t(token_id)
       WHERE m.series_id IS NOT NULL GROUP BY 1 ORDER BY len(toks) DESC LIMIT 1`,
      )
    )[0];
    if (!s) return;
    const res = await L.fetch(`/v1/download/series?series_id=${encodeURIComponent(String(s.series_id))}&format=json&limit=2000000`);
    const want = await lakeTrades(s.toks as string[]);
    if (want.length === 0) {
      expect(res.status).toBe(404);
      return;
    }
    expect(res.status).toBe(200);
    const got = JSON.parse(await res.text()) as { id: string }[];
    expect(got.map((r) => r.id).sort()).toEqual(want.map((t) => t.id).sort());
    expect((await L.fetch('/v1/download/series?series_id=no-such-series')).status).toBe(404);
  });

  it('bulk: one ZIP, a file per item, manifest with rows/bytes/sha256, an empty item reported empty', async () => {
    const res = await postBulk({
      items: [
        { kind: 'trades', market_id: market.id, format: 'csv' },
        { kind: 'ohlcv', market_id: market.id, timeframe: '1h', format: 'parquet' },
        { kind: 'trades', market_id: market.id, start: '2001-01-01T00:00:00Z', end: '2001-01-02T00:00:00Z' },
        { kind: 'options', series_id: 'deribit:btc-options', data_type: 'greeks', format: 'json', limit: 50 },
      ],
    });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('application/zip');
    const zip = readZip(Buffer.from(await res.arrayBuffer()));
    const manifest = JSON.parse(zip.get('manifest.json')!.toString()) as {
      items: { item: number; file: string; rows: number; bytes: number; sha256: string; status: string }[];
    };
    expect(manifest.items.map((i) => i.status)).toEqual(['ok', 'ok', 'empty', 'ok']);
    for (const it of manifest.items) {
      const file = zip.get(it.file)!;
      expect(file, it.file).toBeDefined();
      expect(crypto.createHash('sha256').update(file).digest('hex')).toBe(it.sha256);
      if (it.status === 'ok') expect(file.length).toBe(it.bytes);
    }
    const csv = parseCsv(zip.get(manifest.items[0]!.file)!.toString());
    expect(csv.length - 1).toBe((await lakeTrades(market.tokens)).length);
    expect(manifest.items[0]!.rows).toBe(csv.length - 1);
    expect(manifest.items[2]!.file).toMatch(/\.EMPTY\.txt$/);
    const ohlcv = await parquetRows(zip.get(manifest.items[1]!.file)!);
    expect(ohlcv.length).toBe(manifest.items[1]!.rows);
    expect(JSON.parse(zip.get(manifest.items[3]!.file)!.toString())).toHaveLength(50);
  });

  it('bulk ZIP passes independent readers: `unzip -t` and Python zipfile verify every CRC-32; contents match the manifest', async () => {
    const res = await postBulk({
      items: [
        { kind: 'trades', market_id: market.id, format: 'csv' },
        { kind: 'trades', market_id: market.id, start: '2001-01-01T00:00:00Z', end: '2001-01-02T00:00:00Z' },
        { kind: 'ohlcv', market_id: market.id, timeframe: '1m', format: 'json' },
        { kind: 'trades', market_id: market.id, format: 'parquet' },
      ],
    });
    expect(res.status).toBe(200);
    const body = Buffer.from(await res.arrayBuffer());
    const file = path.join(L.dir, `bulk-${crypto.randomBytes(4).toString('hex')}.zip`);
    fs.writeFileSync(file, body);
    // Info-ZIP's own test of the archive: it reads every entry and checks its CRC against the central directory.
    const unzip = spawnSync('unzip', ['-t', file], { encoding: 'utf8' });
    expect(unzip.status, unzip.stdout + unzip.stderr).toBe(0);
    expect(unzip.stdout).toMatch(/No errors detected/);
    // Python's zipfile: testzip() returns the first member whose CRC does not match (None when all do); each
    // member's size, CRC-32 and SHA-256 as it computes them.
    const py = spawnSync(
      'python3',
      [
        '-c',
        [
          'import sys, json, zipfile, hashlib, zlib',
          'z = zipfile.ZipFile(sys.argv[1])',
          'bad = z.testzip()',
          'out = {"bad": bad, "members": [{"name": i.filename, "size": i.file_size, "crc": i.CRC, "stored": i.compress_type == zipfile.ZIP_STORED,',
          '  "sha256": hashlib.sha256(z.read(i.filename)).hexdigest(), "crc_of_data": zlib.crc32(z.read(i.filename))} for i in z.infolist()]}',
          'print(json.dumps(out))',
        ].join('\n'),
        file,
      ],
      { encoding: 'utf8' },
    );
    expect(py.status, py.stderr).toBe(0);
    const got = JSON.parse(py.stdout) as {
      bad: string | null;
      members: { name: string; size: number; crc: number; stored: boolean; sha256: string; crc_of_data: number }[];
    };
    expect(got.bad).toBeNull();
    const manifest = JSON.parse(readZip(body).get('manifest.json')!.toString()) as { items: { file: string; bytes: number; sha256: string; status: string }[] };
    expect(got.members.map((m) => m.name)).toEqual([...manifest.items.map((i) => i.file), 'manifest.json']);
    for (const m of got.members) {
      expect(m.stored, m.name).toBe(true);
      expect(m.crc_of_data, m.name).toBe(m.crc);
    }
    for (const [i, it] of manifest.items.entries()) {
      expect(got.members[i]!.sha256, it.file).toBe(it.sha256);
      if (it.status === 'ok') expect(got.members[i]!.size, it.file).toBe(it.bytes);
    }
    expect(manifest.items.map((i) => i.status)).toEqual(['ok', 'empty', 'ok', 'ok']);
  });

  it('bulk: a client that stops reading holds the COPY back; when it disconnects the COPY is interrupted and only what was sent is charged', async () => {
    // 15 items of the market's normalized L2 tape as JSON: more than the loopback socket buffers hold, so a
    // client that stops reading leaves the server blocked mid-bundle with a COPY open. The second user: the
    // first one's 20-downloads-a-minute burst is spent by the other tests in this file.
    const N = 15;
    const item = { kind: 'raw', data_type: 'polymarket_l2_deltas', shape: 'normalized', market_id: market.id, format: 'json', limit: 2_000_000 };
    const body = JSON.stringify({ items: Array.from({ length: N }, () => item) });
    const url = new URL(`${L.srv.url}/v1/download/bulk`);
    const got = await new Promise<{ req: http.ClientRequest; res: http.IncomingMessage }>((resolve, reject) => {
      const req = http.request(url, { method: 'POST', headers: { 'content-type': 'application/json', 'x-api-key': L.otherKey } }, (res) =>
        resolve({ req, res }),
      );
      req.on('error', reject);
      req.end(body);
    });
    expect(got.res.statusCode).toBe(200);
    got.res.pause();
    // Wait until the server is stuck: a COPY open and no progress for a while.
    let last = -1;
    for (let stable = 0; stable < 5;) {
      await new Promise((r) => setTimeout(r, 50));
      const now = got.res.readableLength;
      stable = now === last ? stable + 1 : 0;
      last = now;
    }
    expect(activeCopies()).toBe(1);
    got.req.destroy();
    got.res.destroy();
    for (let i = 0; i < 200 && activeCopies() > 0; i++) await new Promise((r) => setTimeout(r, 25));
    expect(activeCopies()).toBe(0);
    // The history: a bundle that ended early records the bytes that left the server, not all 25 items' worth.
    await new Promise((r) => setTimeout(r, 50));
    const h = sqliteOf(L.srv.ctx.state)
      .prepare(`SELECT p.status, p.bytes FROM pulls p JOIN users u ON u.id = p.user_id WHERE u.email = 'other@example.com' AND p.description LIKE 'bulk:%'`)
      .all() as { status: string; bytes: number | null }[];
    expect(h.length).toBe(N);
    expect(h.filter((r) => r.status === 'pending')).toEqual([]);
    const charged = h.filter((r) => r.status === 'completed');
    expect(charged.length).toBeGreaterThan(0);
    expect(charged.length).toBeLessThan(N);
    expect(charged.reduce((a, r) => a + (r.bytes ?? 0), 0)).toBeGreaterThan(0);
  });

  it('bulk validation: 1..25 items, ids required per kind', async () => {
    expect((await postBulk({ items: [] })).status).toBe(422);
    expect((await postBulk({ items: Array.from({ length: 26 }, () => ({ kind: 'trades', market_id: market.id })) })).status).toBe(422);
    const r = await postBulk({ items: [{ kind: 'trades', market_id: market.id }, { kind: 'trades' }] });
    expect(r.status).toBe(400);
    expect(((await r.json()) as { detail: { code: string; item_index: number } }).detail).toMatchObject({ code: 'missing_market_id', item_index: 1 });
  });
});
