import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runIngest, type IngestReport } from '../../ingest/run.js';
import { generate } from '../../sim/generate/index.js';
import { captureRows, writeArchiveFile } from '../../sim/generate/archive.js';
import { d6, framesOf, tempDir, type Msg } from './oracle.js';
import { captureRows as rowsOf } from '../../sim/generate/archive.js';
import { COMPARED, coverageMessages, normalizedRows, rawFrames } from './archive-util.js';

/**
 * The same capture given as websocket frames and as archive rows (written here in the archive's v2 layout
 * with DuckDB, sim/generate/archive.ts) lands the same books, tape, top of book, last trades, checkpoints,
 * incidents and coverage; raw holds the messages rebuilt and marked, carrying the same level updates.
 */
const tmp = tempDir('pmlake-archive-eq-');
afterAll(() => tmp.cleanup());
const FIX = path.resolve('test/fixtures/venue/ws');

type Lakes = { ws: string; ar: string; wsReport: IngestReport; arReport: IngestReport };

async function bothWays(name: string, captures: string[], archives: { name: string; files: string[] }[], market: 'blob' | 'varchar' = 'blob'): Promise<Lakes> {
  const dir = path.join(tmp.dir, name);
  fs.mkdirSync(dir, { recursive: true });
  const paths: string[] = [];
  for (const a of archives) {
    const out = path.join(dir, a.name);
    await writeArchiveFile(captureRows(a.files), out, { market, rowGroupSize: 1000 });
    paths.push(out);
  }
  const ws = path.join(dir, 'lake-ws');
  const ar = path.join(dir, 'lake-ar');
  const wsReport = await runIngest(captures, { lakeDir: ws, derived: false });
  const arReport = await runIngest(paths, { lakeDir: ar, derived: false });
  return { ws, ar, wsReport, arReport };
}

/** Level updates a message carries, as text (token, venue ms, snapshot, side, price, size), independent of the ingest. */
function levels(m: Msg): string[] {
  const key = (asset: unknown, snap: boolean, side: string | null, p: string | null, s: string | null): string =>
    [asset, String(m.timestamp), snap, side, p === null ? '' : d6(p), s === null ? '' : d6(s)].join('|');
  type L = { price: string; size: string; side?: string; asset_id?: string };
  if (m.event_type === 'book') {
    const all = [...((m.bids as L[]) ?? []).map((l) => ['bid', l] as const), ...((m.asks as L[]) ?? []).map((l) => ['ask', l] as const)];
    return all.length === 0 ? [key(m.asset_id, true, null, null, null)] : all.map(([side, l]) => key(m.asset_id, true, side, l.price, l.size));
  }
  if (m.event_type === 'price_change') {
    const side = (s?: string): string => (s === 'BUY' ? 'bid' : 'ask');
    if (Array.isArray(m.price_changes)) return (m.price_changes as L[]).map((c) => key(c.asset_id, false, side(c.side), c.price, c.size));
    return ((m.changes as L[]) ?? []).map((c) => key(m.asset_id, false, side(c.side), c.price, c.size));
  }
  return [];
}

async function expectSameLakes(l: Lakes, captures: string[]): Promise<void> {
  expect(l.arReport.failed).toBe(0);
  expect(l.arReport.issues).toEqual([]);
  expect(l.arReport.counts.level_updates).toBe(l.wsReport.counts.level_updates);
  for (const set of COMPARED) {
    const [a, b] = [await normalizedRows(l.ws, set), await normalizedRows(l.ar, set)];
    expect({ set, rows: b.length }).toEqual({ set, rows: a.length });
    const i = a.findIndex((r, j) => r !== b[j]);
    expect({ set, at: i, row: b[i] }).toEqual({ set, at: -1, row: undefined });
  }
  // raw: every frame rebuilt and marked; flattened, the same level updates as the capture's messages.
  const frames = await rawFrames(l.ar);
  expect(frames.length).toBeGreaterThan(0);
  for (const f of frames) expect(f).toMatch(/"hash":"pmlake-rebuilt:\d+"/);
  const rebuilt = frames.flatMap((f) => levels(JSON.parse(f) as Msg)).sort();
  const captured = captures.flatMap((c) => framesOf(c).flat().flatMap(levels)).sort();
  expect(rebuilt).toEqual(captured);
  // coverage.messages: price_change messages of one market with the same receive and venue ms may merge into one.
  const [wsMsgs, arMsgs] = [await coverageMessages(l.ws), await coverageMessages(l.ar)];
  const mergeable = new Map<string, number>();
  const seen = new Set<string>();
  for (const r of rowsOf(captures)) {
    if (r.event_type !== 'price_change') continue;
    const day = new Date(r.timestamp_received).toISOString().slice(0, 10);
    const key = `${r.asset_id}|${day}`;
    const g = `${key}|${r.timestamp_received}|${r.timestamp}`;
    if (seen.has(g)) mergeable.set(key, (mergeable.get(key) ?? 0) + 1);
    seen.add(g);
  }
  expect([...arMsgs.keys()].sort()).toEqual([...wsMsgs.keys()].sort());
  for (const [key, n] of wsMsgs) {
    expect(arMsgs.get(key)).toBeLessThanOrEqual(n);
    expect(arMsgs.get(key)).toBeGreaterThanOrEqual(n - (mergeable.get(key) ?? 0));
  }
}

describe('archive rows and websocket frames of one capture land the same lake', () => {
  const fixtures = fs
    .readdirSync(FIX)
    .filter((f) => /\.jsonl?$/.test(f))
    .map((f) => path.join(FIX, f));
  for (const file of fixtures) {
    it(`fixture ${path.basename(file)}`, async () => {
      const l = await bothWays(path.basename(file), [file], [{ name: 'polymarket_orderbook_2026-04-17T12.parquet', files: [file] }]);
      await expectSameLakes(l, [file]);
    });
  }

  describe('generated tape (both price_change shapes, trades, books after trades)', () => {
    let wsFiles: string[] = [];
    beforeAll(async () => {
      const out = path.join(tmp.dir, 'gen');
      await generate({ markets: 4, days: 2, seed: 11, out, start: '2025-09-14', workers: 0 });
      wsFiles = fs
        .readdirSync(path.join(out, 'ws'))
        .sort()
        .map((f) => path.join(out, 'ws', f));
    });
    it('one archive file per day (market as text), checkpoints all pass', async () => {
      const archives = wsFiles.map((f) => ({ name: `polymarket_orderbook_${path.basename(f, '.jsonl')}T00.parquet`, files: [f] }));
      const l = await bothWays('gen', wsFiles, archives, 'varchar');
      await expectSameLakes(l, wsFiles);
      expect(l.arReport.counts.book_checks).toBeGreaterThan(100);
      expect(l.arReport.counts.book_mismatches ?? 0).toBe(0);
      expect(l.arReport.counts.top_checks).toBeGreaterThan(100);
      expect(l.arReport.counts.top_mismatches ?? 0).toBe(0);
    });
    it('staged in pieces of a few markets: the same lake', async () => {
      process.env.PMLAKE_ARCHIVE_PIECE_ROWS = '800';
      try {
        const archives = wsFiles.map((f) => ({ name: `polymarket_orderbook_${path.basename(f, '.jsonl')}T00.parquet`, files: [f] }));
        const l = await bothWays('gen-pieces', wsFiles, archives, 'blob');
        expect(l.arReport.counts.archive_pieces).toBeGreaterThan(2);
        await expectSameLakes(l, wsFiles);
      } finally {
        delete process.env.PMLAKE_ARCHIVE_PIECE_ROWS;
      }
    });
  });
});
