import path from 'node:path';
import { DuckDBInstance } from '@duckdb/node-api';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mergeIntoPartitions } from '../../ingest/partitions.js';
import { VersionDraft } from '../../ingest/versions.js';
import { columnDdl } from '../../src/lake/layout.js';
import { PLANS } from '../../src/accounts/plans.js';
import type { RunningServer } from '../../src/server.js';
import { createTestKey, startTestServer, tempDir, testConfig } from '../helpers/server.js';

/**
 * The Free plan sees top of book only `top_of_book_delay_minutes` (15) behind now; Professional sees it all.
 * A tiny lake whose top_of_book rows sit around now − 15 min, written the way ingest writes files
 * (staging table with the data set's exact columns → mergeIntoPartitions). Rows are a minute or more away
 * from the boundary, so the few seconds the test takes cannot move one across it.
 */
const MARKET_ID = '4242';
const CONDITION = `0x${'ab'.repeat(32)}`;
const TOKEN_YES = '1'.repeat(77);
const TOKEN_NO = '2'.repeat(77);
/** Minutes before now of each row of the YES token; the NO token gets one fresh row. */
const AGES = [1, 5, 14, 16, 20, 90];
const DELAY = PLANS.free.top_of_book_delay_minutes;

describe('top of book: Free is delayed by the plan, Professional is not', () => {
  const tmp = tempDir('pmlake-tob-');
  const lakeDir = path.join(tmp.dir, 'lake');
  let srv: RunningServer;
  let pro: string;
  let free: string;
  const nowMs = Date.now();
  /** seq of each YES row, by age in minutes. */
  const seqOf = new Map<number, string>();

  beforeAll(async () => {
    const db = await DuckDBInstance.create(':memory:', { threads: '2' });
    const conn = await db.connect();
    await conn.run(`SET TimeZone = 'UTC'`);
    // Everything lands in one lake version, as an ingest batch would land it.
    const draft = new VersionDraft(lakeDir);
    await conn.run(`CREATE TEMP TABLE stg_markets (${columnDdl('markets')})`);
    await conn.run(
      `INSERT INTO stg_markets BY NAME SELECT $id AS id, false AS id_derived, $cid AS condition_id, 'Will the delay hold?' AS question,
         ['Yes', 'No'] AS outcomes, [$yes, $no] AS outcome_token_ids, true AS active, false AS closed, false AS resolved, 0::BIGINT AS trade_count,
         0::BIGINT AS orderbook_count`,
      { id: MARKET_ID, cid: CONDITION, yes: TOKEN_YES, no: TOKEN_NO },
    );
    await mergeIntoPartitions(conn, draft, 'markets', 'stg_markets');
    await conn.run(`CREATE TEMP TABLE stg_tokens (${columnDdl('tokens')})`);
    await conn.run(`INSERT INTO stg_tokens VALUES ($yes, $id, $cid, 0, 'Yes'), ($no, $id, $cid, 1, 'No')`, {
      yes: TOKEN_YES,
      no: TOKEN_NO,
      id: MARKET_ID,
      cid: CONDITION,
    });
    await mergeIntoPartitions(conn, draft, 'tokens', 'stg_tokens');

    await conn.run(`CREATE TEMP TABLE stg_tob (${columnDdl('top_of_book')})`);
    const rows: [string, number][] = [...AGES.map((a) => [TOKEN_YES, a] as [string, number]), [TOKEN_NO, 2]];
    for (const [i, [token, age]] of rows.entries()) {
      const ms = nowMs - age * 60_000;
      // seq: receive ms × 1e6 + rank, as ingest numbers the tape.
      const seq = (BigInt(ms) * 1_000_000n + BigInt(i)).toString();
      if (token === TOKEN_YES) seqOf.set(age, seq);
      await conn.run(`INSERT INTO stg_tob VALUES (make_timestamp($us::BIGINT), $cid, $token, $seq::BIGINT, 0.41, 100, 0.43, 120, 0.42, 0.02, true)`, {
        us: BigInt(ms) * 1000n,
        cid: CONDITION,
        token,
        seq,
      });
    }
    await mergeIntoPartitions(conn, draft, 'top_of_book', 'stg_tob');

    // Two stored books of the YES token: 30 minutes old (best bid 0.30) and 5 minutes old (best bid 0.55).
    await conn.run(`CREATE TEMP TABLE stg_books (${columnDdl('book_snapshots')})`);
    for (const [age, bid] of [
      [30, '0.30'],
      [5, '0.55'],
    ] as const) {
      const ms = nowMs - age * 60_000;
      await conn.run(
        `INSERT INTO stg_books VALUES (make_timestamp($us::BIGINT), $cid, $token, 'book', $seq::BIGINT, $bid::DECIMAL(10,6), 0.6,
           1, 1, [{'price': $bid::DECIMAL(10,6), 'size': 10::DECIMAL(18,6)}], [{'price': 0.6::DECIMAL(10,6), 'size': 10::DECIMAL(18,6)}], true)`,
        { us: BigInt(ms) * 1000n, cid: CONDITION, token: TOKEN_YES, seq: (BigInt(ms) * 1_000_000n).toString(), bid },
      );
    }
    await mergeIntoPartitions(conn, draft, 'book_snapshots', 'stg_books');
    draft.publish('ingest', {}, []);
    conn.closeSync();
    db.closeSync();

    srv = await startTestServer(testConfig({ PMLAKE_LAKE: lakeDir, PMLAKE_STATE: path.join(tmp.dir, 'state') }));
    pro = await createTestKey(srv, { email: 'pro@example.com', plan: 'professional' });
    free = await createTestKey(srv, { email: 'free@example.com', plan: 'free' });
  });
  afterAll(async () => {
    await srv?.close();
    tmp.cleanup();
  });

  const get = async (p: string, key: string): Promise<{ status: number; body: any; text: string }> => {
    const res = await fetch(`${srv.url}${p}`, { headers: { 'x-api-key': key } });
    const text = await res.text();
    let body: unknown = text;
    try {
      body = JSON.parse(text);
    } catch {
      /* CSV */
    }
    return { status: res.status, body, text };
  };
  const seqs = (body: { seq: string }[]): string[] => body.map((r) => r.seq);
  /** The YES rows older than `minutes`, oldest first (independent of the service: ages are ours). */
  const olderThan = (minutes: number): string[] =>
    AGES.filter((a) => a > minutes)
      .sort((a, b) => b - a)
      .map((a) => seqOf.get(a)!);

  it('the delay is 15 minutes on Free and none on Professional', () => {
    expect(DELAY).toBe(15);
    expect(PLANS.professional.top_of_book_delay_minutes).toBe(0);
  });

  it('GET /v1/orderbook/top_of_book: Free sees nothing newer than now − 15 min; Professional sees every row', async () => {
    const p = await get(`/v1/orderbook/top_of_book?market_id=${MARKET_ID}`, pro);
    expect(p.status).toBe(200);
    expect(seqs(p.body)).toEqual(olderThan(0));
    const f = await get(`/v1/orderbook/top_of_book?market_id=${MARKET_ID}`, free);
    expect(f.status).toBe(200);
    expect(seqs(f.body)).toEqual(olderThan(DELAY));
    expect(f.body.length).toBe(3);
    for (const r of f.body) expect(Date.parse(r.timestamp)).toBeLessThan(nowMs - DELAY * 60_000);

    // An explicit end in the future, or a window entirely inside the last 15 minutes, does not lift the delay.
    const future = new Date(nowMs + 3_600_000).toISOString();
    const recent = new Date(nowMs - 10 * 60_000).toISOString();
    expect(seqs((await get(`/v1/orderbook/top_of_book?market_id=${MARKET_ID}&end=${future}`, free)).body)).toEqual(olderThan(DELAY));
    const inside = await get(`/v1/orderbook/top_of_book?market_id=${MARKET_ID}&start=${recent}`, free);
    expect(inside.status).toBe(200);
    expect(inside.body).toEqual([]);
    expect(seqs((await get(`/v1/orderbook/top_of_book?market_id=${MARKET_ID}&start=${recent}`, pro)).body)).toEqual(
      AGES.filter((a) => a < 10)
        .sort((a, b) => b - a)
        .map((a) => seqOf.get(a)!),
    );
    // Also when the market is named by a token id, and for the other outcome.
    expect(seqs((await get(`/v1/orderbook/top_of_book?market_id=${TOKEN_YES}`, free)).body)).toEqual(olderThan(DELAY));
    expect((await get(`/v1/orderbook/top_of_book?market_id=${MARKET_ID}&outcome=1`, free)).body).toEqual([]);
    expect((await get(`/v1/orderbook/top_of_book?market_id=${MARKET_ID}&outcome=1`, pro)).body).toHaveLength(1);
  });

  it('GET /v1/download/top_of_book: the same delay on the file', async () => {
    const start = new Date(nowMs - 3 * 3_600_000).toISOString();
    const end = new Date(nowMs + 3_600_000).toISOString();
    const csvSeqs = (text: string): string[] => {
      const [head, ...lines] = text.trim().split('\n');
      const col = head!.split(',').indexOf('seq');
      return lines.map((l) => l.split(',')[col]!);
    };
    const p = await get(`/v1/download/top_of_book?market_id=${MARKET_ID}&start=${start}&end=${end}`, pro);
    expect(p.status).toBe(200);
    expect(csvSeqs(p.text).filter((s) => olderThan(0).includes(s))).toEqual(olderThan(0));
    const f = await get(`/v1/download/top_of_book?market_id=${MARKET_ID}&start=${start}&end=${end}`, free);
    expect(f.status).toBe(200);
    const got = csvSeqs(f.text);
    expect(got).toEqual(olderThan(DELAY));
  });

  it('GET /v1/orderbook/snapshot: Free sees the book as of now − 15 min at the latest; Professional sees now', async () => {
    const bestBid = async (key: string): Promise<number> => {
      const r = await get(`/v1/orderbook/snapshot?market_id=${MARKET_ID}&outcome=0`, key);
      expect(r.status).toBe(200);
      return r.body.bids[0].price;
    };
    expect(await bestBid(pro)).toBe(0.55);
    expect(await bestBid(free)).toBe(0.3);
  });
});
