import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { runIngest } from '../../ingest/run.js';
import { LakeLockedError, readLedger } from '../../ingest/ledger.js';
import { listing, runCli } from './lakeutil.js';
import { lakeRows, tempDir } from './oracle.js';

const FIX = path.resolve('test/fixtures/venue');
const tmp = tempDir('pmlake-idem-');
afterAll(() => tmp.cleanup());

describe('re-ingest changes nothing', () => {
  it('the same inputs again: every file skipped by the ledger, zero rows, no file rewritten', async () => {
    const lake = path.join(tmp.dir, 'lake');
    const env = { PMLAKE_LAKE: lake };
    const inputs = [path.join(FIX, 'ws'), path.join(FIX, 'rest')];
    const first = await runCli(['ingest', ...inputs], env);
    expect(first.code, first.stderr).toBe(0);
    const r1 = JSON.parse(first.stdout) as { ingested: number; rows_added: Record<string, number> };
    expect(r1.ingested).toBe(12);
    expect(r1.rows_added.l2).toBeGreaterThan(8000);
    const before = listing(lake);

    const second = await runCli(['ingest', ...inputs], env);
    expect(second.code, second.stderr).toBe(0);
    const r2 = JSON.parse(second.stdout) as { ingested: number; skipped: number; rows_added: Record<string, number> };
    expect(r2.ingested).toBe(0);
    expect(r2.skipped).toBe(12);
    expect(r2.rows_added).toEqual({});
    expect(listing(lake)).toEqual(before);
  });

  it('the same tape under another content hash: natural keys de-duplicate, derived rows come out identical', async () => {
    const lake = path.join(tmp.dir, 'lake2');
    const env = { PMLAKE_LAKE: lake };
    const src = path.join(FIX, 'ws', '2025-03-02_book_price_change_v1.json');
    const copy = path.join(tmp.dir, 'copy', 'same_tape_reformatted.json');
    fs.mkdirSync(path.dirname(copy));
    // Same frames, different bytes (compact JSON): a new ledger key, the same facts.
    fs.writeFileSync(copy, JSON.stringify(JSON.parse(fs.readFileSync(src, 'utf8'))));
    const first = await runCli(['ingest', src], env);
    expect(first.code, first.stderr).toBe(0);
    const before = listing(lake);
    const second = await runCli(['ingest', copy], env);
    expect(second.code, second.stderr).toBe(0);
    const r2 = JSON.parse(second.stdout) as { ingested: number; rows_added: Record<string, number> };
    expect(r2.ingested).toBe(1);
    // raw keeps frames byte for byte, so re-formatted frames are new raw rows, and rows of raw's market index (one
    // per frame and distinct market it names); everything else is unchanged.
    const { raw, raw_by_market: byMarket, ...rest } = r2.rows_added;
    expect(raw).toBe(42);
    for (const [ds, n] of Object.entries(rest)) expect(n, ds).toBe(0);
    const after = listing(lake);
    // The new raw rows are a new lake version (its manifest), in a new raw file; every other file is untouched.
    for (const [f, v] of Object.entries(before)) {
      if (f.startsWith('raw/') || f.startsWith('_ingest/') || f.startsWith('catalog/') || f.startsWith('_versions/')) continue;
      expect(after[f], f).toBe(v);
    }
    const added = Object.keys(after).filter((f) => !(f in before) && f.endsWith('.parquet'));
    expect(added.filter((f) => !f.startsWith('catalog/')).every((f) => f.startsWith('raw/') || f.startsWith('raw_by_market/'))).toBe(true);
    const newRaw = added.filter((f) => f.startsWith('raw/')).map((f) => `'${path.join(lake, f)}'`);
    expect(newRaw).toHaveLength(1);
    const frames = await lakeRows(`SELECT condition_ids FROM read_parquet([${newRaw.join(', ')}])`);
    const markets = frames.reduce((n, r) => n + new Set(((r.condition_ids as (string | null)[] | null) ?? []).filter((c) => c !== null)).size, 0);
    expect(markets).toBeGreaterThan(raw!);
    expect(byMarket).toBe(markets);
  });

  it('a file staged before its hash is known: a same-bytes copy under another name is still skipped, the ledger holds the true hashes', async () => {
    const lake = path.join(tmp.dir, 'lake4');
    const dir = path.join(tmp.dir, 'copies');
    fs.mkdirSync(dir);
    const a = path.join(dir, 'a_book.json');
    const b = path.join(dir, 'b_same_bytes.json');
    const c = path.join(dir, 'c_other.json');
    fs.copyFileSync(path.join(FIX, 'ws', '2025-01-21_book.json'), a);
    fs.copyFileSync(a, b);
    fs.copyFileSync(path.join(FIX, 'ws', '2025-03-02_book_price_change_v1.json'), c);
    const r = await runIngest([a, b, c], { lakeDir: lake, derived: false });
    expect(r.ingested).toBe(2);
    expect(r.skipped).toBe(1);
    const sha = (f: string) => createHash('sha256').update(fs.readFileSync(f)).digest('hex');
    const ledger = readLedger(lake);
    expect(new Set(ledger.keys())).toEqual(new Set([sha(a), sha(c)]));
    expect(ledger.get(sha(a))!.file).toBe(a);
    // Again: every file is of a size the ledger holds, so each waits for its hash and is skipped.
    const again = await runIngest([a, b, c], { lakeDir: lake, derived: false });
    expect(again.ingested).toBe(0);
    expect(again.skipped).toBe(3);
  });

  it('exit code 1 when nothing could be read at all, with the reason on stdout', async () => {
    const bad = path.join(tmp.dir, 'bad', 'x.json');
    fs.mkdirSync(path.dirname(bad));
    fs.writeFileSync(bad, '{"event_type": "book", "asset_id": ');
    const r = await runCli(['ingest', bad], { PMLAKE_LAKE: path.join(tmp.dir, 'lake3') });
    expect(r.code).toBe(1);
    const rep = JSON.parse(r.stdout) as { failed: number; issues: { file: string; message: string }[] };
    expect(rep.failed).toBe(1);
    expect(rep.issues[0]!.file).toBe(bad);
  });

  it('a lake held by a running ingest is refused, and left as it was', async () => {
    const lake = path.join(tmp.dir, 'locked');
    fs.mkdirSync(path.join(lake, '_ingest'), { recursive: true });
    // This test process is alive: its pid in the lock file stands for another ingest still running.
    fs.writeFileSync(path.join(lake, '_ingest', 'lock'), `${process.pid}\n`);
    await expect(runIngest([path.join(FIX, 'ws', '2025-01-21_book.json')], { lakeDir: lake, derived: false })).rejects.toBeInstanceOf(LakeLockedError);
    expect(Object.keys(listing(lake))).toEqual(['_ingest/lock']);
  });
});
