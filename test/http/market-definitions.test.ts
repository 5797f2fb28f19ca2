import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runIngest } from '../../ingest/run.js';
import { createTestKey, startTestServer, tempDir, testConfig } from '../helpers/server.js';
import { expectedDefinitions, gid, POLL_STARTS, scenarioPoll, writePoll, type Definition } from '../helpers/catalogue-polls.js';
import type { RunningServer } from '../../src/server.js';
import { DEFINITION_FIELDS } from '../../src/query/market-definitions.js';

/**
 * GET /v1/markets/{id}?as_of= and GET /v1/markets/{id}/changes over a lake ingested from three catalogue polls, on a
 * real server: the answers are computed here from the polls' content (test/helpers/catalogue-polls.ts), not read
 * back from the lake.
 */
const polls = [0, 1, 2].map(scenarioPoll);
const defs = expectedDefinitions(polls);
/** The field names are the data set's contract; the values are checked against the oracle. */
const FIELDS = DEFINITION_FIELDS;
/** The runner's ISO form: no sub-second digits when there are none. */
const iso = (s: string): string => s.replace('.000Z', 'Z');
const norm = (v: unknown): unknown => (typeof v === 'string' && /^\d{4}-\d\d-\d\dT/.test(v) ? iso(v) : v);
const conditionOf = (n: number): string => defs.find((d) => d.market_id === gid(n))!.condition_id;

/** Per source the row in force at t, merged Gamma over CLOB. */
function inForce(condition: string, t: string): { fields: Record<string, unknown>; validFrom: string } | null {
  const at = Date.parse(t);
  const pick = (source: string): Definition | undefined =>
    defs.filter((d) => d.condition_id === condition && d.source === source && Date.parse(d.valid_from) <= at).pop();
  const rows = [pick('gamma'), pick('clob')].filter((d): d is Definition => d !== undefined);
  if (rows.length === 0) return null;
  const fields: Record<string, unknown> = {};
  for (const f of FIELDS) fields[f] = norm(rows.map((r) => r[f]).find((v) => v !== null && v !== undefined) ?? null);
  const validFrom = rows
    .map((r) => r.valid_from)
    .sort()
    .pop()!;
  return { fields, validFrom: iso(validFrom) };
}

/** The changes list of a market: per source, each row against the one before. */
function changesOf(condition: string): unknown[] {
  const out: { at: string; source: string; changes: Record<string, { from: unknown; to: unknown }> }[] = [];
  for (const source of ['gamma', 'clob']) {
    let prev: Definition | null = null;
    for (const d of defs.filter((x) => x.condition_id === condition && x.source === source)) {
      const changes: Record<string, { from: unknown; to: unknown }> = {};
      for (const f of FIELDS) {
        const from = prev ? (prev[f] ?? null) : null;
        const to = d[f] ?? null;
        if (JSON.stringify(from) !== JSON.stringify(to)) changes[f] = { from: norm(from), to: norm(to) };
      }
      if (Object.keys(changes).length > 0) out.push({ at: iso(d.valid_from), source, changes });
      prev = d;
    }
  }
  return out.sort((a, b) => Date.parse(a.at) - Date.parse(b.at) || a.source.localeCompare(b.source));
}

describe('point-in-time market definitions over HTTP', () => {
  const tmp = tempDir();
  let srv: RunningServer;
  let key: string;
  const get = async (p: string) => {
    const r = await fetch(`${srv.url}${p}`, { headers: { 'X-API-Key': key } });
    return { status: r.status, body: (await r.json()) as any, link: r.headers.get('link') };
  };
  beforeAll(async () => {
    const dir = path.join(tmp.dir, 'polls');
    polls.forEach((p, i) => writePoll(dir, POLL_STARTS[i]!, p));
    await runIngest([dir], { lakeDir: path.join(tmp.dir, 'lake') });
    srv = await startTestServer(testConfig({ PMLAKE_LAKE: path.join(tmp.dir, 'lake'), PMLAKE_STATE: path.join(tmp.dir, 'state') }));
    key = await createTestKey(srv);
  });
  afterAll(async () => {
    await srv?.close();
    tmp.cleanup();
  });

  it('as_of on either side of a tick-size change and of a resolution serves the definition then', async () => {
    const now = await get(`/v1/markets/${gid(1)}`);
    expect(now.status).toBe(200);
    expect(now.body).not.toHaveProperty('as_of');
    // M1's tick moves at poll 2: Gamma sees it on the first page, CLOB six seconds later (Gamma wins in between).
    for (const t of ['2026-05-01T10:02:00Z', '2026-05-01T10:05:03Z', '2026-05-01T10:05:30Z', '2026-06-15T00:00:00Z']) {
      const want = inForce(conditionOf(1), t)!;
      const r = await get(`/v1/markets/${gid(1)}?as_of=${t}`);
      expect(r.status, t).toBe(200);
      expect(Object.keys(r.body).sort()).toEqual(
        [...Object.keys(now.body), 'tick_size', 'min_order_size', 'neg_risk', 'accepting_orders', 'as_of', 'definition_valid_from'].sort(),
      );
      expect(r.body.tick_size, t).toBe(want.fields.tick_size);
      expect(r.body.definition_valid_from).toBe(want.validFrom);
      expect(r.body.as_of).toBe(t);
    }
    expect((await get(`/v1/markets/${gid(1)}?as_of=2026-05-01T10:02:00Z`)).body.tick_size).toBe(0.01);
    expect((await get(`/v1/markets/${gid(1)}?as_of=2026-05-01T10:05:03Z`)).body.tick_size).toBe(0.001);
    // M2 resolves (No) at poll 3.
    for (const t of ['2026-05-20T00:00:00Z', '2026-06-01T00:00:30Z']) {
      const want = inForce(conditionOf(2), t)!.fields;
      const r = (await get(`/v1/markets/${gid(2)}?as_of=${encodeURIComponent(t)}`)).body;
      expect([r.resolved, r.winning_outcome, r.closed, r.accepting_orders, r.end_date], t).toEqual([
        want.resolved,
        want.winning_outcome,
        want.closed,
        want.accepting_orders,
        want.end_date,
      ]);
      expect(r.status).toBe(want.resolved ? 'resolved' : 'active');
    }
    expect((await get(`/v1/markets/${gid(2)}?as_of=2026-05-20T00:00:00Z`)).body.resolved).toBe(false);
    expect((await get(`/v1/markets/${gid(2)}?as_of=2026-06-01T00:00:30Z`)).body.winning_outcome).toBe(1);
    // Epoch seconds and milliseconds name the same instant.
    const s = Date.parse('2026-05-01T10:05:03Z') / 1000;
    expect((await get(`/v1/markets/${gid(1)}?as_of=${s}`)).body).toEqual((await get(`/v1/markets/${gid(1)}?as_of=${s * 1000}`)).body);
    expect((await get(`/v1/markets/${gid(1)}?as_of=${s}`)).body.tick_size).toBe(0.001);
  });

  it('before the first definition, a market never polled, an unknown market, a bad as_of: 4xx with a detail', async () => {
    const before = await get(`/v1/markets/${gid(1)}?as_of=2026-04-01T00:00:00Z`);
    expect(before.status).toBe(404);
    expect(before.body.detail).toMatch(/first recorded definition is from 2026-05-01T10:00:00Z/);
    // M5 is in the catalogue (its metadata landed) but has no token ids, so no definition was ever recorded.
    expect((await get(`/v1/markets/${gid(5)}`)).status).toBe(200);
    const never = await get(`/v1/markets/${gid(5)}?as_of=2026-06-15T00:00:00Z`);
    expect(never.status).toBe(404);
    expect(never.body.detail).toMatch(/no recorded definition history/);
    expect((await get(`/v1/markets/${gid(5)}/changes`)).status).toBe(404);
    const unknown = await get(`/v1/markets/999999?as_of=2026-06-15T00:00:00Z`);
    expect(unknown.status).toBe(404);
    expect(typeof unknown.body.detail).toBe('string');
    for (const bad of ['yesterday', '2026-13-01', '2026-05-01T25:00:00Z', '1e9', '9'.repeat(16)]) {
      const r = await get(`/v1/markets/${gid(1)}?as_of=${encodeURIComponent(bad)}`);
      expect(r.status, bad).toBe(422);
      expect(JSON.stringify(r.body.detail), bad).toContain('as_of');
    }
    expect((await get(`/v1/markets/${gid(1)}/changes?cursor=nonsense`)).status).toBe(422);
    expect((await get(`/v1/markets/${gid(1)}/changes?from=2026-06-01T00:00:00Z&to=2026-05-01T00:00:00Z`)).status).toBe(422);
  });

  it('/changes lists exactly the changes, in time order, paged by cursor', async () => {
    for (const n of [1, 2, 3, 6]) {
      const want = changesOf(conditionOf(n));
      const all = await get(`/v1/markets/${gid(n)}/changes`);
      expect(all.status).toBe(200);
      expect(all.body, `market ${n}`).toEqual(want);
      expect(all.link).toBeNull();
      // Page by page through the Link header: the same list, each change once.
      const paged: unknown[] = [];
      let next: string | null = `/v1/markets/${gid(n)}/changes?limit=1`;
      while (next) {
        const r = await get(next);
        paged.push(...r.body);
        next = r.link ? new URL(/<([^>]+)>/.exec(r.link)![1]!).pathname + new URL(/<([^>]+)>/.exec(r.link)![1]!).search : null;
      }
      expect(paged).toEqual(want);
    }
    // M1: its tick-size change at poll 2, by each source; M2: its resolution at poll 3.
    const m1 = (await get(`/v1/markets/${gid(1)}/changes?from=2026-05-01T10:01:00Z`)).body;
    expect(m1.map((c: any) => [c.source, c.changes])).toEqual([
      ['gamma', { tick_size: { from: 0.01, to: 0.001 } }],
      ['clob', { tick_size: { from: 0.01, to: 0.001 } }],
    ]);
    const m2 = (await get(`/v1/markets/${gid(2)}/changes?from=2026-05-02T00:00:00Z&to=${Date.parse('2026-06-02T00:00:00Z')}`)).body;
    expect(m2.map((c: any) => c.source).sort()).toEqual(['clob', 'gamma']);
    for (const c of m2) expect(c.changes.resolved).toEqual({ from: false, to: true });
    expect(m2.find((c: any) => c.source === 'gamma').changes.winning_outcome).toEqual({ from: null, to: 1 });
  });

  it('/v1/status lists the catalogue with its newest landed time; the document describes both routes', async () => {
    const status = (await (await fetch(`${srv.url}/v1/status`)).json()) as any;
    const newest = polls[2]!.map((l) => ('at' in l ? Date.parse(l.at) : 0)).reduce((a, b) => Math.max(a, b));
    const cat = status.sources.find((s: any) => s.name === 'catalogue');
    expect(Date.parse(cat.newest_landed_at)).toBe(newest);
    const doc = (await (await fetch(`${srv.url}/v1/openapi.json`)).json()) as any;
    expect(doc.paths['/v1/markets/{market_id}/changes'].get.summary).toMatch(/definition changes/);
    expect(doc.paths['/v1/markets/{market_id}'].get.parameters.map((p: any) => p.name)).toContain('as_of');
    expect(doc.paths['/v1/markets/{market_id}/changes'].get.responses['200'].headers?.Link?.schema).toEqual({ type: 'string' });
    expect(doc.components.schemas.MarketResponse.required).not.toContain('as_of');
  });
});
