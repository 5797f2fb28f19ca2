import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildDownloadsLake, type DlLake } from '../helpers/downloads-lake.js';
import { files } from '../helpers/lake-files.js';
import { sqliteOf } from '../helpers/state.js';

/**
 * Export jobs and their stored spec, through the real server and the default store: a new job stores the
 * versioned spec with exact microseconds and shows the public shape as before; a row in the pre-version shape
 * (as existing state databases hold) still runs; a spec that no longer parses fails the job loudly.
 */
let L: DlLake;
let marketId: string;

const post = (body: unknown) => L.fetch('/v1/exports', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
const row = (id: string) =>
  sqliteOf(L.srv.ctx.state).prepare('SELECT status, spec, error, record_count FROM export_jobs WHERE id = ?').get(id) as {
    status: string;
    spec: string;
    error: string | null;
    record_count: number | null;
  };

async function poll(id: string): Promise<Record<string, any>> {
  while (['queued', 'running'].includes(row(id).status)) await new Promise((r) => setTimeout(r, 50));
  const res = await L.fetch(`/v1/exports/${id}`);
  expect(res.status).toBe(200);
  return (await res.json()) as Record<string, any>;
}

/** Submits with this process's export worker paused, lets `edit` change the stored row, then lets the job run. */
async function submitEdited(body: unknown, edit: (id: string) => void): Promise<Record<string, any>> {
  L.srv.ctx.exports.pause();
  try {
    const res = await post(body);
    expect(res.status).toBe(202);
    const job = (await res.json()) as { id: string; status: string };
    expect(job.status).toBe('queued');
    edit(job.id);
    return job;
  } finally {
    L.srv.ctx.exports.resume();
  }
}

beforeAll(async () => {
  L = await buildDownloadsLake({ seed: 9, defaultStore: true });
  const m = (
    await L.rows(
      `SELECT m.id, count(*) n FROM read_parquet(${files(L.lakeDir, 'catalog/markets')}) m
     JOIN read_parquet(${files(L.lakeDir, 'trades')}) t ON list_contains(m.outcome_token_ids, t.token_id) GROUP BY ALL ORDER BY n DESC LIMIT 1`,
    )
  )[0]!;
  marketId = String(m.id);
});
afterAll(async () => {
  await L?.close();
});

describe('export jobs: the stored spec', () => {
  it('a new job stores the versioned spec (exact microseconds, timeframe label) and shows the public shape as before', async () => {
    const res = await post({
      kind: 'ohlcv',
      market_id: marketId,
      timeframe: '420s',
      start: '2020-01-01T00:00:00.123456Z',
      end: '2030-01-01T00:00:00.000001Z',
      format: 'csv',
    });
    expect(res.status).toBe(202);
    const text = await res.text();
    const job = JSON.parse(text) as { id: string };
    expect(text).toContain(
      `"spec":{"kind":"ohlcv","market_id":"${marketId}","timeframe":"7m","start":"2020-01-01T00:00:00.123Z","end":"2030-01-01T00:00:00.000Z","format":"csv"}`,
    );
    expect(row(job.id).spec).toBe(
      `{"v":1,"kind":"ohlcv","market_id":"${marketId}","timeframe":"7m","start_us":"1577836800123456","end_us":"1893456000000001","format":"csv","limit":null}`,
    );
    const done = await poll(job.id);
    expect(done.status).toBe('succeeded');
    expect(done.record_count).toBeGreaterThan(0);
    expect(JSON.stringify(done.spec)).toBe(
      `{"kind":"ohlcv","market_id":"${marketId}","timeframe":"7m","start":"2020-01-01T00:00:00.123Z","end":"2030-01-01T00:00:00.000Z","format":"csv"}`,
    );
  });

  it('a job stored in the pre-version shape runs and shows its spec exactly as stored', async () => {
    const legacy = `{"kind":"trades","market_id":"${marketId}","start":"2020-01-01T00:00:00.000Z","format":"csv"}`;
    const job = await submitEdited({ kind: 'trades', market_id: marketId, format: 'csv', idempotency_key: 'legacy' }, (id) => {
      sqliteOf(L.srv.ctx.state).prepare('UPDATE export_jobs SET spec = ? WHERE id = ?').run(legacy, id);
    });
    const done = await poll(job.id);
    expect(done.status).toBe('succeeded');
    expect(done.error).toBeNull();
    const trades = (
      await L.rows(`SELECT count(*)::INT AS n FROM read_parquet(${files(L.lakeDir, 'trades')}) t, read_parquet(${files(L.lakeDir, 'catalog/markets')}) m
      WHERE m.id = ${Number(marketId)} AND list_contains(m.outcome_token_ids, t.token_id)`)
    )[0]!.n;
    expect(done.record_count).toBe(trades);
    expect(JSON.stringify(done.spec)).toBe(legacy);
  });

  it('a stored spec that does not parse fails the job with an error saying so; nothing is charged', async () => {
    const charged = () => (sqliteOf(L.srv.ctx.state).prepare(`SELECT count(*) AS n FROM pulls WHERE kind = 'export'`).get() as { n: number }).n;
    const before = charged();
    const cases: [string, string][] = [
      [
        `{"v":1,"kind":"ohlcv","market_id":"${marketId}","timeframe":"7x","format":"csv","limit":null}`,
        'export failed: its stored spec does not parse (timeframe: timeframe must be a positive whole number followed by s, m, h, d or w (e.g. 30s, 1m, 7m, 4h, 1d, 1w)); nothing was charged',
      ],
      [
        `{"kind":"trades","market_id":"${marketId}","start":"last tuesday","format":"csv"}`,
        'export failed: its stored spec does not parse (start: expected an ISO timestamp); nothing was charged',
      ],
      ['{"v":3}', 'export failed: its stored spec does not parse (version 3; this pmlake reads version 1); nothing was charged'],
      ['not json', 'export failed: its stored spec does not parse (not JSON); nothing was charged'],
    ];
    for (const [i, [stored, error]] of cases.entries()) {
      const job = await submitEdited({ kind: 'trades', market_id: marketId, idempotency_key: `corrupt-${i}` }, (id) => {
        sqliteOf(L.srv.ctx.state).prepare('UPDATE export_jobs SET spec = ? WHERE id = ?').run(stored, id);
      });
      const done = await poll(job.id);
      expect(done.status, stored).toBe('failed');
      expect(done.error, stored).toBe(error);
      // The view still answers (the spec as stored when it is JSON at all), and there is no link.
      expect(done.spec).toEqual(stored === 'not json' ? null : JSON.parse(stored));
      expect((await L.fetch(`/v1/exports/${job.id}/url`)).status).toBe(409);
    }
    expect(charged()).toBe(before);
  });
});
