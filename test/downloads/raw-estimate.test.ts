import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildDownloadsLake, type DlLake } from '../helpers/downloads-lake.js';
import { glob } from '../helpers/query-lake.js';

/**
 * /v1/download/raw/estimate takes the download's selectors (market_id, shape, window, limit) and counts what that
 * download would send: each estimate here is followed by the download itself, and its rows are the records the
 * file holds, for one market and for the whole venue; one count is also made here from the Parquet files.
 */
describe('GET /v1/download/raw/estimate sizes the download it names', () => {
  let L: DlLake;
  let market: { id: string; condition_id: string };
  let span: { first: number; last: number };

  beforeAll(async () => {
    L = await buildDownloadsLake({ markets: 3, days: 2, defaultStore: true });
    // The market with the most order-book frames; the venue has others, so its rows are a strict part of the tape's.
    const busiest = await L.rows(
      `SELECT c AS condition_id, count(*) AS n, epoch_ms(min(recv_ts)) AS f, epoch_ms(max(recv_ts)) AS l
       FROM (SELECT unnest(condition_ids) AS c, recv_ts FROM read_parquet(${glob(L.lakeDir, 'raw')}) WHERE list_contains(event_types, 'price_change'))
       GROUP BY 1 ORDER BY n DESC, c LIMIT 1`,
    );
    const cond = String(busiest[0]!.condition_id);
    const m = await L.rows(`SELECT id FROM read_parquet(${glob(L.lakeDir, 'catalog/markets')}) WHERE condition_id = '${cond}'`);
    market = { id: String(m[0]!.id), condition_id: cond };
    span = { first: Number(busiest[0]!.f), last: Number(busiest[0]!.l) };
  }, 180_000);
  afterAll(async () => {
    await L?.close();
  });

  /** The estimate of a query string, then the download of the same query string: its rows and the file's. */
  async function both(qs: string): Promise<{ estimate: Record<string, any>; records: number }> {
    const e = await L.fetch(`/v1/download/raw/estimate?${qs}`);
    expect(e.status, qs).toBe(200);
    const estimate = (await e.json()) as Record<string, any>;
    const d = await L.fetch(`/v1/download/raw?${qs}&format=json`);
    expect(d.status, qs).toBe(200);
    const records = (JSON.parse(await d.text()) as unknown[]).length;
    return { estimate, records };
  }

  it("one market's frames and flat rows: the estimate's rows are the download's", async () => {
    const raw = await both(`data_type=polymarket_l2_deltas&market_id=${market.id}`);
    expect(raw.records).toBeGreaterThan(10);
    expect(raw.estimate.estimated_rows).toBe(raw.records);
    const independent = await L.rows(
      `SELECT count(*) AS n FROM read_parquet(${glob(L.lakeDir, 'raw')})
       WHERE list_contains(condition_ids, '${market.condition_id}') AND list_has_any(event_types, ['book', 'price_change', 'tick_size_change'])`,
    );
    expect(raw.estimate.estimated_rows).toBe(Number(independent[0]!.n));
    expect(raw.estimate.estimated_size_bytes).toBeGreaterThan(0);
    const flat = await both(`data_type=polymarket_l2_deltas&market_id=${market.id}&shape=normalized`);
    expect(flat.records).toBeGreaterThan(raw.records);
    expect(flat.estimate.estimated_rows).toBe(flat.records);
    // A window inside the market's tape.
    const lo = new Date(span.first + (span.last - span.first) / 3).toISOString();
    const hi = new Date(span.first + ((span.last - span.first) * 2) / 3).toISOString();
    const win = await both(`data_type=polymarket_l2_deltas&market_id=${market.id}&start=${lo}&end=${hi}`);
    expect(win.records).toBeGreaterThan(0);
    expect(win.records).toBeLessThan(raw.records);
    expect(win.estimate.estimated_rows).toBe(win.records);
    // The row cap, as the download applies it.
    const capped = await both(`data_type=polymarket_l2_deltas&market_id=${market.id}&limit=3`);
    expect([capped.estimate.estimated_rows, capped.records, capped.estimate.capped_by_limit]).toEqual([3, 3, true]);
  });

  it("the whole venue's tape: the estimate's rows are the download's, and more than one market's", async () => {
    const venue = await both('data_type=polymarket_l2_deltas&limit=2000000');
    const one = (await (await L.fetch(`/v1/download/raw/estimate?data_type=polymarket_l2_deltas&market_id=${market.id}`)).json()) as { estimated_rows: number };
    expect(venue.estimate.estimated_rows).toBe(venue.records);
    expect(venue.records).toBeGreaterThan(one.estimated_rows);
    const trades = await both('data_type=polymarket_trades&shape=normalized&limit=2000000');
    expect(trades.records).toBeGreaterThan(0);
    expect(trades.estimate.estimated_rows).toBe(trades.records);
  });

  it('refuses what the download refuses: an unknown market (404), a shape the data set lacks (400), a bad window (422)', async () => {
    const unknown = await L.fetch('/v1/download/raw/estimate?data_type=polymarket_l2_deltas&market_id=999999999');
    expect(unknown.status).toBe(404);
    const shape = await L.fetch('/v1/download/raw/estimate?data_type=polymarket_bbo&shape=normalized');
    expect(shape.status).toBe(400);
    expect(((await shape.json()) as { detail: { code: string } }).detail.code).toBe('normalized_unavailable');
    const win = await L.fetch('/v1/download/raw/estimate?data_type=polymarket_l2_deltas&start=2025-03-02&end=2025-03-01');
    expect(win.status).toBe(422);
  });
});
