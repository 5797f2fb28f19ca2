import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { DuckDBInstance } from '@duckdb/node-api';
import { WebSocket } from 'ws';
import { archiveHour } from '../../sim/generate/archive-hour.js';
import { runIngest, type IngestReport } from '../../ingest/run.js';
import { sqlString } from '../../src/lake/duckdb.js';
import type { RunningServer } from '../../src/server.js';
import { activateSubscriptionTx } from '../../src/state/accounts.js';
import { startTestServer, testConfig } from './server.js';

/**
 * The archive span's golden answers: what today's service serves for a lake ingested from one small archive hour
 * (test/fixtures/archive/). They guard a change of how archive-sourced frames are stored: raw downloads, raw
 * estimates and the venue-protocol replay must stay byte for byte what they are. `scripts/golden-archive.ts`
 * writes the fixture (`--fixture`) and the golden files; test/ingest/archive-golden.test.ts compares.
 */

export const FIXTURE = path.resolve('test/fixtures/archive/polymarket_orderbook_2026-04-20T14.parquet');
export const GOLDEN_DIR = path.resolve('test/fixtures/golden/archive-span');

/** The span served: the fixture's hour and the minute its last receive times spill into. */
export const SPAN = { start: '2026-04-20T14:00:00.000Z', end: '2026-04-20T15:05:00.000Z' };
/** A replay that starts inside the hour, so it opens with the books rebuilt at that instant. */
const MID = '2026-04-20T14:30:00.000Z';

// A handwritten market beside the generated ones: the rows whose rebuilt frames a storage change could most easily
// get wrong — book levels whose text is not the decimal's shortest form, object levels, an empty book, a
// price_change without a touch, a lower-case side, entries of one message on both tokens, a trade without fee or
// hash, tick size changes (no l2 row carries them), tiny prices and sizes.
const EDGE_MARKET = `0x${'e'.repeat(60)}0001`;
const EDGE_A = '1'.repeat(77);
const EDGE_B = '2'.repeat(77);
type EdgeRow = readonly (string | number | null)[];
const T0 = Date.parse('2026-04-20T14:10:00Z');
// prettier-ignore
const EDGE_ROWS: EdgeRow[] = [
  // recv, ts, event, asset, bids, asks, price, size, side, best_bid, best_ask, fee, tx, old tick, new tick
  [T0, T0 - 40, 'book', EDGE_A, '[["0.48", "100"], ["0.50","250.50"]]', '[["0.550","10.000000"],["0.52","1e2"]]', null, null, null, null, null, null, null, null, null],
  [T0 + 900, T0 + 850, 'price_change', EDGE_A, null, null, '0.5', '0', 'BUY', '0.48', '0.52', null, null, null, null],
  [T0 + 1900, T0 + 1850, 'price_change', EDGE_A, null, null, '0.49', '12.5', 'buy', null, null, null, null, null, null],
  [T0 + 2900, T0 + 2800, 'price_change', EDGE_A, null, null, '0.53', '7', 'SELL', '0.49', '0.52', null, null, null, null],
  [T0 + 2900, T0 + 2800, 'price_change', EDGE_A, null, null, '0.54', '0.000001', 'SELL', '0.49', '0.52', null, null, null, null],
  [T0 + 3900, T0 + 3890, 'last_trade_price', EDGE_A, null, null, '0.52', '3', 'BUY', null, null, null, null, null, null],
  [T0 + 4900, T0 + 4880, 'tick_size_change', EDGE_A, null, null, null, null, null, null, null, null, null, '0.01', '0.001'],
  [T0 + 5900, T0 + 5850, 'price_change', EDGE_A, null, null, '0.001', '1000000', 'BUY', '0.49', '0.52', null, null, null, null],
  [T0 + 6900, T0 + 6900, 'last_trade_price', EDGE_A, null, null, '0.49', '1.25', 'SELL', null, null, 25, `0x${'ab'.repeat(32)}`, null, null],
  [T0, T0 - 40, 'book', EDGE_B, '[{"price":"0.45","size":"5"}]', '[{"price":"0.52","size":"250.5"}]', null, null, null, null, null, null, null, null, null],
  [T0 + 2900, T0 + 2800, 'price_change', EDGE_B, null, null, '0.47', '7', 'BUY', '0.47', '0.52', null, null, null, null],
  [T0 + 4900, T0 + 4880, 'tick_size_change', EDGE_B, null, null, null, null, null, null, null, null, null, '0.01', '0.001'],
  [T0 + 7900, T0 + 7800, 'book', EDGE_B, '[]', '[]', null, null, null, null, null, null, null, null, null],
];

/**
 * Writes the fixture: a generated hour of three markets (sim/generate/archive-hour.ts, seeded) and the
 * handwritten market, in the archive's v2 layout and sort (market, asset, receive time). Returns its rows.
 */
export async function writeFixture(out: string): Promise<number> {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'pmlake-golden-fix-'));
  const gen = path.join(tmp, 'hour.parquet');
  try {
    await archiveHour({ rows: 1200, seed: 20260420, hour: '2026-04-20T14', markets: 3 }, gen);
    const lit = (v: string | number | null): string => (v === null ? 'NULL' : typeof v === 'number' ? String(v) : sqlString(v));
    const values = EDGE_ROWS.map((r, i) => `(${[100_000 + i, ...r].map(lit).join(', ')})`).join(',\n');
    const db = await DuckDBInstance.create(':memory:', { threads: '1', preserve_insertion_order: 'true' });
    const conn = await db.connect();
    try {
      await conn.run(`SET TimeZone = 'UTC'`);
      fs.mkdirSync(path.dirname(out), { recursive: true });
      await conn.run(
        `COPY (
           WITH g AS (SELECT file_row_number AS ord, * EXCLUDE (file_row_number) FROM read_parquet(${sqlString(gen)}, file_row_number = true)),
           e AS (
             SELECT ord, CAST(make_timestamp(recv * 1000) AS TIMESTAMPTZ) AS timestamp_received, CAST(make_timestamp(ts * 1000) AS TIMESTAMPTZ) AS "timestamp",
                    CAST(${sqlString(EDGE_MARKET)} AS BLOB) AS market, event_type, asset_id, bids, asks, CAST(price AS DECIMAL(9,4)) AS price,
                    CAST(size AS DECIMAL(18,6)) AS size, side, CAST(best_bid AS DECIMAL(9,4)) AS best_bid, CAST(best_ask AS DECIMAL(9,4)) AS best_ask,
                    CAST(fee AS USMALLINT) AS fee_rate_bps, tx AS transaction_hash, CAST(old_tick AS DECIMAL(9,4)) AS old_tick_size,
                    CAST(new_tick AS DECIMAL(9,4)) AS new_tick_size
             FROM (VALUES ${values}) v(ord, recv, ts, event_type, asset_id, bids, asks, price, size, side, best_bid, best_ask, fee, tx, old_tick, new_tick)
           )
           SELECT * EXCLUDE (ord) FROM (SELECT * FROM g UNION ALL BY NAME SELECT * FROM e)
           ORDER BY market, asset_id, timestamp_received, ord
         ) TO ${sqlString(out)} (FORMAT parquet, COMPRESSION zstd, ROW_GROUP_SIZE 100000)`,
      );
      return Number((await conn.runAndReadAll(`SELECT count(*) FROM read_parquet(${sqlString(out)})`)).getRows()[0]![0]);
    } finally {
      conn.closeSync();
      db.closeSync();
    }
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true });
  }
}

export type GoldenLake = { srv: RunningServer; report: IngestReport; key(): Promise<string>; close(): Promise<void> };

/** The fixture ingested into a fresh lake under `dir`, the real server over it on a loopback port, a Professional key. */
export async function goldenServer(dir: string): Promise<GoldenLake> {
  const lake = path.join(dir, 'lake');
  const report = await runIngest([FIXTURE], { lakeDir: lake, threads: 2 });
  if (report.failed !== 0) throw new Error(`fixture ingest failed: ${JSON.stringify(report.issues)}`);
  const srv = await startTestServer(testConfig({ PMLAKE_LAKE: lake, PMLAKE_STATE: path.join(dir, 'state'), PMLAKE_RATE_LIMITS: 'off' }));
  const store = srv.ctx.state;
  let n = 0;
  // A user per answer: a plan's burst cap on downloads (a minute's) would refuse a run of them from one user.
  const key = async (): Promise<string> => {
    const user = await store.upsertUser(`golden-${++n}@example.com`, 'professional');
    await store.tx((t) => activateSubscriptionTx(t, { userId: user.id, tier: 'professional', billingPeriod: 'monthly', fundedBy: 'grant', at: new Date() }));
    return (await store.createApiKey({ userId: user.id, name: 'golden', prefix: srv.ctx.config.keyPrefix })).plaintext;
  };
  return { srv, report, key, close: () => srv.close() };
}

/**
 * A Parquet answer as its schema (one `# name type` line a column) and its rows in file order as DuckDB's CSV: the
 * bytes of a Parquet file of raw frames depend on the order of frames that share a receive time and seq (see
 * canonicalLines), which an ingest does not fix, so they differ from one ingest of the fixture to the next.
 */
async function parquetRows(bytes: Buffer): Promise<Buffer> {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'pmlake-golden-pq-'));
  const db = await DuckDBInstance.create(':memory:', { threads: '1', preserve_insertion_order: 'true' });
  const conn = await db.connect();
  try {
    const file = path.join(tmp, 'answer.parquet');
    const csv = path.join(tmp, 'rows.csv');
    fs.writeFileSync(file, bytes);
    await conn.run(`SET TimeZone = 'UTC'`);
    const schema = (await conn.runAndReadAll(`DESCRIBE SELECT * FROM read_parquet(${sqlString(file)})`)).getRowObjectsJS();
    await conn.run(`COPY (SELECT * FROM read_parquet(${sqlString(file)})) TO ${sqlString(csv)} (FORMAT csv, HEADER true)`);
    const head = schema.map((c) => `# ${String(c.column_name)} ${String(c.column_type)}\n`).join('');
    return Buffer.concat([Buffer.from(head), fs.readFileSync(csv)]);
  } finally {
    conn.closeSync();
    db.closeSync();
    fs.rmSync(tmp, { recursive: true, force: true });
  }
}

/** One golden answer: the file holding its bytes and what was asked; `status` is a replay's close code. */
export type GoldenEntry = {
  file: string;
  request: string;
  status: number;
  content_type: string | null;
  content_disposition: string | null;
  close_reason?: string;
  bytes: number;
};
export type GoldenAnswers = { entries: GoldenEntry[]; bodies: Map<string, Buffer> };

const RAW_TYPES = ['polymarket_l2_deltas', 'polymarket_trades', 'polymarket_bbo', 'polymarket_raw'] as const;
const NORMALIZED = new Set(['polymarket_l2_deltas', 'polymarket_trades']);
const FORMATS = ['csv', 'json', 'parquet'] as const;

/** The venue's own frames of a replay, in order, and how it closed. */
async function replayFrames(url: string, key: string, subscription: unknown): Promise<{ texts: string[]; code: number; reason: string }> {
  const ws = new WebSocket(url, { headers: { 'x-api-key': key }, perMessageDeflate: false });
  const texts: string[] = [];
  ws.on('message', (d, isBinary) => {
    if (!isBinary) texts.push(String(d));
  });
  ws.on('open', () => ws.send(JSON.stringify(subscription)));
  const closed = await new Promise<{ code: number; reason: string }>((resolve, reject) => {
    ws.on('error', reject);
    ws.on('close', (code, reason) => resolve({ code, reason: String(reason) }));
  });
  return { texts, ...closed };
}

/** The fixture's markets (condition ids) and their tokens, from the fixture itself. */
export async function fixtureMarkets(): Promise<{ conditionId: string; tokens: string[] }[]> {
  const db = await DuckDBInstance.create(':memory:', { threads: '1' });
  const conn = await db.connect();
  try {
    const rows = (
      await conn.runAndReadAll(
        `SELECT decode(market) AS m, list(DISTINCT asset_id ORDER BY asset_id) AS a FROM read_parquet(${sqlString(FIXTURE)}) GROUP BY ALL ORDER BY m`,
      )
    ).getRowObjectsJS();
    return rows.map((r) => ({ conditionId: String(r.m), tokens: (r.a as unknown[]).map(String) }));
  } finally {
    conn.closeSync();
    db.closeSync();
  }
}

/**
 * Every answer the golden files hold, fetched from the running server: the raw downloads (each data set, shape and
 * format; one market's frames), the raw estimates, the raw data sets' listing, each market's estimate of its raw
 * tape, and market-channel replays of the span at speed 0 — every asset with and without the custom feature, two
 * assets of different markets (frames cut to them), and the second half of the hour with its opening books — each
 * frame's text a JSON string on its own line.
 */
export async function fetchGoldenAnswers(g: GoldenLake): Promise<GoldenAnswers> {
  const entries: GoldenEntry[] = [];
  const bodies = new Map<string, Buffer>();
  const base = g.srv.url;
  const window = `start=${SPAN.start}&end=${SPAN.end}`;
  const get = async (name: string, request: string, init: RequestInit = {}): Promise<void> => {
    const res = await fetch(`${base}${request}`, { ...init, headers: { 'x-api-key': await g.key(), ...((init.headers as Record<string, string>) ?? {}) } });
    let file = name;
    let body: Buffer = Buffer.from(await res.arrayBuffer());
    if (res.status === 200 && file.endsWith('.parquet')) {
      body = await parquetRows(body);
      file = `${file}.rows.csv`;
    }
    entries.push({
      file,
      request: init.method && init.method !== 'GET' ? `${init.method} ${request} ${String(init.body)}` : `GET ${request}`,
      status: res.status,
      content_type: res.headers.get('content-type'),
      content_disposition: res.headers.get('content-disposition'),
      bytes: body.length,
    });
    bodies.set(file, body);
  };
  const markets = await fixtureMarkets();
  // The API names a market by its numeric id: a tape-only market's is derived from its condition id at ingest.
  const listed = (await (await fetch(`${base}/v1/markets?limit=100`, { headers: { 'x-api-key': await g.key() } })).json()) as {
    id: string;
    condition_id: string;
  }[];
  const idOf = (m: { conditionId: string }): string => {
    const hit = listed.find((x) => x.condition_id === m.conditionId);
    if (!hit) throw new Error(`market ${m.conditionId} is not listed`);
    return hit.id;
  };
  for (const dt of RAW_TYPES) {
    for (const shape of NORMALIZED.has(dt) ? ['raw', 'normalized'] : ['raw']) {
      for (const f of FORMATS) await get(`download-${dt}-${shape}.${f}`, `/v1/download/raw?data_type=${dt}&shape=${shape}&format=${f}&${window}`);
      await get(`estimate-${dt}-${shape}.json`, `/v1/download/raw/estimate?data_type=${dt}&shape=${shape}&${window}`);
    }
  }
  const edge = markets.find((m) => m.conditionId === EDGE_MARKET)!;
  const first = markets[0]!;
  for (const m of [first, edge]) {
    const tag = m === edge ? 'edge' : 'first';
    await get(`download-polymarket_raw-market-${tag}.json`, `/v1/download/raw?data_type=polymarket_raw&market_id=${idOf(m)}&format=json&${window}`);
    await get(`estimate-polymarket_raw-market-${tag}.json`, `/v1/download/raw/estimate?data_type=polymarket_raw&market_id=${idOf(m)}&${window}`);
  }
  await get('raw-datasets.json', '/v1/download/raw/datasets');
  for (const [i, m] of markets.entries()) {
    await get(`market-estimate-raw-${i}.json`, `/v1/markets/${idOf(m)}/estimate`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ data_type: 'raw', start: SPAN.start, end: SPAN.end }),
    });
  }
  const ws = `${base.replace('http', 'ws')}/v1/replay/ws/market`;
  const assets = markets.flatMap((m) => m.tokens);
  const replays: { file: string; from: string; assets: string[]; custom: boolean }[] = [
    { file: 'replay-all-custom.jsonl', from: SPAN.start, assets, custom: true },
    { file: 'replay-all.jsonl', from: SPAN.start, assets, custom: false },
    { file: 'replay-one-asset.jsonl', from: SPAN.start, assets: [edge.tokens[0]!, first.tokens[1]!], custom: false },
    { file: 'replay-from-mid.jsonl', from: MID, assets, custom: true },
  ];
  for (const r of replays) {
    const request = `/v1/replay/ws/market?from=${r.from}&to=${SPAN.end}&speed=0`;
    const sub = { assets_ids: r.assets, type: 'market', custom_feature_enabled: r.custom };
    const out = await replayFrames(`${ws}?from=${r.from}&to=${SPAN.end}&speed=0`, await g.key(), sub);
    const body = Buffer.from(out.texts.map((t) => `${JSON.stringify(t)}\n`).join(''));
    entries.push({
      file: r.file,
      request: `WS ${request} ${JSON.stringify(sub)}`,
      status: out.code,
      content_type: null,
      content_disposition: null,
      close_reason: out.reason,
      bytes: body.length,
    });
    bodies.set(r.file, body);
  }
  return { entries, bodies };
}

/** The index of the golden files: one line per answer (its request, status, headers and size), in fetch order. */
export function goldenIndex(a: GoldenAnswers): string {
  return a.entries.map((e) => JSON.stringify(e)).join('\n') + '\n';
}

const MARK = /pmlake-rebuilt:(\d+)/;

/**
 * An answer's lines as they are compared. The archive stages one frame per archive row, so the entries of one
 * venue message become frames sharing a receive time and seq; raw is sorted on (recv_ts, seq) only, and the order
 * among such frames is whatever the ingest's parallel staging produced — it differs between two ingests of the
 * same file. Each run of consecutive lines carrying the same `pmlake-rebuilt:<seq>` is therefore compared as a
 * sorted run, and a JSON array's separating comma is dropped from each line so a run holding the last record
 * sorts alike. Everything else, and every line's text, is compared as served.
 */
export function canonicalLines(text: string): string[] {
  const lines = text.split('\n').map((l) => (l.endsWith(',') ? l.slice(0, -1) : l));
  const out: string[] = [];
  for (let i = 0; i < lines.length;) {
    const key = MARK.exec(lines[i]!)?.[1];
    let j = i + 1;
    if (key !== undefined) while (j < lines.length && MARK.exec(lines[j]!)?.[1] === key) j++;
    out.push(...lines.slice(i, j).sort());
    i = j;
  }
  return out;
}

export function writeGolden(a: GoldenAnswers, dir = GOLDEN_DIR): void {
  fs.rmSync(dir, { recursive: true, force: true });
  fs.mkdirSync(dir, { recursive: true });
  for (const [file, body] of a.bodies) fs.writeFileSync(path.join(dir, file), body);
  fs.writeFileSync(path.join(dir, 'index.jsonl'), goldenIndex(a));
}
