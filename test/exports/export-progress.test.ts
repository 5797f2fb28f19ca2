import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ObjectStore } from '../../src/exports/store.js';
import { buildDownloadsLake, parseCsv, type DlLake } from '../helpers/downloads-lake.js';
import { files } from '../helpers/lake-files.js';
import { sqliteOf } from '../helpers/state.js';

/**
 * An export's progress counts the rows of its file: `progress.rows_written` seen while the job still runs
 * (the whole file produced, its upload not yet completed) equals the finished job's `record_count` and the
 * rows of the downloaded file, counted here by parsing it; and both equal the rows the lake holds for the
 * market, counted by DuckDB over the Parquet. The window is held open by letting the store's completion wait
 * for the test (the real local store underneath).
 */
let L: DlLake;
let marketId: string;
let lakeRows: number;

const job = (id: string) =>
  sqliteOf(L.srv.ctx.state).prepare('SELECT status, bytes_written, upload_id FROM export_jobs WHERE id = ?').get(id) as {
    status: string;
    bytes_written: number;
    upload_id: string | null;
  };
const until = async (ok: () => boolean) => {
  while (!ok()) await new Promise((r) => setTimeout(r, 20));
};

/** Parts the local store holds for an upload: the bytes the COPY produced once the upload waits to complete. */
function uploadedBytes(uploadId: string): number {
  const dir = path.join(L.srv.ctx.config.stateDir, 'exports', 'uploads', uploadId);
  return fs
    .readdirSync(dir)
    .filter((f) => /^\d+$/.test(f))
    .reduce((n, f) => n + fs.statSync(path.join(dir, f)).size, 0);
}

/** The rows of a downloaded file, counted by parsing it. */
function rowsOf(format: string, body: string): number {
  if (format === 'json') return (JSON.parse(body) as unknown[]).length;
  return parseCsv(body).length - 1; // the header
}

beforeAll(async () => {
  L = await buildDownloadsLake({ seed: 5, defaultStore: true });
  const m = (
    await L.rows(
      `SELECT m.id, count(*) n FROM read_parquet(${files(L.lakeDir, 'catalog/markets')}) m
       JOIN read_parquet(${files(L.lakeDir, 'trades')}) t ON list_contains(m.outcome_token_ids, t.token_id) GROUP BY ALL ORDER BY n DESC LIMIT 1`,
    )
  )[0]!;
  marketId = String(m.id);
  lakeRows = Number(m.n);
});
afterAll(async () => {
  await L?.close();
});

describe('export progress', () => {
  for (const format of ['json', 'csv'] as const) {
    it(`${format}: rows_written while running = record_count = the file's rows = the lake's rows`, async () => {
      const store = (await L.srv.ctx.exports.store()) as ObjectStore;
      const complete = store.completeUpload.bind(store);
      let reached = false;
      let release!: () => void;
      const gate = new Promise<void>((r) => (release = r));
      store.completeUpload = async (...args) => {
        reached = true;
        await gate;
        return complete(...args);
      };
      try {
        const res = await L.fetch('/v1/exports', {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ kind: 'trades', market_id: marketId, format, idempotency_key: `progress-${format}` }),
        });
        expect(res.status).toBe(202);
        const { id } = (await res.json()) as { id: string };
        await until(() => reached);
        // The whole file is in the store's parts; wait for the progress tick that has counted all of it.
        const uploadId = job(id).upload_id!;
        const total = uploadedBytes(uploadId);
        await until(() => job(id).bytes_written === total);
        const running = (await (await L.fetch(`/v1/exports/${id}`)).json()) as Record<string, any>;
        expect(running.status).toBe('running');
        release();
        await until(() => job(id).status !== 'running');
        const done = (await (await L.fetch(`/v1/exports/${id}`)).json()) as Record<string, any>;
        expect(done.status).toBe('succeeded');
        const link = ((await (await L.fetch(`/v1/exports/${id}/url`)).json()) as { data: { download_url: string } }).data.download_url;
        const body = await (await fetch(link)).text();
        expect(Buffer.byteLength(body)).toBe(total);
        const counted = rowsOf(format, body);
        expect(counted).toBe(lakeRows);
        expect([running.progress.rows_written, done.record_count, done.progress.rows_written]).toEqual([counted, counted, counted]);
      } finally {
        release();
        store.completeUpload = complete;
      }
    });
  }

  it('json: an empty export counts no rows while running either', async () => {
    const store = (await L.srv.ctx.exports.store()) as ObjectStore;
    const complete = store.completeUpload.bind(store);
    let reached = false;
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    store.completeUpload = async (...args) => {
      reached = true;
      await gate;
      return complete(...args);
    };
    try {
      // A window before the lake's first day: no trades.
      const res = await L.fetch('/v1/exports', {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ kind: 'trades', market_id: marketId, format: 'json', start: '2001-01-01T00:00:00Z', end: '2001-01-02T00:00:00Z' }),
      });
      expect(res.status).toBe(202);
      const { id } = (await res.json()) as { id: string };
      await until(() => reached);
      const total = uploadedBytes(job(id).upload_id!);
      await until(() => job(id).bytes_written === total);
      const running = (await (await L.fetch(`/v1/exports/${id}`)).json()) as Record<string, any>;
      release();
      await until(() => job(id).status !== 'running');
      const done = (await (await L.fetch(`/v1/exports/${id}`)).json()) as Record<string, any>;
      const link = ((await (await L.fetch(`/v1/exports/${id}/url`)).json()) as { data: { download_url: string } }).data.download_url;
      expect(rowsOf('json', await (await fetch(link)).text())).toBe(0);
      expect([running.progress.rows_written, done.record_count]).toEqual([0, 0]);
    } finally {
      release();
      store.completeUpload = complete;
    }
  });
});
