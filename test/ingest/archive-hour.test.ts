import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { archiveHour } from '../../sim/generate/archive-hour.js';
import { runIngest } from '../../ingest/run.js';
import { lakeRows, tempDir } from './oracle.js';

/**
 * The bench's synthetic archive hour (sim/generate/archive-hour.ts) has the archive's shape — one UTC hour,
 * sorted by market, asset, receive time, nearly all rows price_change — and books and touches that agree with
 * its own level changes, so the integrity layer finds nothing. Expected figures are computed here from the
 * file's rows in plain TypeScript.
 */
const tmp = tempDir('pmlake-archive-hour-');
afterAll(() => tmp.cleanup());

describe('synthetic archive hour', () => {
  it('one sorted hour of mostly price_change rows that ingests with every book and top check passing', async () => {
    const file = path.join(tmp.dir, 'polymarket_orderbook_2026-04-20T14.parquet');
    const n = await archiveHour({ rows: 30_000, seed: 5, hour: '2026-04-20T14' }, file);
    const rows = await lakeRows(
      `SELECT epoch_ms(timestamp_received) AS t, CAST(market AS VARCHAR) AS m, asset_id AS a, event_type AS e, bids, asks
       FROM read_parquet('${file}', file_row_number = true) ORDER BY file_row_number`,
    );
    expect(rows).toHaveLength(n);
    let levels = 0;
    const types = new Map<string, number>();
    for (let i = 0; i < rows.length; i++) {
      const r = rows[i]!;
      const t = Number(r.t);
      expect(t).toBeGreaterThanOrEqual(Date.parse('2026-04-20T14:00:00Z'));
      expect(t).toBeLessThan(Date.parse('2026-04-20T15:01:00Z'));
      const prev = rows[i - 1];
      if (prev) {
        const key = (x: Record<string, unknown>): [string, string, number] => [String(x.m), String(x.a), Number(x.t)];
        const [m0, a0, t0] = key(prev);
        const [m1, a1, t1] = key(r);
        expect(m0 < m1 || (m0 === m1 && (a0 < a1 || (a0 === a1 && t0 <= t1)))).toBe(true);
      }
      types.set(String(r.e), (types.get(String(r.e)) ?? 0) + 1);
      if (r.e === 'price_change') levels += 1;
      if (r.e === 'book') levels += (JSON.parse(String(r.bids)) as unknown[]).length + (JSON.parse(String(r.asks)) as unknown[]).length;
    }
    expect((types.get('price_change') ?? 0) / n).toBeGreaterThan(0.99);
    expect(types.get('book')).toBeGreaterThan(0);
    expect(types.get('last_trade_price')).toBeGreaterThan(0);

    const r = await runIngest([file], { lakeDir: path.join(tmp.dir, 'lake'), derived: false });
    expect(r.failed).toBe(0);
    expect(r.issues).toEqual([]);
    expect(r.counts.level_updates).toBe(levels);
    expect(r.counts.book_checks).toBeGreaterThan(0);
    expect(r.counts.book_mismatches ?? 0).toBe(0);
    expect(r.counts.top_checks).toBeGreaterThan(1000);
    expect(r.counts.top_mismatches ?? 0).toBe(0);
    expect(r.counts.incidents ?? 0).toBe(0);
  });
});
