import fs from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { runIngest } from '../../ingest/run.js';
import { derivedMarketId } from '../../ingest/catalog.js';
import { md5Hex, query, tempDir } from './fills-oracle.js';
import { files } from '../helpers/lake-files.js';

/**
 * The catalogue merge: a market first seen on the tape, then described by a CLOB record (condition id in
 * upper case), then by Gamma, then updated — one market throughout, ids and tokens following the best source.
 */
const BOOKS = path.resolve('test/fixtures/venue/ws/2025-02-27_initial_books.json');
type Msg = { market: string; asset_id: string };
const books = JSON.parse(fs.readFileSync(BOOKS, 'utf8')) as Msg[];
const CID = books[0]!.market.toLowerCase();
const TOKS = books.filter((b) => b.market.toLowerCase() === CID).map((b) => b.asset_id);
const ALL_CIDS = new Set(books.map((b) => b.market.toLowerCase()));

const tmp = tempDir('pmlake-catalog-');
afterAll(() => tmp.cleanup());
const lake = path.join(tmp.dir, 'lake');

function write(name: string, body: unknown): string {
  const f = path.join(tmp.dir, name);
  fs.writeFileSync(f, JSON.stringify(body));
  return f;
}

function gammaMarket(updatedAt: string, volume: string): Record<string, unknown> {
  return {
    id: '424242',
    question: 'Gamma question?',
    conditionId: CID,
    slug: 'gamma-question',
    outcomes: '["Yes", "No"]',
    outcomePrices: '["0.4", "0.6"]',
    clobTokenIds: JSON.stringify([TOKS[1], TOKS[0]]),
    volume,
    active: true,
    closed: false,
    updatedAt,
    category: 'Politics',
  };
}

const markets = () => query(`SELECT * FROM read_parquet(${files(lake, 'catalog/markets')})`);
const tokens = () => query(`SELECT * FROM read_parquet(${files(lake, 'catalog/tokens')}) ORDER BY token_id`);

describe('catalogue merge', () => {
  let derivedId = '';

  it('a market seen only on the tape gets a placeholder with a stable derived id; every token is reachable', async () => {
    await runIngest([BOOKS], { lakeDir: lake });
    const ms = await markets();
    expect(new Set(ms.map((m) => m.condition_id))).toEqual(ALL_CIDS);
    for (const m of ms) {
      expect(m).toMatchObject({ id: derivedMarketId(String(m.condition_id), md5Hex), id_derived: true, sources: ['tape'], outcomes: null });
    }
    const ts = await tokens();
    expect(ts.map((t) => t.token_id).sort()).toEqual([...new Set(books.map((b) => b.asset_id))].sort());
    // Tape order says nothing about outcomes: no index until metadata arrives.
    expect(ts.every((t) => t.outcome_index === null)).toBe(true);
    const m = ms.find((x) => x.condition_id === CID)!;
    derivedId = String(m.id);
    const [snap] = await query(`SELECT count(*) AS n FROM read_parquet(${files(lake, 'book_snapshots')})
                                WHERE asset_id IN ('${TOKS.join("','")}')`);
    expect(Number(m.orderbook_count)).toBe(Number(snap!.n));
    expect(Number(m.orderbook_count)).toBeGreaterThan(0);
    expect(m.data_from).not.toBeNull();
  });

  it('derived ids are the same in another lake', async () => {
    const other = path.join(tmp.dir, 'other');
    await runIngest([BOOKS], { lakeDir: other });
    const [m] = await query(`SELECT id FROM read_parquet(${files(other, 'catalog/markets')}) WHERE condition_id = '${CID}'`);
    expect(m!.id).toBe(derivedId);
  });

  it('a CLOB record (upper-case condition id) completes the placeholder: same market, outcomes and token order', async () => {
    const before = (await markets()).length;
    const clob = write('clob.json', [
      {
        condition_id: CID.toUpperCase().replace('0X', '0x'),
        question_id: '0x01',
        question: 'CLOB question?',
        market_slug: 'clob-q',
        active: true,
        closed: false,
        minimum_tick_size: 0.01,
        neg_risk: false,
        end_date_iso: '2025-12-31T00:00:00Z',
        tags: ['Politics'],
        tokens: [
          { token_id: TOKS[0], outcome: 'Yes', price: 0.4, winner: false },
          { token_id: TOKS[1], outcome: 'No', price: 0.6, winner: false },
        ],
      },
    ]);
    await runIngest([clob], { lakeDir: lake });
    const ms = await markets();
    expect(ms.length).toBe(before);
    const m = ms.find((x) => x.condition_id === CID)!;
    expect(m).toMatchObject({ id: derivedId, question: 'CLOB question?', outcomes: ['Yes', 'No'], outcome_token_ids: TOKS, sources: ['clob', 'tape'] });
    const ts = (await tokens()).filter((t) => TOKS.includes(String(t.token_id)));
    expect(ts.map((t) => [t.token_id, t.market_id, t.outcome_index, t.outcome_label]).sort()).toEqual(
      [
        [TOKS[0], derivedId, 0, 'Yes'],
        [TOKS[1], derivedId, 1, 'No'],
      ].sort(),
    );
  });

  it('Gamma brings the real id (tokens follow) and outranks the CLOB record', async () => {
    await runIngest([write('gamma1.json', gammaMarket('2025-03-01T00:00:00Z', '100.5'))], { lakeDir: lake });
    const ms = await markets();
    expect(ms.some((x) => x.id === derivedId)).toBe(false);
    const m = ms.find((x) => x.condition_id === CID)!;
    expect(m).toMatchObject({
      id: '424242',
      id_derived: false,
      question: 'Gamma question?',
      outcome_token_ids: [TOKS[1], TOKS[0]],
      volume: 100.5,
      category: 'politics',
      sources: ['clob', 'gamma', 'tape'],
    });
    const ts = (await tokens()).filter((t) => TOKS.includes(String(t.token_id)));
    expect(ts.map((t) => [t.token_id, t.market_id, t.outcome_index]).sort()).toEqual(
      [
        [TOKS[1], '424242', 0],
        [TOKS[0], '424242', 1],
      ].sort(),
    );
  });

  it('newer metadata updates fields; an older record arriving later does not', async () => {
    await runIngest([write('gamma2.json', gammaMarket('2025-03-05T00:00:00Z', '250'))], { lakeDir: lake });
    let m = (await markets()).find((x) => x.condition_id === CID)!;
    expect(m.volume).toBe(250);
    await runIngest([write('gamma0.json', gammaMarket('2025-02-01T00:00:00Z', '7'))], { lakeDir: lake });
    m = (await markets()).find((x) => x.condition_id === CID)!;
    expect(m.volume).toBe(250);
    expect(m.updated_at).toBe('2025-03-05 00:00:00');
  });
});
