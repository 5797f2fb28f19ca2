import fs from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { runIngest } from '../../ingest/run.js';
import { syntheticMarkets } from '../../sim/simulate/venue.js';
import { CataloguePoller } from '../../src/poll/poller.js';
import { quietLog, tempDir } from '../helpers/capture-files.js';
import { files } from '../helpers/lake-files.js';
import { query } from '../ingest/fills-oracle.js';
import { catalogueVenue, readPoll, recordsOf } from './poll-helpers.js';

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

type J = Record<string, unknown>;
const markets = syntheticMarkets(6, 31);
const [tickChanged, resolvedNo, resolvedYes, paused] = markets.map((m) => m.conditionId) as [string, string, string, string];

/** What the test did to the catalogue, and what each market's definition must then be (an independent reading). */
function expected(cid: string): { tick: number; closed: boolean; winner: number | null; accepting: boolean } {
  const m = markets.find((x) => x.conditionId === cid)!;
  return {
    tick: cid === tickChanged ? (m.tick === '0.01' ? 0.001 : 0.01) : Number(m.tick),
    closed: cid === resolvedNo || cid === resolvedYes,
    winner: cid === resolvedNo ? 1 : cid === resolvedYes ? 0 : null,
    accepting: !(cid === resolvedNo || cid === resolvedYes || cid === paused),
  };
}

async function changedVenue() {
  const v = await catalogueVenue({ markets, seed: 9 });
  cleanups.push(() => v.venue.close());
  const change = () => {
    v.catalogue.setTickSize(tickChanged, expected(tickChanged).tick === 0.001 ? '0.001' : '0.01');
    v.catalogue.resolve(resolvedNo, 1);
    v.catalogue.resolve(resolvedYes, 0);
    v.catalogue.setAcceptingOrders(paused, false);
  };
  return { ...v, change };
}

const byCid = (records: J[], key: string): Map<string, J> => new Map(records.map((r) => [String(r[key]), r]));

describe('the simulated catalogue', () => {
  it('serves, in the next poll after a change, the new tick size, accepting flag and resolution', async () => {
    const v = await changedVenue();
    const dir = tempDir('poll-changes');
    const poller = await CataloguePoller.prepare({ outDir: dir, pollerId: 'p', gammaUrl: v.gammaUrl, clobUrl: v.clobUrl, periodSeconds: 60, log: quietLog });
    const before = readPoll((await poller.pollOnce())!.file);
    v.change();
    const after = readPoll((await poller.pollOnce())!.file);
    for (const [lines, changed] of [
      [before, false],
      [after, true],
    ] as const) {
      const gamma = byCid(recordsOf(lines, 'gamma_markets'), 'conditionId');
      const events = byCid(
        recordsOf(lines, 'gamma_events').flatMap((e) => e.markets as J[]),
        'conditionId',
      );
      const clob = byCid(recordsOf(lines, 'clob_markets'), 'condition_id');
      for (const m of markets) {
        const want = changed ? expected(m.conditionId) : { tick: Number(m.tick), closed: false, winner: null, accepting: true };
        for (const g of [gamma.get(m.conditionId)!, events.get(m.conditionId)!]) {
          expect(g).toMatchObject({ orderPriceMinTickSize: want.tick, closed: want.closed, acceptingOrders: want.accepting });
          expect(g.clobTokenIds).toBe(`["${m.tokens[0]}", "${m.tokens[1]}"]`);
          // The generator's market id, so a generated history and the polled catalogue name the market alike.
          expect(g.id).toBe(m.id);
          if (want.winner === null) expect(g.umaResolutionStatus).toBeUndefined();
          else expect(g).toMatchObject({ umaResolutionStatus: 'resolved', outcomePrices: want.winner === 0 ? '["1", "0"]' : '["0", "1"]' });
        }
        const c = clob.get(m.conditionId)!;
        expect(c).toMatchObject({ minimum_tick_size: want.tick, closed: want.closed, accepting_orders: want.accepting });
        expect(c.tokens).toEqual(m.tokens.map((t, i) => expect.objectContaining({ token_id: t, winner: want.winner === i })));
      }
    }
  });

  it("each endpoint's page lands through pmlake's metadata ingest: condition id, tokens, tick size, closed, resolved, winner", async () => {
    const v = await changedVenue();
    v.change();
    const work = tempDir('poll-ingest');
    const pages: Record<string, string> = {
      'gamma_markets.json': `${v.gammaUrl}/markets/keyset?limit=100`,
      'gamma_events.json': `${v.gammaUrl}/events/keyset?limit=100`,
      'clob_markets.json': `${v.clobUrl}/markets`,
    };
    for (const [name, url] of Object.entries(pages)) {
      const res = await fetch(url);
      expect(res.status).toBe(200);
      const sub = path.join(work, name.replace('.json', ''));
      fs.mkdirSync(sub);
      fs.writeFileSync(path.join(sub, name), await res.text());
      // Each endpoint into a lake of its own, so no other source fills in what it lacks.
      const lake = path.join(work, `lake-${name}`);
      const report = await runIngest([sub], { lakeDir: lake });
      expect(report.failed).toBe(0);
      expect(report.issues).toEqual([]);
      const rows = await query(`SELECT * FROM read_parquet(${files(lake, 'catalog/markets')})`);
      expect(rows.map((r) => r.condition_id).sort()).toEqual(markets.map((m) => m.conditionId).sort());
      for (const m of markets) {
        const row = rows.find((r) => r.condition_id === m.conditionId)!;
        const want = expected(m.conditionId);
        expect(row.outcome_token_ids).toEqual(m.tokens);
        expect(Number(row.tick_size)).toBe(want.tick);
        expect(row).toMatchObject({ closed: want.closed, resolved: want.winner !== null, winning_outcome: want.winner });
      }
    }
  });
});
