import fs from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { runIngest } from '../../ingest/run.js';
import { files } from '../helpers/lake-files.js';
import { cid, clobMarket, expectedDefinitions, gammaMarket, tok, writePoll, type MarketState, type PollLine } from '../helpers/catalogue-polls.js';
import { query, tempDir } from './fills-oracle.js';

/**
 * Identifiers and text from outside, in the catalogue (lake/README.md, "What the ingest accepts"): poll pages and a
 * metadata file holding markets with a malformed condition id, a token id of 100,000 digits, one of 79 digits, a
 * question of 100 kB and a Gamma id that is not a number, among good markets. Each is an issue naming the file and
 * its line; the catalogue (markets, tokens) and the point-in-time definitions hold the good markets only, as plain
 * TypeScript computes them from the input without the bad records.
 */
const tmp = tempDir('pmlake-ident-cat-');
afterAll(() => tmp.cleanup());

type J = Record<string, unknown>;
const tokenOk = (x: string): boolean => /^[0-9]{1,78}$/.test(x) && BigInt(x) < 2n ** 256n;
const conditionOk = (x: string): boolean => /^0x[0-9a-fA-F]{64}$/.test(x);
/** A record the rules accept, read from the record itself: Gamma (clobTokenIds as JSON text) or CLOB (tokens[]). */
function recordOk(r: J): boolean {
  const clob = 'condition_id' in r;
  const condition = String(clob ? r.condition_id : r.conditionId);
  const tokens = clob ? (r.tokens as J[]).map((t) => String(t.token_id)) : (JSON.parse(String(r.clobTokenIds)) as string[]);
  const idOk = clob || /^[0-9]{1,17}$/.test(String(r.id));
  return conditionOk(condition) && tokens.every(tokenOk) && idOk && Buffer.byteLength(String(r.question)) <= 4096;
}

const st = (n: number): MarketState => ({ n, tick: 0.01, active: true, closed: false, accepting: true, end: '2026-06-30T00:00:00Z' });
const HUGE = '1'.repeat(100_000);
const LONG = '9'.repeat(79);

describe('identifiers in the catalogue', () => {
  it('a poll file: each refused market is an issue with its line; catalogue and definitions hold the good ones', async () => {
    const g = (n: number, over: J = {}): J => ({ ...gammaMarket(st(n)), ...over });
    const c = (n: number, over: J = {}): J => ({ ...clobMarket(st(n)), ...over });
    const pages: { endpoint: 'gamma_markets' | 'gamma_events' | 'clob_markets'; records: J[]; wrap: (r: J[]) => J }[] = [
      { endpoint: 'gamma_markets', records: [g(1), g(2, { conditionId: '0x1234' })], wrap: (r) => ({ markets: r, next_cursor: 'a' }) },
      {
        endpoint: 'gamma_markets',
        records: [g(3, { clobTokenIds: JSON.stringify([HUGE, tok(3, 1)]) }), g(4)],
        wrap: (r) => ({ markets: r, next_cursor: 'b' }),
      },
      { endpoint: 'gamma_markets', records: [g(9, { id: 'abc' })], wrap: (r) => ({ markets: r }) },
      {
        endpoint: 'gamma_events',
        records: [g(5, { question: 'Q'.repeat(100_000) }), g(6)],
        wrap: (r) => ({ events: [{ id: '9001', ticker: 'grp', slug: 'grp', title: 'Group', markets: r }] }),
      },
      {
        endpoint: 'clob_markets',
        records: [
          c(1),
          c(7, { condition_id: 'not-an-id' }),
          c(8, {
            tokens: [
              { token_id: LONG, outcome: 'Yes', price: 0.5, winner: false },
              { token_id: tok(8, 1), outcome: 'No', price: 0.5, winner: false },
            ],
          }),
        ],
        wrap: (r) => ({ data: r, next_cursor: 'LTE=', limit: 3, count: 3 }),
      },
    ];
    const at = (i: number) => new Date(Date.parse('2026-05-01T10:00:00Z') + i * 1000).toISOString();
    const lines = (keep: (r: J) => boolean): PollLine[] =>
      pages.map((p, i) => ({ endpoint: p.endpoint, body: JSON.stringify(p.wrap(p.records.filter(keep))), at: at(i) }));
    const dir = path.join(tmp.dir, 'polls');
    const file = writePoll(
      dir,
      '2026-05-01T10:00:00Z',
      lines(() => true),
    );
    const lake = path.join(tmp.dir, 'lake-polls');
    const r = await runIngest([dir], { lakeDir: lake, threads: 1 });
    expect(r.failed).toBe(0);

    // Line 1 is the header: page i is line 2 + i. One issue per refused record, at its page's line.
    const wantLines = pages.flatMap((p, i) => p.records.filter((x) => !recordOk(x)).map(() => 2 + i));
    expect(wantLines).toEqual([2, 3, 4, 5, 6, 6]);
    expect(r.issues.map((i) => ({ file: i.file, line: i.line })).sort((a, b) => a.line! - b.line!)).toEqual(wantLines.map((line) => ({ file, line })));
    for (const i of r.issues) expect(i.message.length).toBeLessThan(400);

    // The catalogue: the good records' markets and tokens, nothing of the bad ones.
    const good = pages.flatMap((p) => p.records.filter(recordOk));
    const goodConditions = [...new Set(good.map((x) => String(x.conditionId ?? x.condition_id)))].sort();
    const goodTokens = [
      ...new Set(good.flatMap((x) => ('tokens' in x ? (x.tokens as J[]).map((t) => String(t.token_id)) : (JSON.parse(String(x.clobTokenIds)) as string[])))),
    ].sort();
    const markets = await query(`SELECT condition_id, length(question) AS q FROM read_parquet(${files(lake, 'catalog/markets')}) ORDER BY 1`);
    expect(markets.map((m) => m.condition_id)).toEqual(goodConditions);
    expect(Math.max(...markets.map((m) => Number(m.q)))).toBeLessThan(100);
    const tokens = await query(`SELECT token_id FROM read_parquet(${files(lake, 'catalog/tokens')}) ORDER BY 1`);
    expect(tokens.map((t) => t.token_id)).toEqual(goodTokens);

    // market_definitions: exactly what the same poll without the bad records gives.
    const defs = await query(`SELECT condition_id, source FROM read_parquet(${files(lake, 'catalog/market_definitions')}) ORDER BY 1, 2`);
    const want = expectedDefinitions([lines(recordOk)]).map((d) => ({ condition_id: d.condition_id, source: d.source }));
    expect(defs).toEqual(want);
    expect(want.map((d) => d.condition_id)).toEqual(expect.arrayContaining([cid(1), cid(4), cid(6)]));
  });

  it('a metadata file and the catalogue CSV: refused records are issues with their line, the rest lands', async () => {
    const dir = path.join(tmp.dir, 'meta');
    fs.mkdirSync(dir, { recursive: true });
    const gamma = path.join(dir, 'gamma_markets.jsonl');
    const recs = [gammaMarket(st(11)), { ...gammaMarket(st(12)), conditionId: `0x${'g'.repeat(64)}` }, gammaMarket(st(13))];
    fs.writeFileSync(gamma, recs.map((x) => JSON.stringify(x)).join('\n') + '\n');
    const csv = path.join(dir, 'markets_catalog.csv');
    fs.writeFileSync(
      csv,
      ['market_id,question,active', '700001,Good one?,1', `x7,Bad id?,1`, `700003,${'Q'.repeat(5000)},1`, '700004,Also good?,1'].join('\n') + '\n',
    );
    const lake = path.join(tmp.dir, 'lake-meta');
    const r = await runIngest([dir], { lakeDir: lake, threads: 1 });
    expect(r.failed).toBe(0);
    expect(r.issues.map((i) => ({ file: i.file, line: i.line })).sort((a, b) => a.file.localeCompare(b.file) || a.line! - b.line!)).toEqual([
      { file: gamma, line: 2 },
      { file: csv, line: 3 },
      { file: csv, line: 4 },
    ]);
    const markets = await query(`SELECT id, condition_id FROM read_parquet(${files(lake, 'catalog/markets')}) ORDER BY id`);
    expect(markets).toEqual([
      { id: '600011', condition_id: cid(11) },
      { id: '600013', condition_id: cid(13) },
      { id: '700001', condition_id: null },
      { id: '700004', condition_id: null },
    ]);
  });
});
