import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runIngest, type IngestReport } from '../../ingest/run.js';
import { derivedMarketId } from '../../ingest/catalog.js';
import { d6, expectedTrades, md5Hex, query, tempDir, type Trade } from './fills-oracle.js';
import { currentFiles } from '../../src/lake/versions.js';
import { files } from '../helpers/lake-files.js';

const FILLS = path.resolve('test/fixtures/fills');
const GAMMA = path.resolve('test/fixtures/venue/markets/gamma_market_btc_5m.json');
const FILES = ['order_filled_synthetic.jsonl', 'order_filled_camel.json', 'goldsky_order_filled.csv'].map((f) => path.join(FILLS, f));
const gamma = JSON.parse(fs.readFileSync(GAMMA, 'utf8')) as Record<string, string>;
const TOKENS = JSON.parse(gamma.clobTokenIds!) as string[];
const OUTCOMES = JSON.parse(gamma.outcomes!) as string[];

const tmp = tempDir('pmlake-fills-');
const lake = path.join(tmp.dir, 'lake');
let report: IngestReport;
const expected: Trade[] = FILES.flatMap(expectedTrades);

beforeAll(async () => {
  report = await runIngest([GAMMA, ...FILES], { lakeDir: lake });
});
afterAll(() => tmp.cleanup());

const tradesGlob = () => `read_parquet(${files(lake, 'trades')})`;

describe('on-chain fills → trades', () => {
  it('the oracle itself covers the cases the fixtures were written for', () => {
    expect(expected.map((t) => t.side)).toContain('buy');
    expect(expected.map((t) => t.side)).toContain('sell');
    expect(expected.some((t) => t.size > 2n ** 53n)).toBe(true);
    expect(expected.length).toBe(9); // 15 records − 4 exchange echoes − 1 other event − 1 beyond 2^128
  });

  it('lands one row per match with token, side, price, size, usd value and fee derived exactly', async () => {
    const rows = await query(`SELECT id, token_id, epoch(ts)::BIGINT AS ts, block_number, log_index, side, price, size,
      usd_value, fee, maker, taker, collateral FROM ${tradesGlob()} ORDER BY id`);
    const want = [...expected]
      .sort((a, b) => a.id.localeCompare(b.id))
      .map((t) => ({
        id: t.id,
        token_id: t.token_id,
        ts: String(t.ts),
        block_number: t.block_number === null ? null : String(t.block_number),
        log_index: t.log_index,
        side: t.side,
        price: d6(t.price),
        size: d6(t.size),
        usd_value: d6(t.usd_value),
        fee: d6(t.fee),
        maker: t.maker,
        taker: t.taker,
        collateral: 'USDC',
      }));
    expect(rows).toEqual(want);
    // Spot checks that do not depend on the oracle: rounding down, rounding up, beyond 2^53.
    const byPrice = new Set(rows.map((r) => r.price));
    expect(byPrice).toContain('0.333333');
    expect(byPrice).toContain('0.666667');
    expect(rows.map((r) => r.size)).toContain('9007199254.740993');
  });

  it('maps tokens to condition, outcome index and label through the catalogue staged in the same batch', async () => {
    const rows = await query(`SELECT DISTINCT token_id, condition_id, outcome_index, outcome_label FROM ${tradesGlob()} ORDER BY token_id`);
    for (const r of rows) {
      const i = TOKENS.indexOf(String(r.token_id));
      if (i === -1) {
        expect(r.outcome_index).toBeNull();
        continue;
      }
      expect(r).toMatchObject({ condition_id: gamma.conditionId!.toLowerCase(), outcome_index: i, outcome_label: OUTCOMES[i] });
    }
    expect(rows.filter((r) => TOKENS.includes(String(r.token_id)))).toHaveLength(2);
  });

  it('reports the rejected fill with its file and line, and counts dropped exchange echoes', () => {
    const issue = report.issues.find((i) => i.file.endsWith('order_filled_synthetic.jsonl'));
    expect(issue).toMatchObject({ line: 6 });
    expect(issue!.message).toMatch(/128 bits/);
    expect(report.counts.fills_exchange_taker_dropped).toBe(4);
    expect(report.counts.fills).toBe(expected.length);
  });

  it('gives an unknown token a placeholder market, and availability counts every trade', async () => {
    const unknown = expected.find((t) => !TOKENS.includes(t.token_id))!;
    const [tok] = await query(`SELECT * FROM read_parquet(${files(lake, 'catalog/tokens')}) WHERE token_id = '${unknown.token_id}'`);
    expect(tok!.market_id).toBe(derivedMarketId(`token:${unknown.token_id}`, md5Hex));
    const [m] = await query(
      `SELECT id, id_derived, trade_count, sources FROM read_parquet(${files(lake, 'catalog/markets')}) WHERE id = '${String(tok!.market_id)}'`,
    );
    expect(m).toMatchObject({ id_derived: true, trade_count: '1', sources: ['fills'] });
    const [btc] = await query(`SELECT trade_count, data_from, data_to FROM read_parquet(${files(lake, 'catalog/markets')}) WHERE id = '${gamma.id}'`);
    const mine = expected.filter((t) => TOKENS.includes(t.token_id));
    const iso = (s: number) => new Date(s * 1000).toISOString().replace('T', ' ').replace('.000Z', '');
    expect(btc).toEqual({
      trade_count: String(mine.length),
      data_from: iso(Math.min(...mine.map((t) => t.ts))),
      data_to: iso(Math.max(...mine.map((t) => t.ts))),
    });
  });

  it('re-ingest adds zero rows and rewrites nothing', async () => {
    const lakeFiles = (['trades', 'candles_1m'] as const).flatMap((d) => currentFiles(lake, d));
    const before = lakeFiles.map((f) => fs.statSync(f).mtimeMs);
    const again = await runIngest([GAMMA, ...FILES], { lakeDir: lake });
    expect(again.skipped).toBe(4);
    expect(again.versions_published).toEqual([]);
    expect((['trades', 'candles_1m'] as const).flatMap((d) => currentFiles(lake, d))).toEqual(lakeFiles);
    expect(Object.values(again.rows_added).reduce((a, b) => a + b, 0)).toBe(0);
    // The same fills under another name (new content hash: one trailing newline) are de-duplicated on trade id.
    const copy = path.join(tmp.dir, 'copy.jsonl');
    fs.writeFileSync(copy, `${fs.readFileSync(FILES[0]!, 'utf8')}\n`);
    const dup = await runIngest([copy], { lakeDir: lake });
    expect(dup.ingested).toBe(1);
    expect(dup.rows_added.trades ?? 0).toBe(0);
    expect(dup.rows_added.candles_1m ?? 0).toBe(0);
    expect(lakeFiles.map((f) => fs.statSync(f).mtimeMs)).toEqual(before);
  });

  it('fills ingested before their metadata gain condition and outcome when it arrives', async () => {
    const lake3 = path.join(tmp.dir, 'lake3');
    await runIngest([FILES[0]!], { lakeDir: lake3 });
    // A function: each call reads the lake's current version (the backfill below publishes a new one).
    const q = () => `SELECT token_id, condition_id, outcome_index, outcome_label FROM read_parquet(${files(lake3, 'trades')})
               WHERE token_id IN ('${TOKENS.join("','")}') ORDER BY id`;
    expect((await query(q())).every((r) => r.outcome_index === null && r.condition_id === null)).toBe(true);
    const r = await runIngest([GAMMA], { lakeDir: lake3 });
    expect(r.counts.trades_outcome_backfilled).toBe(expectedTrades(FILES[0]!).filter((t) => TOKENS.includes(t.token_id)).length);
    for (const row of await query(q())) {
      const i = TOKENS.indexOf(String(row.token_id));
      expect(row).toMatchObject({ condition_id: gamma.conditionId!.toLowerCase(), outcome_index: i, outcome_label: OUTCOMES[i] });
    }
    // The placeholder market the fills created for these tokens is gone: the Gamma market owns them.
    const ms = await query(
      `SELECT id, trade_count FROM read_parquet(${files(lake3, 'catalog/markets')}) WHERE list_has_any(outcome_token_ids, ['${TOKENS.join("','")}'])`,
    );
    expect(ms.map((m) => m.id)).toEqual([gamma.id]);
  });

  it('one file per batch in a single run lands the same trades, candles and catalogue as one batch', async () => {
    const lake4 = path.join(tmp.dir, 'lake4');
    const r = await runIngest([GAMMA, ...FILES], { lakeDir: lake4, batchRows: 1 });
    expect(r.batches).toBe(3); // metadata stages no data-set rows, so it flushes with the first fills file
    for (const ds of ['trades', 'candles_1m', 'catalog/markets', 'catalog/tokens']) {
      const a = `read_parquet(${files(lake, ds)})`;
      const b = `read_parquet(${files(lake4, ds)})`;
      const [d] = await query(`SELECT (SELECT count(*) FROM (FROM ${a} EXCEPT ALL FROM ${b})) + (SELECT count(*) FROM (FROM ${b} EXCEPT ALL FROM ${a})) AS n`);
      expect([ds, d!.n]).toEqual([ds, '0']);
    }
  });

  it('reads a subgraph GraphQL answer {data: {orderFilledEvents: [...]}}', async () => {
    const gql = path.join(tmp.dir, 'subgraph.json');
    fs.writeFileSync(gql, JSON.stringify({ data: { orderFilledEvents: JSON.parse(fs.readFileSync(FILES[1]!, 'utf8')) } }));
    const lake5 = path.join(tmp.dir, 'lake5');
    const r = await runIngest([gql], { lakeDir: lake5 });
    expect(r.issues).toEqual([]);
    const rows = await query(`SELECT id, price, size, side FROM read_parquet(${files(lake5, 'trades')}) ORDER BY id`);
    const want = expectedTrades(FILES[1]!).sort((a, b) => a.id.localeCompare(b.id));
    expect(rows).toEqual(want.map((t) => ({ id: t.id, price: d6(t.price), size: d6(t.size), side: t.side })));
  });

  it('names a malformed JSON line and still lands the good ones', async () => {
    const bad = path.join(tmp.dir, 'bad.jsonl');
    const lines = fs.readFileSync(FILES[0]!, 'utf8').trim().split('\n');
    fs.writeFileSync(bad, [lines[0], '{"event":"OrderFilled", oops', lines[2]].join('\n'));
    const lake2 = path.join(tmp.dir, 'lake2');
    const r = await runIngest([bad], { lakeDir: lake2 });
    expect(r.issues).toContainEqual(expect.objectContaining({ file: bad, line: 2 }));
    const [n] = await query(`SELECT count(*) AS n FROM read_parquet(${files(lake2, 'trades')})`);
    expect(n!.n).toBe('2');
  });
});
