import fs from 'node:fs';
import path from 'node:path';
import { DuckDBInstance } from '@duckdb/node-api';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runIngest } from '../../ingest/run.js';
import { generate } from '../../sim/generate/index.js';
import { captureRows, writeArchiveFile, type ArchiveRow } from '../../sim/generate/archive.js';
import { archiveHandler } from '../../ingest/archive/index.js';
import { dryRunIngest } from '../../ingest/dry-run.js';
import { currentVersion } from '../../src/lake/versions.js';
import { lakeRows, tempDir } from './oracle.js';

/**
 * Archive files that are damaged, or whose books and best bid/ask disagree with the tape: what lands, what the
 * report says, what the integrity layer flags. Expected counts come from the rows written, in plain TypeScript.
 */
const tmp = tempDir('pmlake-archive-in-');
afterAll(() => tmp.cleanup());
const FIX = path.resolve('test/fixtures/venue/ws/2025-03-02_book_price_change_v1.json');

/** Level updates of the rows as the tape would hold them: a book's levels (one marker row when empty), a price_change row each. */
function levelUpdates(rows: ArchiveRow[]): number {
  let n = 0;
  for (const r of rows) {
    if (r.event_type === 'price_change') n += 1;
    else if (r.event_type === 'book') n += Math.max(1, (JSON.parse(r.bids ?? '[]') as unknown[]).length + (JSON.parse(r.asks ?? '[]') as unknown[]).length);
  }
  return n;
}

async function l2Count(lake: string): Promise<number> {
  const files = currentVersion(lake).files('l2');
  if (files.length === 0) return 0;
  return Number((await lakeRows(`SELECT count(*) AS n FROM read_parquet([${files.map((f) => `'${f}'`).join(',')}])`))[0]!.n);
}

describe('malformed archive input: clear issues, the rest lands', () => {
  const base = [...captureRows([FIX])];
  const expected = levelUpdates(base);

  it('unknown event types, a book whose bids are not JSON, a price_change with a bad side', async () => {
    const m = base[0]!;
    const bad: ArchiveRow[] = [
      ...[1, 2, 3].map((i) => ({ ...m, event_type: 'best_bid_ask', asset_id: m.asset_id, timestamp: m.timestamp + i })),
      { ...m, event_type: 'book', asset_id: '999', bids: '[["0.5", "10"', asks: '[]' },
      { ...m, event_type: 'price_change', asset_id: '998', price: '0.5', size: '1', side: 'HOLD' },
    ];
    const file = path.join(tmp.dir, 'polymarket_orderbook_2025-03-02T09.parquet');
    await writeArchiveFile([...base, ...bad], file);
    const r = await runIngest([file], { lakeDir: path.join(tmp.dir, 'lake-bad-rows'), derived: false });
    expect(r.failed).toBe(0);
    expect(r.ingested).toBe(1);
    const msgs = r.issues.map((i) => i.message);
    expect(msgs).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/^3 row\(s\) of unknown event_type "best_bid_ask", skipped; first at file row \d+$/),
        expect.stringMatching(/^1 book row\(s\) whose bids\/asks are not a JSON list/),
        expect.stringMatching(/^1 price_change row\(s\) with a missing token, bad side/),
      ]),
    );
    expect(r.issues).toHaveLength(3);
    expect(r.counts.level_updates).toBe(expected);
    expect(await l2Count(path.join(tmp.dir, 'lake-bad-rows'))).toBe(expected);
  });

  it('a market id with a byte CAST escapes is no condition id: refused, named as CAST writes it (\\xNN); plain ids of the same file land as they are', async () => {
    const m = base[0]!.market;
    // The file's rows once more under one market id whose last byte is 0xC3 (CAST(text AS BLOB) reads \xC3 so):
    // not UTF-8 on its own, the archive's binary column damaged. The ingest reads it as CAST writes it, and refuses it.
    const odd = `${m.slice(0, -2)}\\xC3`;
    const file = path.join(tmp.dir, 'polymarket_orderbook_2025-03-02T11.parquet');
    const copy = base.map((r) => ({ ...r, market: odd }));
    await writeArchiveFile([...base, ...copy], file);
    const lake = path.join(tmp.dir, 'lake-odd-market');
    const r = await runIngest([file], { lakeDir: lake, derived: false });
    expect(r.failed).toBe(0);
    expect(r.counts.level_updates).toBe(expected);
    expect(r.issues).toHaveLength(1);
    expect(r.issues[0]).toMatchObject({ file, count: copy.length });
    expect(r.issues[0]!.message).toMatch(
      new RegExp(
        `^${copy.length} row\\(s\\) naming a market that is not a condition id \\(0x and 64 hex digits\\) \\(".+", ${odd.length} bytes\\), skipped; first at file row \\d+$`,
      ),
    );
    const files = currentVersion(lake).files('l2');
    const ids = await lakeRows(`SELECT condition_id AS c, count(*) AS n FROM read_parquet([${files.map((f) => `'${f}'`).join(',')}]) GROUP BY ALL`);
    const got = new Map(ids.map((x) => [String(x.c), Number(x.n)]));
    expect([...got.keys()].sort()).toEqual([...new Set(base.map((r) => r.market))].sort());
    expect([...got.values()].reduce((a, b) => a + b, 0)).toBe(expected);
  });

  it('a file without an optional column lands with that column NULL; one without asset_id is not ingested, the other file lands', async () => {
    const noAsk = path.join(tmp.dir, 'no-best-ask', 'polymarket_orderbook_2025-03-02T10.parquet');
    const noAsset = path.join(tmp.dir, 'no-asset', 'polymarket_orderbook_2025-03-02T11.parquet');
    fs.mkdirSync(path.dirname(noAsk), { recursive: true });
    fs.mkdirSync(path.dirname(noAsset), { recursive: true });
    await writeArchiveFile(base, noAsk, { drop: ['best_ask'] });
    await writeArchiveFile(base, noAsset, { drop: ['asset_id'] });
    const lake = path.join(tmp.dir, 'lake-missing');
    const r = await runIngest([noAsk, noAsset], { lakeDir: lake, derived: false });
    expect(r.ingested).toBe(1);
    expect(r.failed).toBe(1);
    expect(r.issues).toEqual([
      { file: noAsk, message: 'archive column(s) best_ask missing: read as NULL' },
      { file: noAsset, message: 'not ingested (archive-parquet): not an archive v2 file: column(s) asset_id missing' },
    ]);
    expect(await l2Count(lake)).toBe(expected);
  });

  it('detection: any Parquet file with the v2 columns, not another Parquet file; survey from the footer', async () => {
    const named = path.join(tmp.dir, 'detect', 'hour.parquet');
    const other = path.join(tmp.dir, 'detect', 'other.parquet');
    fs.mkdirSync(path.dirname(named), { recursive: true });
    const n = await writeArchiveFile(base, named, { rowGroupSize: 100 });
    const db = await DuckDBInstance.create(':memory:');
    const conn = await db.connect();
    try {
      await conn.run(`COPY (SELECT 1 AS timestamp_received, 'x' AS event_type) TO '${other}' (FORMAT parquet)`);
      const s = await archiveHandler.survey!(conn, named);
      const recv = base.map((r) => r.timestamp_received);
      expect(s).toEqual({
        from: new Date(Math.min(...recv)).toISOString(),
        to: new Date(Math.max(...recv)).toISOString(),
        rows: n,
        estimated: false,
      });
      expect(n).toBe(base.length);
    } finally {
      conn.closeSync();
      db.closeSync();
    }
    // pmlake ingest --dry-run tells the archive file's rows and span, exactly.
    const dry = await dryRunIngest([named], { lakeDir: path.join(tmp.dir, 'lake-detect') });
    expect(dry.inputs[0]).toMatchObject({ format: 'archive-parquet', rows: n, estimated: false, would: 'land' });
    const r = await runIngest([named, other], { lakeDir: path.join(tmp.dir, 'lake-detect'), derived: false });
    expect(r.ingested).toBe(1);
    expect(r.issues).toEqual([{ file: other, message: 'format not recognised; file skipped' }]);
  });
});

describe('the integrity layer checks the books and best bid/ask the archive carries', () => {
  let rows: ArchiveRow[] = [];
  beforeAll(async () => {
    const out = path.join(tmp.dir, 'gen');
    await generate({ markets: 3, days: 1, seed: 5, out, start: '2025-09-15', workers: 0 });
    rows = [...captureRows([path.join(out, 'ws', '2025-09-15.jsonl')])];
  });

  it('a corrupted book fails its checkpoint; a corrupted best_bid is a top_mismatch; the clean file has neither', async () => {
    // The third book of the first token, one level's size changed.
    const token = rows.find((r) => r.event_type === 'book')!.asset_id!;
    const bookAt = rows.map((r, i) => [r, i] as const).filter(([r]) => r.event_type === 'book' && r.asset_id === token)[2]![1];
    const book = rows[bookAt]!;
    const bids = JSON.parse(book.bids!) as [string, string][];
    bids[0] = [bids[0]![0], String(Number(bids[0]![1]) + 7)];
    // A price_change entry of another token, alone in its (token, receive ms, venue ms), after that token's first book.
    const groups = new Map<string, number>();
    for (const r of rows)
      if (r.event_type === 'price_change')
        groups.set(`${r.asset_id}|${r.timestamp_received}|${r.timestamp}`, (groups.get(`${r.asset_id}|${r.timestamp_received}|${r.timestamp}`) ?? 0) + 1);
    const firstBook = new Map<string, number>();
    rows.forEach((r, i) => {
      if (r.event_type === 'book' && !firstBook.has(r.asset_id!)) firstBook.set(r.asset_id!, i);
    });
    // Rows are sorted by token: "after the token's first book" is a later row of the same token.
    const pcAt = rows.findIndex(
      (r, i) =>
        r.event_type === 'price_change' &&
        r.asset_id !== token &&
        i > (firstBook.get(r.asset_id!) ?? Infinity) &&
        groups.get(`${r.asset_id}|${r.timestamp_received}|${r.timestamp}`) === 1 &&
        Number(r.best_bid) > 0.1 &&
        Number(r.best_bid) < 0.9,
    );
    expect(pcAt).toBeGreaterThan(0);
    const pc = rows[pcAt]!;
    const corrupted = rows.map((r, i) =>
      i === bookAt ? { ...r, bids: JSON.stringify(bids) } : i === pcAt ? { ...r, best_bid: (Number(r.best_bid) - 0.01).toFixed(2) } : r,
    );

    const clean = path.join(tmp.dir, 'int-clean', 'polymarket_orderbook_2025-09-15T00.parquet');
    const bad = path.join(tmp.dir, 'int-bad', 'polymarket_orderbook_2025-09-15T00.parquet');
    fs.mkdirSync(path.dirname(clean), { recursive: true });
    fs.mkdirSync(path.dirname(bad), { recursive: true });
    await writeArchiveFile(rows, clean);
    await writeArchiveFile(corrupted, bad);
    const rc = await runIngest([clean], { lakeDir: path.join(tmp.dir, 'lake-int-clean'), derived: false });
    expect(rc.counts.book_checks).toBeGreaterThan(10);
    expect(rc.counts.book_mismatches ?? 0).toBe(0);
    expect(rc.counts.top_mismatches ?? 0).toBe(0);

    const lake = path.join(tmp.dir, 'lake-int-bad');
    const r = await runIngest([bad], { lakeDir: lake, derived: false });
    const list = (set: 'checkpoints' | 'incidents'): string =>
      `[${currentVersion(lake)
        .files(set)
        .map((f) => `'${f}'`)
        .join(',')}]`;
    const failed = await lakeRows(
      `SELECT asset_id, epoch_ms(ts)::DOUBLE AS ms, kind FROM read_parquet(${list('checkpoints')}) WHERE NOT ok ORDER BY asset_id, ts`,
    );
    // The corrupted book fails first for its token (later books may fail too: the replay continues from it).
    const ofToken = failed.filter((f) => f.asset_id === token && f.kind === 'book');
    expect(ofToken[0]).toEqual({ asset_id: token, ms: book.timestamp_received, kind: 'book' });
    expect(failed.filter((f) => f.kind === 'book' && f.asset_id !== token)).toEqual([]);
    const tops = await lakeRows(`SELECT asset_id, epoch_ms(from_ts)::DOUBLE AS ms FROM read_parquet(${list('incidents')}) WHERE kind = 'top_mismatch'`);
    expect(tops).toEqual([{ asset_id: pc.asset_id, ms: pc.timestamp_received }]);
    expect(r.counts.top_mismatches).toBe(1);
    expect(r.counts.book_mismatches).toBeGreaterThanOrEqual(1);
  });
});
