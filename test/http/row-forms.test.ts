import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildDownloadsLake, parseCsv, type DlLake } from '../helpers/downloads-lake.js';
import { files } from '../helpers/lake-files.js';
import { isoSql, type TimeUnit } from '../../src/lake/values.js';

/**
 * One form per resource (src/query/shapes.ts), through the real server over a lake built by the real generator and
 * ingest. Timestamps: every JSON answer and every CSV/JSON file of trades and OHLCV writes whole seconds
 * (`…:40Z`), of top of book and book snapshots milliseconds (`…:00.405Z`), each equal to the lake's instant
 * formatted here; Parquet keeps TIMESTAMP, in the same rows and order as the text formats. Order and outcomes:
 * the list endpoints newest first, files oldest first; the OHLCV endpoint one outcome per request, a market's file
 * every outcome — the same candles. Numbers: every number token of every JSON answer is the shortest text that
 * reads back as its value (no `68.280000`); venue coverage seconds are sums in whole milliseconds.
 */
let L: DlLake;
let market: { id: string; tokens: string[]; conditionId: string };

/** The lake's instant (µs) in ISO 8601 at a unit, formatted here: `.mmm` only at 'ms' or when there are ms, µs when there are µs. */
function isoAt(us: bigint, unit: TimeUnit): string {
  const ms = us / 1000n;
  const sub = us - ms * 1000n;
  const d = new Date(Number(ms)).toISOString();
  if (sub !== 0n) return `${d.slice(0, 23)}${String(sub).padStart(3, '0')}Z`;
  return unit === 's' && d.slice(19, 23) === '.000' ? `${d.slice(0, 19)}Z` : d;
}

/** The number tokens of a JSON text (a scanner that skips strings). */
function numberTokens(text: string): string[] {
  const out: string[] = [];
  for (let i = 0; i < text.length;) {
    const c = text[i]!;
    if (c === '"') {
      for (i++; text[i] !== '"'; i++) if (text[i] === '\\') i++;
      i++;
    } else if (c === '-' || (c >= '0' && c <= '9')) {
      const m = /^-?\d+(\.\d+)?([eE][+-]?\d+)?/.exec(text.slice(i, i + 40))!;
      out.push(m[0]);
      i += m[0].length;
    } else i++;
  }
  return out;
}

/** Whether a number token is the shortest text of its value: JavaScript's shortest round-trip digits, `.0` allowed on a whole number. */
function isShortest(tok: string): boolean {
  const n = Number(tok);
  const canon = (s: string) =>
    s
      .toLowerCase()
      .replace('e+', 'e')
      .replace(/e(-?)0+(\d)/, 'e$1$2');
  const js = String(n);
  return Number.isFinite(n) && (canon(tok) === canon(js) || (Number.isInteger(n) && tok === `${js}.0`));
}

async function parquetRows(buf: Buffer, extra = ''): Promise<Record<string, unknown>[]> {
  const f = path.join(L.dir, `r-${crypto.randomBytes(4).toString('hex')}.parquet`);
  fs.writeFileSync(f, buf);
  return L.rows(`SELECT *${extra} FROM read_parquet('${f}')`);
}

const text = async (p: string): Promise<string> => {
  const r = await L.fetch(p);
  expect(r.status, p).toBe(200);
  return r.text();
};
const json = async (p: string): Promise<Record<string, any>[]> => JSON.parse(await text(p)) as Record<string, any>[];
const csvObjects = (t: string): Record<string, string>[] => {
  const [head, ...rows] = parseCsv(t);
  return rows.map((r) => Object.fromEntries(head!.map((h, i) => [h, r[i]!])));
};

beforeAll(async () => {
  L = await buildDownloadsLake({ seed: 5 });
  const m = (
    await L.rows(
      `SELECT m.id, m.outcome_token_ids AS tokens, m.condition_id, count(*) n FROM read_parquet(${files(L.lakeDir, 'catalog/markets')}) m
       JOIN read_parquet(${files(L.lakeDir, 'trades')}) t ON list_contains(m.outcome_token_ids, t.token_id) GROUP BY ALL ORDER BY n DESC LIMIT 1`,
    )
  )[0]!;
  market = { id: String(m.id), tokens: m.tokens as string[], conditionId: String(m.condition_id) };
});
afterAll(async () => {
  await L?.close();
});

describe('isoSql', () => {
  it("writes the unit's digits, more only for a finer instant", async () => {
    const instants = [0n, 1_757_808_000_000_000n, 1_757_808_000_405_000n, 1_757_808_000_405_123n, 1_757_808_001_000_007n];
    for (const unit of ['s', 'ms'] as const) {
      const sql = `SELECT ${isoSql('t', unit)} AS iso FROM (SELECT make_timestamp(us) AS t, us FROM unnest([${instants.join(', ')}]::BIGINT[]) u(us)) ORDER BY us`;
      expect((await L.rows(sql)).map((r) => r.iso)).toEqual(instants.map((us) => isoAt(us, unit)));
    }
  });
});

describe('trades: one timestamp form; the list newest first, files oldest first', () => {
  it('the API, CSV, JSON and Parquet hold the same trades at the same instants, written alike', async () => {
    const lake = new Map(
      (
        await L.rows(
          `SELECT id, epoch_us(ts)::VARCHAR AS us, token_id FROM read_parquet(${files(L.lakeDir, 'trades')}) WHERE list_contains(${JSON.stringify(market.tokens).replace(/"/g, "'")}, token_id)`,
        )
      ).map((r) => [String(r.id), { us: BigInt(String(r.us)), token: String(r.token_id) }]),
    );
    const api = await json(`/v1/trades?market_id=${market.id}&limit=10000`);
    const csv = csvObjects(await text(`/v1/download/trades?market_id=${market.id}&format=csv`));
    const file = await json(`/v1/download/trades?market_id=${market.id}&format=json`);
    const pq = await parquetRows(
      Buffer.from(await (await L.fetch(`/v1/download/trades?market_id=${market.id}&format=parquet`)).arrayBuffer()),
      `, epoch_us("timestamp")::VARCHAR AS us`,
    );
    expect(api.length).toBe(lake.size);
    for (const rows of [api, csv, file, pq]) {
      expect(new Set(rows.map((r) => String(r.id)))).toEqual(new Set(lake.keys()));
    }
    for (const rows of [api, csv, file]) {
      for (const r of rows) {
        expect(r.timestamp).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
        expect(r.timestamp).toBe(isoAt(lake.get(String(r.id))!.us, 's'));
      }
    }
    expect(pq.map((r) => BigInt(String(r.us)))).toEqual(pq.map((r) => lake.get(String(r.id))!.us));
    // The list pages from the newest; a file is read from its start: each outcome oldest first, in the market's order.
    const apiUs = api.map((r) => lake.get(String(r.id))!.us);
    expect(apiUs.every((u, i) => i === 0 || u <= apiUs[i - 1]!)).toBe(true);
    const ids = csv.map((r) => r.id);
    expect(file.map((r) => r.id)).toEqual(ids);
    expect(pq.map((r) => r.id)).toEqual(ids);
    const key = (id: string) => [market.tokens.indexOf(lake.get(id)!.token), lake.get(id)!.us] as const;
    expect(ids.every((id, i) => i === 0 || key(ids[i - 1]!)[0] < key(id)[0] || (key(ids[i - 1]!)[0] === key(id)[0] && key(ids[i - 1]!)[1] <= key(id)[1]))).toBe(
      true,
    );
  });
});

describe('OHLCV: one timestamp form; one outcome per API request, every outcome in a file — the same candles', () => {
  it('the API (newest first, per outcome) reversed is the file (oldest first) of that outcome, in CSV, JSON and Parquet', async () => {
    const perOutcome = await Promise.all(market.tokens.map((_, o) => json(`/v1/trades/ohlcv?market_id=${market.id}&outcome=${o}&limit=10000`)));
    const csv = csvObjects(await text(`/v1/download/ohlcv?market_id=${market.id}&format=csv`));
    const file = await json(`/v1/download/ohlcv?market_id=${market.id}&format=json`);
    const pq = await parquetRows(
      Buffer.from(await (await L.fetch(`/v1/download/ohlcv?market_id=${market.id}&format=parquet`)).arrayBuffer()),
      `, epoch_us("timestamp")::VARCHAR AS us`,
    );
    const num = ['open', 'high', 'low', 'close', 'volume', 'trade_count'] as const;
    const norm = (r: Record<string, unknown>) => ({
      market_id: String(r.market_id),
      outcome: Number(r.outcome),
      timestamp: String(r.timestamp),
      ...Object.fromEntries(num.map((k) => [k, Number(r[k])])),
    });
    expect(csv.length).toBe(perOutcome.reduce((s, a) => s + a.length, 0));
    expect(pq.length).toBe(csv.length);
    expect(file.map(norm)).toEqual(csv.map(norm));
    // Parquet: TIMESTAMP, the same instants in the same order.
    expect(pq.map((r) => isoAt(BigInt(String(r.us)), 's'))).toEqual(csv.map((r) => r.timestamp));
    for (const r of [...csv, ...perOutcome.flat()]) expect(r.timestamp).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
    // Files: oldest first, outcomes of one bucket in outcome order.
    const order = csv.map((r) => [Date.parse(r.timestamp!), Number(r.outcome)] as const);
    expect(order.every((k, i) => i === 0 || order[i - 1]![0] < k[0] || (order[i - 1]![0] === k[0] && order[i - 1]![1] < k[1]))).toBe(true);
    market.tokens.forEach((token, o) => {
      const api = perOutcome[o]!;
      expect(api.length).toBeGreaterThan(1);
      expect(api.every((r) => r.market_id === token && r.outcome === o)).toBe(true);
      expect(api.map(norm).reverse()).toEqual(csv.filter((r) => Number(r.outcome) === o).map(norm));
    });
  });
});

describe('top of book and book snapshots: milliseconds in every text form', () => {
  it('the API, CSV and JSON files write the lake instant at ms; Parquet holds the same rows in the same order; seq is text in JSON', async () => {
    const lake = new Map(
      (
        await L.rows(
          `SELECT asset_id, seq::VARCHAR AS seq, epoch_us(ts)::VARCHAR AS us FROM read_parquet(${files(L.lakeDir, 'top_of_book')}) WHERE condition_id = '${market.conditionId}'`,
        )
      ).map((r) => [`${String(r.asset_id)} ${String(r.seq)}`, BigInt(String(r.us))]),
    );
    const first = [...lake.values()].reduce((a, b) => (a < b ? a : b));
    const last = [...lake.values()].reduce((a, b) => (a > b ? a : b));
    const window = `start=${isoAt(first, 'ms')}&end=${isoAt(last + 1000n, 'ms')}`;
    const api = (await Promise.all(market.tokens.map((_, o) => json(`/v1/orderbook/top_of_book?market_id=${market.id}&outcome=${o}&limit=10000`)))).flat();
    const csv = csvObjects(await text(`/v1/download/top_of_book?market_id=${market.id}&format=csv&${window}`));
    const file = await json(`/v1/download/top_of_book?market_id=${market.id}&format=json&${window}`);
    const pq = await parquetRows(
      Buffer.from(await (await L.fetch(`/v1/download/top_of_book?market_id=${market.id}&format=parquet&${window}`)).arrayBuffer()),
      `, seq::VARCHAR AS seq_text`,
    );
    expect(api.length).toBe(lake.size);
    expect(csv.length).toBe(lake.size);
    for (const rows of [api, csv, file]) {
      for (const r of rows) {
        expect(typeof r.seq).toBe('string');
        expect(r.timestamp).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
        expect(r.timestamp).toBe(isoAt(lake.get(`${r.asset_id} ${r.seq}`)!, 'ms'));
      }
    }
    const keys = csv.map((r) => `${r.asset_id} ${r.seq}`);
    expect(new Set(keys)).toEqual(new Set(lake.keys()));
    expect(file.map((r) => `${r.asset_id} ${r.seq}`)).toEqual(keys);
    expect(pq.map((r) => `${String(r.asset_id)} ${String(r.seq_text)}`)).toEqual(keys);
    const book = await json(`/v1/download/orderbook?market_id=${market.id}&format=json&limit=50`);
    expect(book.length).toBeGreaterThan(0);
    for (const r of book) {
      expect(typeof r.seq).toBe('string');
      expect(r.timestamp).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    }
  });
});

describe('JSON numbers', () => {
  it('every number of every JSON answer of trades, OHLCV, books and coverage is the shortest text of its value', async () => {
    const days = (await L.rows(`SELECT DISTINCT strftime(date, '%Y-%m-%d') AS d FROM read_parquet(${files(L.lakeDir, 'coverage')}) ORDER BY 1`)).map((r) =>
      String(r.d),
    );
    const paths = [
      `/v1/trades?market_id=${market.id}&limit=10000`,
      '/v1/trades/recent?limit=100',
      `/v1/trades/ohlcv?market_id=${market.id}&limit=10000`,
      `/v1/trades/ohlcv?market_id=${market.id}&timeframe=7m&limit=10000`,
      `/v1/orderbook/top_of_book?market_id=${market.id}&limit=10000`,
      `/v1/download/trades?market_id=${market.id}&format=json`,
      `/v1/download/ohlcv?market_id=${market.id}&format=json`,
      `/v1/download/orderbook?market_id=${market.id}&format=json`,
      `/v1/markets/${market.id}/coverage`,
      ...days.map((d) => `/v1/coverage?date=${d}`),
    ];
    for (const p of paths) {
      const tokens = numberTokens(await text(p));
      expect(tokens.length, p).toBeGreaterThan(0);
      expect(
        tokens.filter((t) => !isShortest(t)),
        p,
      ).toEqual([]);
    }
  });

  it("a trade's price, size, usd_value and fee are the lake's exact decimals", async () => {
    const lake = new Map(
      (
        await L.rows(
          `SELECT id, price::VARCHAR AS price, size::VARCHAR AS size, usd_value::VARCHAR AS usd_value, fee::VARCHAR AS fee
           FROM read_parquet(${files(L.lakeDir, 'trades')})`,
        )
      ).map((r) => [String(r.id), r]),
    );
    const api = [...(await json(`/v1/trades?market_id=${market.id}&limit=10000`)), ...(await json('/v1/trades/recent?limit=100'))];
    expect(api.length).toBeGreaterThan(100);
    for (const t of api) {
      for (const k of ['price', 'size', 'usd_value', 'fee']) expect(t[k], `${t.id} ${k}`).toBe(parseFloat(String(lake.get(t.id)![k])));
    }
  });

  it('venue coverage: seconds per market are the sum of its tokens in whole milliseconds, at most three decimals', async () => {
    const cov = await L.rows(
      `SELECT strftime(date, '%Y-%m-%d') AS d, condition_id, seconds_verified::VARCHAR AS v, seconds_degraded::VARCHAR AS g
       FROM read_parquet(${files(L.lakeDir, 'coverage')})`,
    );
    // Whole milliseconds per (day, condition id), summed as integers.
    const ms = new Map<string, { v: number; g: number }>();
    for (const r of cov) {
      const k = `${String(r.d)} ${String(r.condition_id)}`;
      const e = ms.get(k) ?? { v: 0, g: 0 };
      e.v += Math.round(parseFloat(String(r.v)) * 1000);
      e.g += Math.round(parseFloat(String(r.g)) * 1000);
      ms.set(k, e);
    }
    let checked = 0;
    for (const d of new Set(cov.map((r) => String(r.d)))) {
      const body = await text(`/v1/coverage?date=${d}`);
      for (const [, field, tok] of body.matchAll(/"seconds_(verified|degraded)":([^,}]+)/g)) {
        expect(tok, `${d} seconds_${field}`).toMatch(/^\d+(\.\d{1,3})?$/);
      }
      for (const m of (JSON.parse(body) as { markets: { condition_id: string; seconds_verified: number; seconds_degraded: number }[] }).markets) {
        const e = ms.get(`${d} ${m.condition_id}`)!;
        expect(m.seconds_verified).toBe(e.v / 1000);
        expect(m.seconds_degraded).toBe(e.g / 1000);
        checked++;
      }
    }
    expect(checked).toBe(ms.size);
  });
});
