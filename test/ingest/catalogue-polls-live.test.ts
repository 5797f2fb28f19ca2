import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { runIngest } from '../../ingest/run.js';
import { syntheticMarkets } from '../../sim/simulate/venue.js';
import { CataloguePoller } from '../../src/poll/poller.js';
import { quietLog } from '../helpers/capture-files.js';
import { files } from '../helpers/lake-files.js';
import { expectedDefinitions, type Page } from '../helpers/catalogue-polls.js';
import { catalogueVenue, closedPolls, readPoll } from '../poll/poll-helpers.js';
import { query, tempDir } from './fills-oracle.js';

/**
 * The real poller's files against the simulated venue's catalogue, landed: a tick-size change and a resolution
 * between two polls give exactly the rows the plain-TypeScript reading of those files says
 * (test/helpers/catalogue-polls.ts), with no issue.
 */
const tmp = tempDir('pmlake-polls-live-');
let close: (() => Promise<void>) | undefined;
afterAll(async () => {
  await close?.();
  tmp.cleanup();
});

describe('pmlake catalogue files → market_definitions', () => {
  it('two polls around a tick-size change and a resolution land exactly their changes', async () => {
    const markets = syntheticMarkets(12, 5);
    const v = await catalogueVenue({ markets, seed: 3, gammaMaxLimit: 100, clobPageSize: 5 });
    close = () => v.venue.close();
    const out = path.join(tmp.dir, 'polls');
    const poller = await CataloguePoller.prepare({
      outDir: out,
      pollerId: 'p1',
      gammaUrl: v.gammaUrl,
      clobUrl: v.clobUrl,
      periodSeconds: 3600,
      gammaLimit: 5,
      http: { timeoutMs: 5_000, retries: 4, baseDelayMs: 20, maxDelayMs: 200 },
      log: quietLog,
    });
    await poller.pollOnce();
    const ticked = markets.find((m) => m.tick === '0.01')!.conditionId;
    const resolved = markets.find((m) => m.conditionId !== ticked)!.conditionId;
    v.catalogue.setTickSize(ticked, '0.001');
    v.catalogue.resolve(resolved, 1);
    await poller.pollOnce();

    const polls = closedPolls(out).map((f) =>
      readPoll(f).flatMap((l): Page[] => (l.kind === 'page' ? [{ endpoint: l.endpoint!, body: l.body!, at: String(l.received_at) }] : [])),
    );
    expect(polls).toHaveLength(2);
    const lake = path.join(tmp.dir, 'lake');
    const r = await runIngest([out], { lakeDir: lake });
    expect(r.issues).toEqual([]);
    const got = await query(
      `SELECT condition_id, source, strftime(valid_from, '%Y-%m-%dT%H:%M:%S.%g') || 'Z' AS valid_from, tick_size::DOUBLE AS tick_size, resolved, winning_outcome
       FROM read_parquet(${files(lake, 'catalog/market_definitions')}) ORDER BY condition_id, source, valid_from`,
    );
    const want = expectedDefinitions(polls).map((d) => ({
      condition_id: d.condition_id,
      source: d.source,
      valid_from: d.valid_from,
      tick_size: d.tick_size,
      resolved: d.resolved,
      winning_outcome: d.winning_outcome,
    }));
    expect(got).toEqual(want);
    // Every market once per source from the first poll, then only the two that changed, once per source.
    expect(got.length).toBe(markets.length * 2 + 4);
    const later = got.filter((d) => Date.parse(String(d.valid_from)) >= Date.parse(polls[1]![0]!.at));
    expect(later.map((d) => [d.condition_id, d.tick_size, d.winning_outcome]).sort()).toEqual(
      [
        [ticked, 0.001, null],
        [ticked, 0.001, null],
        [resolved, Number(markets.find((m) => m.conditionId === resolved)!.tick), 1],
        [resolved, Number(markets.find((m) => m.conditionId === resolved)!.tick), 1],
      ].sort(),
    );
  });
});
