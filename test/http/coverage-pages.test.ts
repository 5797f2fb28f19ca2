import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DuckDBInstance, type DuckDBConnection } from '@duckdb/node-api';
import { generate } from '../../sim/generate/index.js';
import { runIngest } from '../../ingest/run.js';
import { VersionDraft } from '../../ingest/versions.js';
import { createTestKey, startTestServer, tempDir, testConfig } from '../helpers/server.js';
import { catalog } from '../helpers/query-lake.js';
import { writeSet } from '../helpers/lake-rows.js';
import type { RunningServer } from '../../src/server.js';

/**
 * A market's coverage over a tape longer than one request may span (366 days): the pages its Link chain walks,
 * and the coverage endpoints' days given as date-times. The coverage rows are this test's own, written into a
 * new lake version, so what each page must hold is computed here from them.
 */
const DAY = 86_400_000;
const day = (ms: number) => new Date(ms).toISOString().slice(0, 10);
const addDays = (d: string, n: number) => day(Date.parse(`${d}T00:00:00Z`) + n * DAY);

describe('market coverage pages and coverage days as date-times', () => {
  const tmp = tempDir('pmlake-covpages-');
  const lakeDir = path.join(tmp.dir, 'lake');
  let srv: RunningServer;
  let db: DuckDBInstance;
  let conn: DuckDBConnection;
  let market: { id: string; condition_id: string; tokens: string[] };
  /** The days the tape has for the market (any token), ascending. */
  let tapeDays: string[] = [];
  const pool: string[] = [];
  let next = 0;

  const get = async (p: string) => {
    const res = await fetch(`${srv.url}${p}`, { headers: { 'x-api-key': pool[next++ % pool.length]! } });
    return { status: res.status, body: (await res.json()) as any, link: res.headers.get('link') };
  };

  beforeAll(async () => {
    const gen = path.join(tmp.dir, 'gen');
    await generate({ markets: 2, days: 1, seed: 22, out: gen, workers: 0, rate: 0.2 });
    await runIngest([gen], { lakeDir, threads: 2 });
    db = await DuckDBInstance.create(':memory:', { threads: '1', memory_limit: '256MB' });
    conn = await db.connect();
    await conn.run(`SET TimeZone = 'UTC'`);
    const ms = (await conn.runAndReadAll(`SELECT id, condition_id, outcome_token_ids FROM read_parquet(${catalog(lakeDir, 'markets')}) ORDER BY id`))
      .getRowObjectsJS()
      .map((m) => ({ id: String(m.id), condition_id: String(m.condition_id), tokens: (m.outcome_token_ids as string[]).map(String) }))
      .filter((m) => m.tokens.length === 2);
    market = ms[0]!;
    // About 870 days of tape, one day in five, alternating tokens: more than two requests' worth of days.
    const cov: Record<string, unknown>[] = [];
    const first = Date.parse('2023-01-03T00:00:00Z');
    for (let i = 0; i * 5 < 870; i += 1) {
      const d = day(first + i * 5 * DAY);
      cov.push({
        date: d,
        condition_id: market.condition_id,
        asset_id: market.tokens[i % 2]!,
        status: i % 3 === 0 ? 'verified' : 'unverified',
        seconds_verified: 3600,
        seconds_degraded: 0,
        seconds_unverified: 60,
        checkpoints_passed: 2,
        checkpoints_failed: 0,
        messages: 100 + i,
        first_recv_ts: `${d}T00:00:01Z`,
        last_recv_ts: `${d}T23:59:00Z`,
      });
    }
    tapeDays = cov.map((c) => String(c.date));
    const draft = new VersionDraft(lakeDir);
    await writeSet(conn, draft, 'coverage', cov);
    draft.publish('ingest', {}, ['coverage-pages.test.ts']);
    srv = await startTestServer(testConfig({ PMLAKE_LAKE: lakeDir, PMLAKE_STATE: path.join(tmp.dir, 'state') }));
    for (let i = 0; i < 6; i += 1) pool.push(await createTestKey(srv, { email: 'pro@example.com', plan: 'professional', name: `p${i}` }));
  }, 180_000);

  afterAll(async () => {
    conn?.closeSync();
    db?.closeSync();
    await srv?.close();
    tmp.cleanup();
  });

  /** Pages from `first` along the Link chain: each page's window and days. */
  async function walk(first: string): Promise<{ start: string; end: string; days: string[] }[]> {
    const pages: { start: string; end: string; days: string[] }[] = [];
    let p: string | null = first;
    while (p !== null) {
      const r = await get(p);
      expect(r.status, p).toBe(200);
      pages.push({ start: r.body.start, end: r.body.end, days: r.body.days.map((d: { date: string }) => d.date) });
      const m = r.link === null ? null : /^<([^>]+)>; rel="next"$/.exec(r.link);
      if (r.link !== null) expect(m?.[1]?.startsWith(`${srv.url}/`), r.link).toBe(true);
      p = m ? m[1]!.slice(srv.url.length) : null;
      expect(pages.length).toBeLessThan(10);
    }
    return pages;
  }

  it('without start: the newest 366 days, then the days before them page by page back to the first', async () => {
    const last = tapeDays[tapeDays.length - 1]!;
    const pages = await walk(`/v1/markets/${market.id}/coverage`);
    expect(pages.length).toBe(3);
    expect(pages[0]).toMatchObject({ start: addDays(last, -365), end: last });
    // Each page ends the day before the previous one started, the last one at the tape's first day.
    for (let i = 1; i < pages.length; i += 1) expect(pages[i]!.end).toBe(addDays(pages[i - 1]!.start, -1));
    expect(pages[pages.length - 1]!.start).toBe(tapeDays[0]);
    for (const pg of pages) expect(pg.days).toEqual(tapeDays.filter((d) => d >= pg.start && d <= pg.end));
    expect(pages.flatMap((pg) => pg.days).sort()).toEqual(tapeDays);
  });

  it('with start and no end: 366 days from start, then the days after them page by page to the last', async () => {
    const from = addDays(tapeDays[0]!, 3);
    const pages = await walk(`/v1/markets/${market.id}/coverage?start=${from}`);
    expect(pages[0]).toMatchObject({ start: from, end: addDays(from, 365) });
    for (let i = 1; i < pages.length; i += 1) expect(pages[i]!.start).toBe(addDays(pages[i - 1]!.end, 1));
    expect(pages[pages.length - 1]!.end).toBe(tapeDays[tapeDays.length - 1]);
    expect(pages.flatMap((pg) => pg.days)).toEqual(tapeDays.filter((d) => d >= from));
    // A window given whole is one page.
    const whole = await get(`/v1/markets/${market.id}/coverage?start=${tapeDays[1]}&end=${tapeDays[20]}`);
    expect(whole.link).toBeNull();
  });

  it('coverage days given as ISO date-times name their UTC day', async () => {
    const d = tapeDays[100]!;
    const asDay = await get(`/v1/markets/${market.id}/coverage?start=${d}&end=${addDays(d, 30)}`);
    expect(asDay.status).toBe(200);
    const asTime = await get(`/v1/markets/${market.id}/coverage?start=${d}T00:00:00Z&end=${encodeURIComponent(`${addDays(d, 31)}T01:30:00+02:00`)}`);
    expect(asTime.status).toBe(200);
    expect(asTime.body).toEqual(asDay.body);
    expect([asTime.body.start, asTime.body.end]).toEqual([d, addDays(d, 30)]);
    const venueDay = await get(`/v1/coverage?date=${d}`);
    expect(venueDay.body.markets.length).toBe(1);
    for (const t of [`${d}T00:00:00Z`, `${d}T23:59:59.999999Z`, `${d}T12:00:00`, encodeURIComponent(`${addDays(d, 1)}T00:30:00+01:00`)]) {
      const r = await get(`/v1/coverage?date=${t}`);
      expect(r.status, t).toBe(200);
      expect(r.body, t).toEqual(venueDay.body);
    }
    for (const bad of ['2025-02-30T00:00:00Z', '2025-03-01T25:00:00Z', 'yesterday', `${d}T00:00:00Zjunk`]) {
      const r = await get(`/v1/coverage?date=${encodeURIComponent(bad)}`);
      expect(r.status, bad).toBe(422);
      expect(r.body.detail[0].loc, bad).toEqual(['query', 'date']);
    }
  });
});
