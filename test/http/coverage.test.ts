import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DuckDBInstance, type DuckDBConnection } from '@duckdb/node-api';
import { generate } from '../../sim/generate/index.js';
import { runIngest } from '../../ingest/run.js';
import { VersionDraft } from '../../ingest/versions.js';
import { createTestKey, startTestServer, tempDir, testConfig } from '../helpers/server.js';
import { catalog, glob } from '../helpers/query-lake.js';
import { readZip } from '../helpers/zip.js';
import type { RunningServer } from '../../src/server.js';
import { seededRandom } from '../../bench/stats.js';
import { writeSet } from '../helpers/lake-rows.js';

/**
 * The tape's coverage in the API (issue 15) on a real server over a real lake: a small generated tape through the
 * real ingest, then coverage, incidents and checkpoints rows this test constructs itself, published as a new lake
 * version, so every expectation is computed here in plain TypeScript from those same rows (not by the ingest's
 * integrity checks, which test/ingest/integrity-* test against their own oracle).
 */

type Status = 'verified' | 'unverified' | 'degraded' | 'missing';
const RANK: Record<Status, number> = { verified: 0, unverified: 1, degraded: 2, missing: 3 };
type Cov = {
  date: string;
  condition_id: string;
  asset_id: string;
  status: Status;
  seconds_verified: number;
  seconds_degraded: number;
  seconds_unverified: number;
  checkpoints_passed: number;
  checkpoints_failed: number;
  messages: number;
  first_recv_ts: string | null;
  last_recv_ts: string | null;
};
type Inc = { asset_id: string; condition_id: string; kind: string; from_ts: string; to_ts: string; seq: number; detail: string };
type Ckpt = { ts: string; condition_id: string; asset_id: string; seq: number; kind: 'book' | 'top'; ok: boolean; since_ts: string };
type Market = { id: string; condition_id: string; tokens: string[] };

const DAY = 86_400_000;
const day = (ms: number) => new Date(ms).toISOString().slice(0, 10);
const iso = (ms: number) => {
  const s = new Date(ms).toISOString();
  return s.endsWith('.000Z') ? `${s.slice(0, 19)}Z` : s;
};
const worst = (ss: Status[]): Status | null => ss.reduce<Status | null>((w, s) => (w === null || RANK[s] > RANK[w] ? s : w), null);

describe('tape coverage in the API', () => {
  const tmp = tempDir('pmlake-coverage-');
  const lakeDir = path.join(tmp.dir, 'lake');
  let srv: RunningServer;
  let key: string;
  let db: DuckDBInstance;
  let conn: DuckDBConnection;
  let markets: Market[] = [];
  const cov: Cov[] = [];
  const inc: Inc[] = [];
  const ckpts: Ckpt[] = [];
  let days: string[] = [];
  /** The busiest token's tape: the instants of its l2 rows (ms), for the `verified` flag on snapshots. */
  let busy = { token: '', condition: '', firstMs: 0, lastMs: 0 };
  let pool: string[] = [];
  let next = 0;

  const get = async (p: string, k: string | null = pool[next++ % pool.length]!) => {
    const res = await fetch(`${srv.url}${p}`, { headers: k === null ? {} : { 'x-api-key': k } });
    const text = await res.text();
    let body: any = text;
    try {
      body = JSON.parse(text);
    } catch {
      /* not JSON */
    }
    return { status: res.status, body };
  };
  const post = async (p: string, payload: unknown) =>
    fetch(`${srv.url}${p}`, {
      method: 'POST',
      headers: { 'x-api-key': pool[next++ % pool.length]!, 'content-type': 'application/json' },
      body: JSON.stringify(payload),
    });

  beforeAll(async () => {
    const gen = path.join(tmp.dir, 'gen');
    await generate({ markets: 3, days: 3, seed: 15, out: gen, workers: 0, rate: 0.2 });
    await runIngest([gen], { lakeDir, threads: 2 });
    db = await DuckDBInstance.create(':memory:', { threads: '1', memory_limit: '256MB' });
    conn = await db.connect();
    await conn.run(`SET TimeZone = 'UTC'`);
    const ms = (
      await conn.runAndReadAll(`SELECT id, condition_id, outcome_token_ids FROM read_parquet(${catalog(lakeDir, 'markets')}) ORDER BY id`)
    ).getRowObjectsJS();
    markets = ms
      .map((m) => ({ id: String(m.id), condition_id: String(m.condition_id), tokens: (m.outcome_token_ids as string[]).map(String) }))
      .filter((m) => m.tokens.length === 2);
    const b = (
      await conn.runAndReadAll(
        `SELECT asset_id, any_value(condition_id) AS c, epoch_ms(min(recv_ts)) AS f, epoch_ms(max(recv_ts)) AS l, count(DISTINCT seq) AS n
         FROM read_parquet(${glob(lakeDir, 'l2')}) GROUP BY 1 ORDER BY n DESC, asset_id LIMIT 1`,
      )
    ).getRowObjectsJS()[0]!;
    busy = { token: String(b.asset_id), condition: String(b.c), firstMs: Number(b.f), lastMs: Number(b.l) };

    // Five days around the tape, every token of every market, statuses drawn so that every one occurs.
    const r = seededRandom(15);
    const d0 = Date.parse(`${day(busy.firstMs)}T00:00:00Z`) - DAY;
    days = Array.from({ length: 5 }, (_, i) => day(d0 + i * DAY));
    const statuses: Status[] = ['verified', 'unverified', 'degraded', 'missing'];
    let k = 0;
    for (const m of markets) {
      for (const t of m.tokens) {
        for (const [i, d] of days.entries()) {
          const status = statuses[(k++ + Math.floor(r() * 3)) % 4]!;
          const start = Date.parse(`${d}T00:00:00Z`);
          const missing = status === 'missing';
          cov.push({
            date: d,
            condition_id: m.condition_id,
            asset_id: t,
            status,
            seconds_verified: missing ? 0 : Math.round(r() * 40_000) + 0.25,
            seconds_degraded: status === 'degraded' ? Math.round(r() * 9000) + 0.5 : 0,
            seconds_unverified: missing ? 0 : Math.round(r() * 3000),
            checkpoints_passed: missing ? 0 : Math.floor(r() * 50),
            checkpoints_failed: status === 'degraded' ? 1 + Math.floor(r() * 3) : 0,
            messages: missing ? 0 : 1 + Math.floor(r() * 10_000),
            first_recv_ts: missing ? null : iso(start + 1000 + i),
            last_recv_ts: missing ? null : iso(start + DAY - 1500),
          });
          if (!missing && r() < 0.6) {
            // One incident a day or so; some cross midnight (a silence that began the evening before).
            const from = start + Math.floor(r() * DAY);
            const to = from + (r() < 0.3 ? DAY / 2 : Math.floor(r() * 60_000));
            const kind = ['gap', 'silence', 'top_mismatch', 'disconnect', 'crossed'][Math.floor(r() * 5)]!;
            const detail =
              kind === 'gap'
                ? JSON.stringify({ levels: [{ side: 'bid', price: '0.51', expected: '100', replayed: '80' }], differing: 1 })
                : kind === 'silence' || kind === 'disconnect'
                  ? JSON.stringify({ seconds: (to - from) / 1000, typical_seconds: 2.5 })
                  : JSON.stringify({ expected: { best_bid: '0.5', best_ask: '0.52' }, replayed: { best_bid: '0.49', best_ask: '0.52' } });
            inc.push({ asset_id: t, condition_id: m.condition_id, kind, from_ts: iso(from), to_ts: iso(to), seq: 1000 + inc.length, detail });
          }
        }
      }
    }
    // The busiest token's book checkpoints: pass, fail, pass across its tape; after the last, nothing closes it.
    const span = busy.lastMs - busy.firstMs;
    const c1 = busy.firstMs + Math.floor(span * 0.25);
    const c2 = busy.firstMs + Math.floor(span * 0.5);
    const c3 = busy.firstMs + Math.floor(span * 0.75);
    const base = { condition_id: busy.condition, asset_id: busy.token };
    ckpts.push({ ...base, ts: iso(c1), seq: 1, kind: 'book', ok: true, since_ts: iso(busy.firstMs) });
    ckpts.push({ ...base, ts: iso(c1 + 7), seq: 2, kind: 'top', ok: false, since_ts: iso(c1) }); // a top check bounds nothing
    ckpts.push({ ...base, ts: iso(c2), seq: 3, kind: 'book', ok: false, since_ts: iso(c1) });
    ckpts.push({ ...base, ts: iso(c3), seq: 4, kind: 'book', ok: true, since_ts: iso(c2) });

    const draft = new VersionDraft(lakeDir);
    await writeSet(conn, draft, 'coverage', cov);
    await writeSet(conn, draft, 'incidents', inc);
    await writeSet(conn, draft, 'checkpoints', ckpts);
    draft.publish('ingest', {}, ['coverage.test.ts']);

    srv = await startTestServer(testConfig({ PMLAKE_LAKE: lakeDir, PMLAKE_STATE: path.join(tmp.dir, 'state') }));
    key = await createTestKey(srv, { email: 'pro@example.com', plan: 'professional', scopes: ['read', 'download'] });
    pool = [];
    for (let i = 0; i < 12; i += 1) {
      pool.push(await createTestKey(srv, { email: 'pro@example.com', plan: 'professional', name: `p${i}`, scopes: ['read', 'download'] }));
    }
  }, 120_000);

  afterAll(async () => {
    conn?.closeSync();
    db?.closeSync();
    await srv?.close();
    tmp.cleanup();
  });

  /** What GET /v1/markets/{id}/coverage must answer for a market and an inclusive day window, from the rows above. */
  function expectedMarket(m: Market, start: string, end: string) {
    const outcome = (t: string) => m.tokens.indexOf(t);
    const wantDays = cov
      .filter((c) => m.tokens.includes(c.asset_id) && c.date >= start && c.date <= end)
      .sort((a, b) => (a.date === b.date ? (a.asset_id < b.asset_id ? -1 : 1) : a.date < b.date ? -1 : 1))
      .map((c) => {
        const { asset_id, condition_id: _c, ...rest } = c;
        return { ...rest, outcome: outcome(asset_id), token_id: asset_id };
      });
    const lo = Date.parse(`${start}T00:00:00Z`);
    const hi = Date.parse(`${end}T00:00:00Z`) + DAY;
    const wantInc = inc
      .filter((i) => m.tokens.includes(i.asset_id) && Date.parse(i.from_ts) < hi && Date.parse(i.to_ts) >= lo)
      .sort((a, b) => Date.parse(a.from_ts) - Date.parse(b.from_ts) || (a.asset_id < b.asset_id ? -1 : 1) || a.seq - b.seq)
      .map((i) => ({
        token_id: i.asset_id,
        outcome: outcome(i.asset_id),
        kind: i.kind,
        from: i.from_ts,
        to: i.to_ts,
        seq: i.seq,
        detail: JSON.parse(i.detail),
      }));
    return { days: wantDays, incidents: wantInc };
  }

  it('GET /v1/markets/{id}/coverage: days per outcome and the incidents of the window equal the rows', async () => {
    expect(markets.length).toBeGreaterThanOrEqual(2);
    for (const m of markets) {
      const [start, end] = [days[1]!, days[3]!];
      const r = await get(`/v1/markets/${m.id}/coverage?start=${start}&end=${end}`);
      expect(r.status).toBe(200);
      const want = expectedMarket(m, start, end);
      expect(want.days.length).toBe(6);
      expect(r.body.market_id).toBe(m.id);
      expect([r.body.start, r.body.end]).toEqual([start, end]);
      expect(r.body.days.map(({ outcome_label: _l, ...d }: Record<string, unknown>) => d)).toEqual(want.days);
      expect(r.body.incidents).toEqual(want.incidents);
      expect(r.body.incidents_truncated).toBe(false);
    }
    // Default window: the whole span (five days here); a token id narrows to its outcome.
    const m = markets[0]!;
    const all = await get(`/v1/markets/${m.id}/coverage`);
    expect([all.body.start, all.body.end]).toEqual([days[0], days[4]]);
    expect(all.body.days.map(({ outcome_label: _l, ...d }: Record<string, unknown>) => d)).toEqual(expectedMarket(m, days[0]!, days[4]!).days);
    const one = await get(`/v1/markets/${m.tokens[1]}/coverage?start=${days[0]}&end=${days[4]}`);
    const both = expectedMarket(m, days[0]!, days[4]!);
    expect(one.body.days.map(({ outcome_label: _l, ...d }: Record<string, unknown>) => d)).toEqual(both.days.filter((d) => d.outcome === 1));
    expect(one.body.incidents).toEqual(both.incidents.filter((i) => i.outcome === 1));
    expect(inc.some((i) => i.kind === 'gap')).toBe(true);
  });

  it('GET /v1/coverage?date=: per market the worst status of its tokens, sums, incidents that began that day, and the summary', async () => {
    for (const d of days) {
      const r = await get(`/v1/coverage?date=${d}`);
      expect(r.status).toBe(200);
      const want = markets.map((m) => {
        const rows = cov.filter((c) => c.date === d && m.tokens.includes(c.asset_id));
        return {
          market_id: m.id,
          condition_id: m.condition_id,
          status: worst(rows.map((c) => c.status))!,
          tokens: rows.length,
          seconds_verified: rows.reduce((s, c) => s + c.seconds_verified, 0),
          seconds_degraded: rows.reduce((s, c) => s + c.seconds_degraded, 0),
          checkpoints_passed: rows.reduce((s, c) => s + c.checkpoints_passed, 0),
          checkpoints_failed: rows.reduce((s, c) => s + c.checkpoints_failed, 0),
          incidents: inc.filter((i) => i.from_ts.slice(0, 10) === d && m.tokens.includes(i.asset_id)).length,
        };
      });
      want.sort((a, b) => RANK[b.status] - RANK[a.status] || (a.market_id < b.market_id ? -1 : 1));
      expect(r.body.markets).toEqual(want);
      expect(r.body.total_markets).toBe(want.length);
      const summary = { verified: 0, degraded: 0, unverified: 0, missing: 0 };
      for (const w of want) summary[w.status] += 1;
      expect(r.body.summary).toEqual(summary);
      const only = await get(`/v1/coverage?date=${d}&status=${want[0]!.status}&limit=1`);
      expect(only.body.markets).toEqual([want[0]]);
    }
    const none = await get('/v1/coverage?date=2001-01-01');
    expect(none.body).toEqual({ date: '2001-01-01', markets: [], total_markets: 0, summary: { verified: 0, degraded: 0, unverified: 0, missing: 0 } });
  });

  it('estimates and the bulk manifest carry the worst status per day touched (tape data only)', async () => {
    const m = markets[0]!;
    const lo = `${days[1]}T06:00:00Z`;
    const hi = `${days[3]}T00:00:00Z`; // exclusive: days[3] is not touched
    const want = [days[1]!, days[2]!].map((d) => ({
      date: d,
      status: worst(cov.filter((c) => c.date === d && m.tokens.includes(c.asset_id)).map((c) => c.status))!,
    }));
    const wantCov = { worst: worst(want.map((w) => w.status)), days: want };
    const est = await post(`/v1/markets/${m.id}/estimate`, { data_type: 'orderbook', start: lo, end: hi });
    expect(est.status).toBe(200);
    expect(((await est.json()) as { coverage: unknown }).coverage).toEqual(wantCov);
    const trades = await post(`/v1/markets/${m.id}/estimate`, { data_type: 'trades', start: lo, end: hi });
    expect(((await trades.json()) as { coverage: unknown }).coverage).toBeNull();
    // The raw tape's estimate spans every market: each day's worst token of all.
    const venueDays = [days[1]!, days[2]!].map((d) => ({ date: d, status: worst(cov.filter((c) => c.date === d).map((c) => c.status))! }));
    const raw = await get(`/v1/download/raw/estimate?data_type=polymarket_l2_deltas&start=${lo}&end=${hi}`);
    expect(raw.status).toBe(200);
    expect(raw.body.coverage).toEqual({ worst: worst(venueDays.map((d) => d.status)), days: venueDays });
    // A series estimate of book snapshots: the tokens of the series' markets.
    const withSeries = (await conn.runAndReadAll(`SELECT id, series_id FROM read_parquet(${catalog(lakeDir, 'markets')}) WHERE series_id IS NOT NULL`))
      .getRowObjectsJS()
      .map((r) => ({ id: String(r.id), series: String(r.series_id) }));
    const series = withSeries[0]!.series;
    const inSeries = new Set(markets.filter((x) => withSeries.some((w) => w.id === x.id && w.series === series)).flatMap((x) => x.tokens));
    const seriesDays = [days[1]!, days[2]!]
      .map((d) => ({ date: d, status: worst(cov.filter((c) => c.date === d && inSeries.has(c.asset_id)).map((c) => c.status)) }))
      .filter((d) => d.status !== null);
    expect(seriesDays.length).toBe(2);
    const se = await post(`/v1/series/${encodeURIComponent(series)}/estimate`, { data_type: 'snapshots', start: lo, end: hi });
    expect(se.status).toBe(200);
    expect(((await se.json()) as { coverage: unknown }).coverage).toEqual({ worst: worst(seriesDays.map((d) => d.status!)), days: seriesDays });

    const bulk = await post('/v1/download/bulk', {
      items: [
        { kind: 'top_of_book', market_id: m.id, start: lo, end: hi, format: 'csv' },
        { kind: 'trades', market_id: m.id, format: 'csv' },
      ],
    });
    expect(bulk.status).toBe(200);
    const manifest = JSON.parse(
      readZip(Buffer.from(await bulk.arrayBuffer()))
        .get('manifest.json')!
        .toString(),
    ) as {
      items: { coverage: unknown }[];
      coverage_worst: string | null;
    };
    expect(manifest.items[0]!.coverage).toEqual(wantCov);
    expect(manifest.items[1]!.coverage).toBeNull();
    expect(manifest.coverage_worst).toBe(wantCov.worst);
  });

  it('GET /v1/orderbook/snapshot says whether the book at the instant lies in a stretch a passing book checkpoint closed', async () => {
    const books = ckpts.filter((c) => c.kind === 'book').map((c) => ({ ts: Date.parse(c.ts), since: Date.parse(c.since_ts), ok: c.ok }));
    const expected = (at: number) => {
      const closing = books.filter((c) => c.ts >= at).sort((a, b) => a.ts - b.ts)[0];
      return { verified: closing !== undefined && closing.ok && (closing.since < at || closing.ts === at), by: closing ? iso(closing.ts) : null };
    };
    const span = busy.lastMs - busy.firstMs;
    const seen = new Set<boolean>();
    for (const f of [0.1, 0.25, 0.3, 0.5, 0.6, 0.75, 0.9]) {
      const at = busy.firstMs + Math.floor(span * f) + (f === 0.25 || f === 0.5 || f === 0.75 ? 0 : 1);
      const r = await get(`/v1/orderbook/snapshot?market_id=${busy.token}&at=${iso(at)}&depth=1`);
      expect(r.status).toBe(200);
      const want = expected(at);
      expect([r.body.verified, r.body.checkpoint_timestamp]).toEqual([want.verified, want.by]);
      seen.add(want.verified);
    }
    expect([...seen].sort()).toEqual([false, true]);
  });

  it('refuses bad input with a 4xx JSON detail, unknown markets with 404, and no key with 401', async () => {
    const m = markets[0]!;
    const bad = [
      `/v1/markets/${m.id}/coverage?start=2025-02-30`,
      `/v1/markets/${m.id}/coverage?start=2025-3-1`,
      `/v1/markets/${m.id}/coverage?start=2025-03-02&end=2025-03-01`,
      `/v1/markets/${m.id}/coverage?start=2024-01-01&end=2025-01-01`,
      `/v1/markets/${m.id}/coverage?end=${encodeURIComponent("2025-01-01' OR 1=1 --")}`,
      '/v1/coverage',
      '/v1/coverage?date=yesterday',
      '/v1/coverage?date=2025-01-01&status=fine',
      '/v1/coverage?date=2025-01-01&limit=0',
    ];
    for (const p of bad) {
      const r = await get(p);
      expect(r.status, p).toBe(422);
      expect(Array.isArray(r.body.detail), p).toBe(true);
    }
    // A year and a day is the most one request spans (2024 is a leap year: 366 days).
    expect((await get(`/v1/markets/${m.id}/coverage?start=2024-01-01&end=2024-12-31`)).status).toBe(200);
    for (const p of [
      '/v1/markets/999999999/coverage',
      `/v1/markets/${'9'.repeat(77)}/coverage`,
      `/v1/markets/${encodeURIComponent("1' OR '1'='1")}/coverage`,
    ]) {
      const r = await get(p);
      expect(r.status, p).toBe(404);
      expect(typeof r.body.detail).toBe('string');
    }
    expect((await get(`/v1/markets/0x${'ab'.repeat(32)}/coverage`)).status).toBe(422);
    expect((await get(`/v1/markets/${m.id}/coverage`, null)).status).toBe(401);
    expect((await get('/v1/coverage?date=2025-01-01', null)).status).toBe(401);
    expect((await get('/v1/coverage?date=2025-01-01', 'pmk_not_a_key')).status).toBe(401);
    void key;
  });
});
