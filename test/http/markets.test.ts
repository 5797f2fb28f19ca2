import fs from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildQueryLake, catalog, glob, type QueryLake } from '../helpers/query-lake.js';
import { createTestKey } from '../helpers/server.js';
import { expireSubscriptions } from '../../src/state/accounts.js';
import type { Principal } from '../../src/accounts/principal.js';

type M = Record<string, any>;

describe('GET /v1/markets, /v1/markets/{id}, /stats, /estimate', () => {
  let L: QueryLake;
  let all: M[];
  let busy: M;

  beforeAll(async () => {
    L = await buildQueryLake();
    all = await L.rows(
      `SELECT id, question, condition_id, category, series_id, active, closed, resolved, trade_count, orderbook_count, volume,
              epoch_us(end_date) AS end_us, epoch_us(created_at) AS created_us, epoch_us(data_to) AS data_to_us, outcome_token_ids, outcomes
       FROM read_parquet(${catalog(L.lakeDir, 'markets')})`,
    );
    busy = [...all].sort((a, b) => Number(b.trade_count) - Number(a.trade_count))[0]!;
  });
  afterAll(async () => {
    await L?.close();
  });

  const ids = (rows: M[]): string[] => rows.map((r) => String(r.id));
  /** Descending by key, nulls last, then id ascending: the documented order. */
  const order = (rows: M[], key: (m: M) => number | bigint | null): M[] =>
    [...rows].sort((a, b) => {
      const x = key(a);
      const y = key(b);
      if (x !== y) {
        if (x === null) return 1;
        if (y === null) return -1;
        return x > y ? -1 : 1;
      }
      return String(a.id) < String(b.id) ? -1 : String(a.id) > String(b.id) ? 1 : 0;
    });

  it('lists 100 by default, the seed Market fields on every row', async () => {
    const r = await L.get('/v1/markets');
    expect(r.status).toBe(200);
    expect(r.body).toHaveLength(Math.min(100, all.length));
    for (const k of [
      'id',
      'event_id',
      'question',
      'description',
      'outcomes',
      'outcome_prices',
      'outcome_token_ids',
      'active',
      'closed',
      'resolved',
      'winning_outcome',
      'resolution_date',
      'volume',
      'volume_24h',
      'liquidity',
      'start_date',
      'end_date',
      'trade_count',
      'orderbook_count',
      'data_from',
      'data_to',
      'category',
    ]) {
      expect(r.body[0]).toHaveProperty(k);
    }
    // Default sort 'top': most rows first.
    const want = order(all, (m) => Number(m.trade_count ?? 0) + Number(m.orderbook_count ?? 0));
    expect(ids(r.body).slice(0, 5)).toEqual(ids(want).slice(0, 5));
  });

  it('sorts by every anchor sort_by value, descending, stable under paging', async () => {
    const keys: Record<string, (m: M) => number | bigint | null> = {
      volume: (m) => (m.volume === null ? null : Number(m.volume)),
      trades: (m) => (m.trade_count === null ? null : Number(m.trade_count)),
      orderbook: (m) => (m.orderbook_count === null ? null : Number(m.orderbook_count)),
      end_date: (m) => (m.end_us as bigint | null) ?? null,
      created: (m) => (m.created_us as bigint | null) ?? null,
      newest_data: (m) => (m.data_to_us as bigint | null) ?? null,
    };
    for (const [s, key] of Object.entries(keys)) {
      const want = ids(order(all, key));
      const p1 = await L.get(`/v1/markets?sort_by=${s}&limit=30`);
      const p2 = await L.get(`/v1/markets?sort_by=${s}&limit=30&offset=30`);
      expect(p1.status, s).toBe(200);
      if (s === 'volume' || s === 'trades' || s === 'orderbook' || s === 'end_date') {
        expect([...ids(p1.body), ...ids(p2.body)], s).toEqual(want.slice(0, 60));
      } else {
        expect(p1.body.length).toBe(30);
        expect(new Set([...ids(p1.body), ...ids(p2.body)]).size).toBe(60);
      }
    }
    // An unknown sort_by is the default order, as the anchor's free-string sort_by (test/http/anchor-behaviours.test.ts).
    const bad = await L.get('/v1/markets?sort_by=cheapest');
    expect(bad.status).toBe(200);
    expect(ids(bad.body)).toEqual(ids((await L.get('/v1/markets')).body));
  });

  it('filters: booleans, category, series, has_data, data_type, end-date window', async () => {
    const check = async (qs: string, pred: (m: M) => boolean): Promise<void> => {
      const r = await L.get(`/v1/markets?${qs}&limit=1000`);
      expect(r.status, qs).toBe(200);
      expect(new Set(ids(r.body)), qs).toEqual(new Set(ids(all.filter(pred)).slice(0, 1000)));
    };
    const n = (x: unknown): number => Number(x ?? 0);
    await check('resolved=true&has_data=true', (m) => m.resolved === true && (n(m.trade_count) > 0 || n(m.orderbook_count) > 0));
    await check('active=True&closed=false&has_data=true', (m) => m.active === true && m.closed === false && (n(m.trade_count) > 0 || n(m.orderbook_count) > 0));
    await check('data_type=trades', (m) => n(m.trade_count) > 0);
    await check('data_type=orderbook', (m) => n(m.orderbook_count) > 0);
    const series = all.find((m) => m.series_id)!.series_id as string;
    await check(`series_id=${encodeURIComponent(series)}`, (m) => m.series_id === series);
    const cat = all.find((m) => m.category)!.category as string;
    await check(
      `category=${encodeURIComponent(cat.toUpperCase())}&has_data=false&data_type=trades`,
      (m) => String(m.category).toLowerCase() === cat.toLowerCase() && n(m.trade_count) > 0,
    );
    const ends = all
      .filter((m) => m.end_us !== null && n(m.trade_count) > 0)
      .map((m) => m.end_us as bigint)
      .sort((a, b) => (a < b ? -1 : 1));
    const a = ends[0]!;
    const b = ends[ends.length - 1]!;
    const iso = (us: bigint): string => new Date(Number(us / 1000n)).toISOString();
    await check(
      `data_type=trades&ending_after=${iso(a)}&ending_before=${iso(b)}`,
      (m) => n(m.trade_count) > 0 && m.end_us !== null && m.end_us >= a && m.end_us <= b,
    );
    const inv = await L.get(`/v1/markets?ending_after=${iso(b)}&ending_before=${iso(a)}`);
    if (a !== b) {
      expect(inv.status).toBe(422);
      expect(inv.body.detail[0].loc).toEqual(['query', 'ending_after']);
    }
    const unknown = await L.get('/v1/markets?series_id=no-such-series');
    expect(unknown.status).toBe(404);
    expect(unknown.body).toEqual({ detail: 'Series not found' });
  });

  it('search is a case-insensitive literal substring; % _ quotes and hostile text are just text', async () => {
    const word = String(busy.question)
      .split(' ')
      .find((w: string) => w.length > 4)!;
    const r = await L.get(`/v1/markets?search=${encodeURIComponent(word.toUpperCase())}&limit=1000`);
    expect(new Set(ids(r.body))).toEqual(new Set(ids(all.filter((m) => String(m.question).toLowerCase().includes(word.toLowerCase())))));
    for (const s of ['%', '_', "';DROP TABLE x;--", '"', "'", '\\', '%_%', 'ünïcødé ✓ 市場', 'a'.repeat(1000)]) {
      const x = await L.get(`/v1/markets?search=${encodeURIComponent(s)}&limit=1000`);
      expect(x.status, s).toBe(200);
      expect(new Set(ids(x.body)), s).toEqual(new Set(ids(all.filter((m) => String(m.question).toLowerCase().includes(s.toLowerCase())))));
    }
    const long = await L.get(`/v1/markets?search=${'x'.repeat(10_000)}`);
    expect(long.status).toBe(422);
    expect(long.body.detail[0].loc).toEqual(['query', 'search']);
    expect(long.body.detail[0].input).toBeUndefined();
  });

  it('validates limit, offset and booleans', async () => {
    for (const [qs, name] of [
      ['limit=0', 'limit'],
      ['limit=1001', 'limit'],
      ['limit=1.5', 'limit'],
      ['offset=-1', 'offset'],
      ['offset=1000001', 'offset'],
      ['active=yes', 'active'],
      ['resolved=2', 'resolved'],
      ['data_type=candles', 'data_type'],
      ['ending_after=2025-99-01', 'ending_after'],
      ['series_id=' + 'x'.repeat(81), 'series_id'],
    ] as const) {
      const r = await L.get(`/v1/markets?${qs}`);
      expect(r.status, qs).toBe(422);
      expect(r.body.detail[0].loc, qs).toEqual(['query', name]);
    }
    expect((await L.get('/v1/markets?limit=1000&offset=1000000')).status).toBe(200);
    expect((await L.get('/v1/markets?limit=1000')).body.length).toBe(Math.min(1000, all.length));
    expect((await L.get('/v1/markets', { key: null })).status).toBe(401);
  });

  it('gets one market by numeric id or by token id; outcome_token_ids parallel to outcomes', async () => {
    const r = await L.get(`/v1/markets/${busy.id}`);
    expect(r.status).toBe(200);
    expect(r.body.id).toBe(String(busy.id));
    expect(r.body.outcome_token_ids).toEqual(busy.outcome_token_ids);
    expect(r.body.outcomes.length).toBe(r.body.outcome_token_ids.length);
    for (const t of busy.outcome_token_ids as string[]) {
      const byToken = await L.get(`/v1/markets/${t}`);
      expect(byToken.body.id).toBe(String(busy.id));
    }
    for (const bad of ['123456789012345', "';DROP TABLE x;--", '%', '_', 'ünï', '9'.repeat(77), 'x'.repeat(200)]) {
      const nf = await L.get(`/v1/markets/${encodeURIComponent(bad)}`);
      expect(nf.status, bad).toBe(404);
      expect(nf.body).toEqual({ detail: 'Market not found' });
    }
    const hex = await L.get(`/v1/markets/0x${'cd'.repeat(32)}`);
    expect(hex.status).toBe(422);
    expect(hex.body.detail[0].msg).toMatch(/numeric market id/);
    expect((await L.get(`/v1/markets/${'x'.repeat(10_000)}`)).status).toBe(422);
  });

  it('every market in the list is well-formed; legacy status derived from the flags', async () => {
    // The rule, restated independently: resolved wins; closed-but-unresolved or not active is paused.
    const want = (m: M): string => (m.resolved ? 'resolved' : m.closed || !m.active ? 'paused' : 'active');
    const byId = new Map(all.map((m) => [String(m.id), m]));
    const seen = new Map<string, number>();
    let n = 0;
    for (let offset = 0; offset < all.length; offset += 1000) {
      const r = await L.get(`/v1/markets?limit=1000&offset=${offset}`);
      expect(r.status).toBe(200);
      for (const m of r.body as M[]) {
        const c = byId.get(m.id)!;
        expect(m.status, m.id).toBe(want(c));
        seen.set(m.status, (seen.get(m.status) ?? 0) + 1);
        expect(typeof m.question, m.id).toBe('string');
        expect(Array.isArray(m.outcomes), m.id).toBe(true);
        for (const o of m.outcomes) expect(typeof o).toBe('string');
        // Typed as the spec types them, never null: a market known without token ids (the catalogue CSV) has [].
        expect(Array.isArray(m.outcome_token_ids), m.id).toBe(true);
        expect(m.outcome_prices.length, m.id).toBe(m.outcomes.length);
        if (m.outcome_token_ids.length > 0) expect(m.outcomes.length, m.id).toBe(m.outcome_token_ids.length);
        n += 1;
      }
    }
    expect(n).toBe(all.length);
    // The lake holds all three kinds, so each value is exercised.
    for (const s of ['active', 'resolved', 'paused']) expect(seen.get(s) ?? 0, s).toBeGreaterThan(0);
    // And on the one-market endpoint, one market of each kind.
    for (const [label, pred] of [
      ['active', (m: M) => m.active && !m.closed && !m.resolved],
      ['resolved', (m: M) => m.resolved],
      ['paused', (m: M) => m.closed && !m.resolved],
      ['paused', (m: M) => !m.active && !m.closed && !m.resolved],
    ] as const) {
      const m = all.find(pred)!;
      const r = await L.get(`/v1/markets/${m.id}`);
      expect(r.body.status, `${label} ${m.id}`).toBe(label);
    }
  });

  it('placeholder markets (seen only on the tape) are well-formed: a question, outcomes parallel to their tokens', async () => {
    const placeholders = all.filter((m) => m.question === null);
    const tokenCount = (m: M): number => ((m.outcome_token_ids as string[] | null) ?? []).length;
    // The ws fixtures leave tape-only markets with two tokens, one token and none (a condition id only).
    for (const k of [0, 1, 2])
      expect(
        placeholders.some((m) => tokenCount(m) === k),
        `${k} tokens`,
      ).toBe(true);
    for (const k of [0, 1, 2]) {
      const m = placeholders.find((x) => tokenCount(x) === k)!;
      const r = await L.get(`/v1/markets/${m.id}`);
      expect(r.status).toBe(200);
      expect(r.body.question).toBe(`Unknown market ${m.condition_id}`);
      expect(r.body.condition_id).toBe(m.condition_id);
      if (k === 0) {
        expect(r.body.outcome_token_ids).toEqual([]);
        expect(r.body.outcomes).toEqual([]);
      } else {
        expect(r.body.outcome_token_ids).toEqual(m.outcome_token_ids);
        expect(r.body.outcomes).toEqual(k === 2 ? ['Yes', 'No'] : ['Outcome 0']);
      }
      // Every seed field with the seed's type, never null where the spec gives one: prices parallel to the
      // outcomes (none published: 0), numbers 0, texts empty, flags booleans; counts and data span the lake's.
      expect(r.body.outcome_prices).toEqual(r.body.outcomes.map(() => 0));
      for (const f of ['volume', 'volume_24h', 'liquidity']) expect(r.body[f], f).toBe(0);
      for (const f of ['event_id', 'description', 'category']) expect(r.body[f], f).toBe('');
      for (const f of ['active', 'closed', 'resolved']) expect(typeof r.body[f], f).toBe('boolean');
      expect(r.body.trade_count).toBe(Number(m.trade_count ?? 0));
      expect(r.body.orderbook_count).toBe(Number(m.orderbook_count ?? 0));
      if (m.data_to_us === null) expect(r.body.data_to).toBeNull();
      else expect(Date.parse(r.body.data_to)).toBe(Number((m.data_to_us as bigint) / 1000n));
      expect(typeof r.body.data_from).toBe(m.data_to_us === null ? 'object' : 'string');
      expect(r.body.winning_outcome).toBeNull();
      expect(r.body.status).toBe('active');
      if (k > 0) {
        // Reachable by its token too.
        const byToken = await L.get(`/v1/markets/${(m.outcome_token_ids as string[])[0]}`);
        expect(byToken.body.id).toBe(String(m.id));
      }
    }
  });

  it('stats: counts, volume, first/last trade and price range per outcome equal the trades', async () => {
    const r = await L.get(`/v1/markets/${busy.id}/stats`);
    expect(r.status).toBe(200);
    const want = await L.rows(
      `SELECT token_id, count(*) AS n, sum(size)::VARCHAR AS vol, min(price)::DOUBLE AS lo, max(price)::DOUBLE AS hi,
              strftime(min(ts), '%Y-%m-%dT%H:%M:%SZ') AS first, strftime(max(ts), '%Y-%m-%dT%H:%M:%SZ') AS last
       FROM read_parquet(${glob(L.lakeDir, 'trades')}) WHERE token_id IN (SELECT unnest(outcome_token_ids) FROM read_parquet(${catalog(L.lakeDir, 'markets')}) WHERE id = '${busy.id}')
       GROUP BY 1`,
    );
    const snaps = await L.rows(`SELECT asset_id, count(*) AS n FROM read_parquet(${glob(L.lakeDir, 'book_snapshots')}) GROUP BY 1`);
    let total = 0;
    for (const o of r.body.outcomes) {
      expect(o.token_id).toBe((busy.outcome_token_ids as string[])[o.outcome]);
      expect(o.outcome_label).toBe((busy.outcomes as string[])[o.outcome]);
      const w = want.find((x) => x.token_id === o.token_id);
      expect(o.trade_count).toBe(Number(w?.n ?? 0));
      total += o.trade_count;
      if (w) {
        expect(o.volume).toBe(Number(w.vol));
        expect(o.min_price).toBe(w.lo);
        expect(o.max_price).toBe(w.hi);
        expect(o.first_trade).toBe(w.first);
        expect(o.last_trade).toBe(w.last);
      }
      expect(o.book_snapshot_count).toBe(Number(snaps.find((s) => s.asset_id === o.token_id)?.n ?? 0));
    }
    expect(r.body.trade_count).toBe(total);
    expect(total).toBe(Number(busy.trade_count));
    expect((await L.get('/v1/markets/31337/stats')).status).toBe(404);
  });

  it('estimate: rows counted in the lake, bytes from Parquet metadata, plan and fair-use share', async () => {
    const tokens = (busy.outcome_token_ids as string[]).map((t) => `'${t}'`).join(',');
    const window = await L.rows(
      `SELECT strftime(min(ts) + INTERVAL 1 HOUR, '%Y-%m-%dT%H:%M:%SZ') AS s, strftime(max(ts) - INTERVAL 1 HOUR, '%Y-%m-%dT%H:%M:%SZ') AS e
       FROM read_parquet(${glob(L.lakeDir, 'trades')}) WHERE token_id IN (${tokens})`,
    );
    const { s, e } = window[0] as { s: string; e: string };
    const n = await L.rows(
      `SELECT count(*) AS n FROM read_parquet(${glob(L.lakeDir, 'trades')}) WHERE token_id IN (${tokens}) AND ts >= TIMESTAMP '${s.replace('Z', '')}' AND ts < TIMESTAMP '${e.replace('Z', '')}'`,
    );
    const meta = await L.rows(`SELECT sum(num_rows) AS rows, list(file_name) AS files FROM parquet_file_metadata(${glob(L.lakeDir, 'trades')})`);
    const bytes = (meta[0]!.files as string[]).reduce((a, f) => a + fs.statSync(f).size, 0);
    const perRow = bytes / Number(meta[0]!.rows);
    const r = await L.get(`/v1/markets/${busy.id}/estimate`, { method: 'POST', body: JSON.stringify({ data_type: 'trades', start: s, end: e }) });
    expect(r.status).toBe(200);
    expect(r.body.estimated_rows).toBe(Number(n[0]!.n));
    expect(r.body.estimated_rows).toBeGreaterThan(0);
    expect(r.body.in_range).toBe(true);
    expect(r.body.estimated_size_bytes).toBe(Math.round(Number(n[0]!.n) * perRow));
    expect(r.body.rate_per_mb).toBe(1);
    expect(r.body.pricing_model).toBe('subscription');
    expect(r.body.included_in_plan).toBe('Professional');
    expect(r.body.fair_use_share).toBeCloseTo(r.body.estimated_size_bytes / (50 * 1024 ** 3), 6);
    expect(r.body.market_id).toBe(String(busy.id));
    expect(typeof r.body.pricing_note).toBe('string');

    const free = await L.get(`/v1/markets/${busy.id}/estimate`, { method: 'POST', body: JSON.stringify({ data_type: 'raw' }), key: L.freeKey });
    expect(free.body.included_in_plan).toBe('Professional');
    expect(free.body.fair_use_share).toBeCloseTo(free.body.estimated_size_bytes / 1024 ** 3, 6);
    expect(free.body.pricing_note).toMatch(/Free plan does not include raw/);
    const freeTrades = await L.get(`/v1/markets/${busy.id}/estimate`, { method: 'POST', body: '{}', key: L.freeKey });
    expect(freeTrades.body.included_in_plan).toBe('Free');

    const ohlcv = await L.get(`/v1/markets/${busy.id}/estimate`, { method: 'POST', body: JSON.stringify({ data_type: 'ohlcv', timeframe: '1h' }) });
    let bars = 0;
    for (const o of [0, 1]) bars += (await L.get(`/v1/trades/ohlcv?market_id=${busy.id}&outcome=${o}&timeframe=1h&limit=10000`)).body.length;
    expect(ohlcv.body.estimated_rows).toBe(bars);
    expect(ohlcv.body.rate_per_mb).toBe(8);

    const book = await L.get(`/v1/markets/${busy.id}/estimate`, { method: 'POST', body: JSON.stringify({ data_type: 'orderbook' }) });
    const snaps = await L.rows(`SELECT count(*) AS n FROM read_parquet(${glob(L.lakeDir, 'book_snapshots')}) WHERE asset_id IN (${tokens})`);
    expect(book.body.estimated_rows).toBe(Number(snaps[0]!.n));

    const empty = await L.get(`/v1/markets/${busy.id}/estimate`, { method: 'POST', body: JSON.stringify({ start: '2001-01-01', end: '2001-02-01' }) });
    expect(empty.body).toMatchObject({ estimated_rows: 0, in_range: false, estimated_size_bytes: 0, data_type: 'trades' });

    for (const [body, loc] of [
      [{ data_type: 'candles' }, ['body', 'data_type']],
      [{ start: '2025-09-16', end: '2025-09-15' }, ['body', 'start']],
      [{ start: 'soon' }, ['body', 'start']],
      [{ data_type: 'ohlcv', timeframe: '3x' }, ['body', 'timeframe']],
    ] as const) {
      const bad = await L.get(`/v1/markets/${busy.id}/estimate`, { method: 'POST', body: JSON.stringify(body) });
      expect(bad.status, JSON.stringify(body)).toBe(422);
      expect(bad.body.detail[0].loc).toEqual(loc);
    }
    expect((await L.get(`/v1/markets/${busy.id}/estimate`, { method: 'POST', body: '{bad json' })).status).toBe(422);
    expect((await L.get('/v1/markets/31337/estimate', { method: 'POST', body: '{}' })).status).toBe(404);
    expect((await L.get(`/v1/markets/${busy.id}/estimate`, { method: 'POST', body: '{}', key: null })).status).toBe(401);
  });

  it('estimate: fair_use_share is of what the caller has left, after usage recorded by the real meter', async () => {
    const GB = 1024 ** 3;
    const key = await createTestKey(L.srv, { email: 'estimator@example.com', plan: 'free', name: 'estimator' });
    const user = (await L.srv.ctx.state.getUserByEmail('estimator@example.com'))!;
    const ask = async (k: string): Promise<M> =>
      (await L.get(`/v1/markets/${busy.id}/estimate`, { method: 'POST', body: JSON.stringify({ data_type: 'orderbook' }), key: k })).body;
    const before = await ask(key);
    expect(before.estimated_size_bytes).toBeGreaterThan(0);
    expect(before.fair_use_share).toBeCloseTo(before.estimated_size_bytes / GB, 6);

    // Three quarters of the Free allowance used, through the meter (as a download would).
    const principal: Principal = { userId: user.id, email: user.email, keyId: null, plan: 'free', scopes: ['read', 'download'] };
    const used = (3 * GB) / 4;
    const t = await L.srv.ctx.meter.begin(principal, { kind: 'download', dataset: 'trades', description: 'test', estimatedBytes: used });
    await t.commit({ bytes: used, rows: 1 });
    const after = await ask(key);
    expect(after.estimated_size_bytes).toBe(before.estimated_size_bytes);
    expect(after.fair_use_share).toBeCloseTo(before.estimated_size_bytes / (GB - used), 6);
    expect(after.fair_use_share).toBeGreaterThan(3.5 * before.fair_use_share);
    // Another user's usage is not the caller's.
    expect((await ask(L.freeKey)).fair_use_share).toBeCloseTo(before.estimated_size_bytes / GB, 6);

    // A professional whose subscription lapsed is on Free: raw needs the subscription again.
    const lapsedKey = await createTestKey(L.srv, { email: 'lapsed@example.com', plan: 'professional', name: 'lapsed' });
    expect((await ask(lapsedKey)).fair_use_share).toBeCloseTo(before.estimated_size_bytes / (50 * GB), 6);
    await expireSubscriptions(L.srv.ctx.state, (await L.srv.ctx.state.getUserByEmail('lapsed@example.com'))!.id);
    expect((await ask(lapsedKey)).fair_use_share).toBeCloseTo(before.estimated_size_bytes / GB, 6);
    const raw = await L.get(`/v1/markets/${busy.id}/estimate`, { method: 'POST', body: JSON.stringify({ data_type: 'raw' }), key: lapsedKey });
    expect(raw.body.included_in_plan).toBe('Professional');
    expect(raw.body.pricing_note).toMatch(/needs an active Professional subscription/);
  });
});
