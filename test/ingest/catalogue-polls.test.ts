import fs from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { runIngest } from '../../ingest/run.js';
import { currentVersion } from '../../src/lake/versions.js';
import { query, tempDir } from './fills-oracle.js';
import { files } from '../helpers/lake-files.js';
import {
  cid,
  clobMarket,
  expectedDefinitions,
  gammaMarket,
  POLL_STARTS,
  pollObservations,
  scenarioPoll,
  writePoll,
  type Definition,
} from '../helpers/catalogue-polls.js';

/**
 * Catalogue poll files land point-in-time market definitions: the rows are exactly the observations that change the
 * definition in force (computed independently in test/helpers/catalogue-polls.ts), the same whether the polls come in
 * one batch or one by one, and nothing more on a re-run; bad lines are issues naming file and line.
 */
const tmp = tempDir('pmlake-polls-');
afterAll(() => tmp.cleanup());

async function definitions(lake: string): Promise<Definition[]> {
  const rows = await query(
    `SELECT condition_id, source, strftime(valid_from, '%Y-%m-%dT%H:%M:%S.%g') || 'Z' AS valid_from, market_id, question, slug, outcomes, tick_size::DOUBLE AS tick_size,
            min_order_size::DOUBLE AS min_order_size, active, closed, accepting_orders, neg_risk,
            strftime(end_date, '%Y-%m-%dT%H:%M:%S.%g') || 'Z' AS end_date, resolved, winning_outcome, outcome_token_ids
     FROM read_parquet(${files(lake, 'catalog/market_definitions')}) ORDER BY condition_id, source, valid_from`,
  );
  return rows as unknown as Definition[];
}

const polls = [0, 1, 2].map(scenarioPoll);
const written = (dir: string) => polls.map((p, i) => writePoll(dir, POLL_STARTS[i]!, p));

describe('catalogue poll files → market_definitions', () => {
  const one = path.join(tmp.dir, 'one');
  const lakeA = path.join(tmp.dir, 'lake-a');
  const lakeB = path.join(tmp.dir, 'lake-b');
  const inputs = written(one);

  it('one batch: the rows are the changes, a tick-size change and a resolution among them', async () => {
    const r = await runIngest([one], { lakeDir: lakeA });
    expect(r.failed).toBe(0);
    const got = await definitions(lakeA);
    const want = expectedDefinitions(polls);
    expect(got).toEqual(want);
    const m1 = want.filter((d) => d.condition_id === cid(1) && d.source === 'gamma');
    expect(m1.map((d) => d.tick_size)).toEqual([0.01, 0.001]);
    const m2 = want.filter((d) => d.condition_id === cid(2));
    expect(m2.filter((d) => d.resolved).map((d) => [d.source, d.winning_outcome, d.valid_from.slice(0, 10)])).toEqual([
      ['clob', 1, '2026-06-01'],
      ['gamma', 1, '2026-06-01'],
    ]);
    // M6 is neg-risk by its event; M5 has no token ids: an issue naming its line, and no row.
    expect(got.find((d) => d.condition_id === cid(6))?.neg_risk).toBe(true);
    expect(got.some((d) => d.condition_id === cid(5))).toBe(false);
    const tokenless = r.issues.filter((i) => i.message.includes(cid(5)));
    expect(tokenless.map((i) => [path.basename(i.file), i.line])).toEqual(
      inputs.flatMap((f) => [
        [path.basename(f), 4],
        [path.basename(f), 9],
      ]),
    );
    // The catalogue landed as from a metadata file, and /v1/status's freshness has the newest received_at.
    const markets = await query(`SELECT condition_id, tick_size::DOUBLE AS t, resolved FROM read_parquet(${files(lakeA, 'catalog/markets')}) ORDER BY 1`);
    expect(markets.find((m) => m.condition_id === cid(2))?.resolved).toBe(true);
    const newest = polls[2]!.map((l) => ('at' in l ? Date.parse(l.at) : 0)).reduce((a, b) => Math.max(a, b));
    expect(Date.parse(currentVersion(lakeA).manifest.landed_to!.catalogue!)).toBe(newest);
  });

  it('a market repeated on two pages, and one inserted mid-paging, give exactly one observation each', async () => {
    const got = await definitions(lakeA);
    const gamma = (n: number) => got.filter((d) => d.condition_id === cid(n) && d.source === 'gamma').map((d) => d.valid_from);
    // M4 is on pages 1 and 2 of poll 1: one row, from the last page's copy (received at +1 s).
    expect(gamma(4)).toEqual(['2026-05-01T10:00:01.000Z']);
    // M3 appears in poll 2 on the last page only (received at +2 s): one row from there.
    expect(gamma(3)).toEqual(['2026-05-01T10:05:02.000Z']);
  });

  it('one by one gives the same rows; re-ingesting changes nothing', async () => {
    for (const [i, f] of inputs.entries()) {
      const r = await runIngest([f], { lakeDir: lakeB });
      // One observation per market and source of the poll: none lost, none doubled by the repeated rows.
      expect(r.counts.catalogue_observations).toBe(pollObservations(polls[i]!).length);
    }
    expect(await definitions(lakeB)).toEqual(await definitions(lakeA));
    // The catalogue too: a record re-sent by a later poll of the batch wins, as a later batch's does. The scenario's
    // Gamma records keep one updatedAt while M2 resolves, so only the order of the polls can tell the copies apart.
    const catalogue = async (lake: string) => query(`SELECT * EXCLUDE (sources) FROM read_parquet(${files(lake, 'catalog/markets')}) ORDER BY id`);
    const markets = await catalogue(lakeA);
    expect(markets.find((m) => m.condition_id === cid(2))?.outcome_prices).toEqual([0, 1]);
    expect(await catalogue(lakeB)).toEqual(markets);
    const before = currentVersion(lakeB).version;
    // The same files again (the ledger skips them), and copies under other names (staged, and nothing changes).
    const again = await runIngest([one], { lakeDir: lakeB });
    expect(again.skipped).toBe(3);
    const copies = path.join(tmp.dir, 'copies');
    fs.mkdirSync(copies);
    for (const f of inputs) fs.writeFileSync(path.join(copies, path.basename(f).replace('-test', '-other')), fs.readFileSync(f, 'utf8') + '\n');
    const r = await runIngest([copies], { lakeDir: lakeB });
    expect(r.rows_added.market_definitions ?? 0).toBe(0);
    expect(await definitions(lakeB)).toEqual(await definitions(lakeA));
    expect(currentVersion(lakeB).version).toBeGreaterThanOrEqual(before);
  });

  it('one batch staged out of time order (poll 3, 1, 2) gives the same rows: a later poll made redundant is dropped', async () => {
    const lake = path.join(tmp.dir, 'lake-c');
    const r = await runIngest([inputs[2]!, inputs[0]!, inputs[1]!], { lakeDir: lake });
    expect(r.issues.filter((i) => i.message.startsWith('not ingested'))).toEqual([]);
    expect(r.batches).toBe(1);
    expect(await definitions(lake)).toEqual(await definitions(lakeA));
  });

  it('bad input: a non-JSON page, an error line, a torn last line, a page of unknown records → issues with file and line; the rest lands', async () => {
    const dir = path.join(tmp.dir, 'bad');
    const lake = path.join(tmp.dir, 'lake-bad');
    const at = '2026-07-01T00:00:01.000Z';
    const ok = { n: 40, tick: 0.01, active: true, closed: false, accepting: true, end: '2026-08-01T00:00:00Z' };
    const lines = [
      { endpoint: 'gamma_markets' as const, body: '[{"id": "1", "conditionId": ', at },
      { endpoint: 'gamma_markets' as const, body: JSON.stringify([gammaMarket(ok)]), at },
      { endpoint: 'gamma_events' as const, body: JSON.stringify([{ foo: 1 }]), at },
      { error: 'HTTP 502 after 3 tries', endpoint: 'gamma_events', at },
      { endpoint: 'clob_markets' as const, body: JSON.stringify({ data: [clobMarket({ ...ok, n: 41 })], next_cursor: 'LTE=' }), at },
      {
        endpoint: 'clob_markets' as const,
        body: JSON.stringify({ data: Array.from({ length: 25 }, (_, i) => clobMarket({ ...ok, n: 100 + i, tokens: false })), next_cursor: 'LTE=' }),
        at,
      },
      { raw: '{"kind":"page","endpoint":"clob_markets","body":"[{\\"condition' },
    ];
    const file = writePoll(dir, '2026-07-01T00:00:00Z', lines, { end: false });
    const r = await runIngest([dir], { lakeDir: lake });
    expect(r.failed).toBe(0);
    const issues = r.issues.map((i) => [path.basename(i.file), i.line ?? null, i.message.split(/[:;(]/)[0]!.trim()]);
    const name = path.basename(file);
    expect(issues).toEqual([
      [name, 5, 'catalogue poll error'],
      [name, 8, 'invalid JSON line'],
      [name, null, 'catalogue poll file has no end line'],
      [name, 2, 'page body is not JSON'],
      [name, 4, 'page record'],
      // 25 CLOB markets without tokens on line 7: the first 20 named, then a count of the rest.
      ...Array.from({ length: 20 }, (_, i) => [name, 7, `clob market ${cid(100 + i)} has no token ids`]),
      [name, null, '5 more market'],
    ]);
    expect(r.issues.at(-1)?.count).toBe(5);
    // A later format is not landed, and not recorded as landed (a newer ingest may read it).
    const later = path.join(tmp.dir, 'later');
    fs.mkdirSync(later);
    const text = fs.readFileSync(file, 'utf8').replace('"format":1', '"format":2');
    fs.writeFileSync(path.join(later, 'catalogue-20260702T000000Z-test.jsonl'), text);
    const r2 = await runIngest([later], { lakeDir: lake });
    expect([r2.failed, r2.issues.map((i) => [i.line, i.message.split(':')[0]])]).toEqual([1, [[1, 'not ingested (catalogue poll files (pmlake catalogue))']]]);
    const got = await definitions(lake);
    expect(got.map((d) => [d.condition_id, d.source])).toEqual([
      [cid(40), 'gamma'],
      [cid(41), 'clob'],
    ]);
  });
});
